"""The review desk (docs/architecture.md §5): teams review what Jeeves extracted; ops see model usage.

Records the pipeline owns are read-only here except for the review actions (confirm, supersede,
reverse, reject; done/cancel for actions). Sources show message ids, time range and channel name,
never content. Channel config is editable (timezone, purpose, context); its state changes only through
actions that take the commands' own door (`channels.set_state`: epoch, secure range, flush on secure);
deleting a channel purges it from every table.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import Count, QuerySet, Sum
from django.db.models.functions import TruncDay
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from ground.redis import forget_channel_keys
from knowledge import channels, dashboard, forgetting, review
from knowledge.models import (
    Action,
    ActionStatus,
    ChannelConfig,
    ChannelState,
    ConversationSignal,
    Decision,
    DecisionStatus,
    Embedding,
    Entity,
    EntityRelationship,
    FriendlyIdSequence,
    LlmCall,
    MessageReceipt,
    PipelineCounter,
    ReviewAudit,
    RomanBot,
    Summary,
)

admin.site.site_header = "Jeeves review desk"
admin.site.site_title = "Jeeves"
admin.site.index_title = "What Jeeves has recorded"
# The review lists are wide (what a record says, its channel, owner, date, status, confidence): the room goes to
# them rather than to a second copy of the index's model list down the side of every page.
admin.site.enable_nav_sidebar = False


class ReadOnlyAdmin(admin.ModelAdmin):
    """For tables the pipeline owns: viewable, never edited or added by hand."""

    class Media:
        css = {"all": ("knowledge/admin.css",)}  # a record's text gets the width of its list

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


def _source(source_ref: dict | None) -> str:
    if not source_ref:
        return "—"
    ids = source_ref.get("wire_msg_ids", [])
    span = source_ref.get("timestamp_range") or {}
    shown = ", ".join(ids[:5]) + ("…" if len(ids) > 5 else "")
    return f"{len(ids)} message(s): {shown} ({span.get('start', '?')} → {span.get('end', '?')})"


def _history(entries) -> str:
    """A record's audit entries as a table: when, who, what, the fields before and after."""
    rows = list(entries)
    if not rows:
        return "no review yet"

    def changes(entry: ReviewAudit) -> str:
        keys = list(dict.fromkeys([*entry.before, *entry.after]))
        return "; ".join(f"{k}: {entry.before.get(k, '—')} → {entry.after.get(k, '—')}" for k in keys)

    body = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        ((f"{e.at:%Y-%m-%d %H:%M:%S}", e.actor, e.action, changes(e)) for e in rows),
    )
    return format_html(
        '<table class="review-history"><thead><tr><th>when</th><th>who</th><th>what</th>'
        "<th>before → after</th></tr></thead><tbody>{}</tbody></table>",
        body,
    )


def _actor(request: HttpRequest) -> str:
    return request.user.get_username()


class ConfidenceBandFilter(admin.SimpleListFilter):
    title = "confidence"
    parameter_name = "confidence_band"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("high", "high (≥ 0.8)"), ("medium", "medium (0.6 to 0.8)"), ("low", "low (< 0.6)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "high":
            return queryset.filter(confidence__gte=0.8)
        if self.value() == "medium":
            return queryset.filter(confidence__gte=0.6, confidence__lt=0.8)
        if self.value() == "low":
            return queryset.filter(confidence__lt=0.6)
        return queryset


def _actions(**table: _Review | _StateChange) -> tuple[Callable, ...]:
    """A model admin's bulk actions from a table, by name: each row gives its `description` in the menu and
    does its `run` on the selected rows."""

    def make(name: str, row: _Review | _StateChange) -> Callable:
        def run(self: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> None:
            row.run(self, request, queryset, name)

        run.__name__ = name
        return admin.action(description=row.description)(run)

    return tuple(make(name, row) for name, row in table.items())


class _StateChange(NamedTuple):
    """A channel's state change, taking the commands' own door (channels.set_state: epoch bump, secure range,
    Redis flush on secure); the reviewer is told how many channels moved (`done`)."""

    description: str
    state: ChannelState
    done: str

    def run(self, model_admin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet, name: str) -> None:
        by = f"admin:{request.user.get_username()}"
        cids = queryset.values_list("channel_id", flat=True)
        moved = sum(channels.set_state(cid, self.state, by=by).changed for cid in cids)
        model_admin.message_user(request, f"{moved} channel(s) {self.done}.")


class _Review(NamedTuple):
    """A bulk review action: what the reviewer is told was `done`, the `changes` it sets on the selected
    records through their admin's `_review` (taken when it runs), and what the audit calls it (`audited`; by
    default the action's name)."""

    description: str
    done: str
    changes: Callable[[], dict[str, object]] = dict
    audited: str = ""
    level: int = messages.INFO

    def run(self, model_admin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet, name: str) -> None:
        count = model_admin._review(request, queryset, self.audited or name, **self.changes())
        model_admin.message_user(request, f"{count} {model_admin.opts.verbose_name}(s) {self.done}.", level=self.level)


def _to(status: str, *stamped: str, **fixed: object) -> Callable[[], dict[str, object]]:
    """A review's changes: the new `status`, the `fixed` values, and the fields `stamped` with the time it runs."""
    return lambda: {"status": status, **fixed, **dict.fromkeys(stamped, timezone.now())}


@admin.register(ChannelConfig)
class ChannelConfigAdmin(admin.ModelAdmin):
    list_display = ("__str__", "organisation_id", "state", "state_changed_at", "is_personal", "timezone", "left_at")
    list_filter = ("state", "is_personal", "organisation_id", "transport")
    search_fields = ("channel_id", "channel_name", "purpose")
    # State is read-only here: it changes only through the actions below, which take the same door as
    # the commands (channels.set_state: epoch bump, secure range, Redis flush on secure).
    actions = _actions(
        step_out=_StateChange("Step out (pause) selected channels", ChannelState.PAUSED, "stepped out"),
        resume=_StateChange("Resume selected channels", ChannelState.ACTIVE, "resumed"),
        secure_mode=_StateChange(
            "Secure mode for selected channels (flushes what Jeeves holds in memory)",
            ChannelState.SECURE,
            "put in secure mode",
        ),
        secure_mode_off=_StateChange(
            "End secure mode for selected channels", ChannelState.ACTIVE, "out of secure mode"
        ),
    )
    readonly_fields = (
        "channel_id",
        "organisation_id",
        "transport",
        "conversation_type",
        "state",
        "epoch",
        "is_personal",
        "secure_ranges",
        "joined_at",
        "left_at",
        "state_changed_at",
        "state_changed_by",
        "context_updated_at",
        "context_updated_by",
    )
    fields = (
        ("channel_id", "channel_name"),
        ("organisation_id", "transport", "conversation_type"),
        ("state", "state_changed_at", "state_changed_by"),
        ("epoch", "secure_ranges"),
        "is_personal",
        ("timezone", "locale"),
        "purpose",
        ("context_type", "tags"),
        ("stakeholders", "related_channels"),
        ("context_updated_at", "context_updated_by"),
        ("joined_at", "left_at"),
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # channels appear when Jeeves is added to a conversation

    # Deleting a channel here is `jeeves purge --channel`: every table and Redis, not only the rows
    # that cascade from channel_config (entities, relationships, vectors and receipts do not).
    def delete_model(self, request: HttpRequest, obj: ChannelConfig) -> None:
        forgetting.purge_channel(obj.channel_id)
        forget_channel_keys(obj.channel_id)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for channel_id in list(queryset.values_list("channel_id", flat=True)):
            forgetting.purge_channel(channel_id)
            forget_channel_keys(channel_id)

    def save_model(self, request: HttpRequest, obj: ChannelConfig, form, change: bool) -> None:
        context = channels.CONTEXT_FIELDS & set(form.changed_data)
        for field in context:  # bounded as a `context:` command would be
            setattr(obj, field, channels.bounded_context(field, getattr(obj, field) or ""))
        if change and context:
            obj.context_updated_at = timezone.now()
            obj.context_updated_by = f"admin:{request.user.get_username()}"
        super().save_model(request, obj, form, change)


class ReviewedAdmin(ReadOnlyAdmin):
    """A record the review desk changes: its review history shown on it."""

    readonly_fields = ("review_history",)

    @admin.display(description="review history")
    def review_history(self, obj: Decision | Action | Entity) -> str:
        return _history(obj.audit.all())


class ExtractedAdmin(ReviewedAdmin):
    """A decision or an action: where it comes from (its messages' ids and times, never their text) and its
    channel, instead of the raw source_ref and search vector. Its form: the record's number and channel,
    its own fields in rows (`own_fields`, listed: the model's order puts the columns every extracted record
    has, models.ExtractedRecord, first), then its source and review history. Its list filters: status,
    confidence, the moment that dates it (`moment`) and channel."""

    own_fields: tuple = ()
    moment = ""

    exclude = ("search_vector", "source_ref")
    readonly_fields = ("source", "review_history")
    list_select_related = ("channel",)

    @admin.display(description="confidence", ordering="confidence")
    def certainty(self, obj: Decision | Action) -> str:
        """Two decimals for every record ("0.60" beside "0.93", not "0.6")."""
        return f"{obj.confidence:.2f}"

    @admin.display(description="source")
    def source(self, obj: Decision | Action) -> str:
        return format_html("{} — channel {}", _source(obj.source_ref), obj.channel)

    def get_fields(self, request: HttpRequest, obj: Decision | Action | None = None) -> tuple:
        return (("friendly_id", "channel", "organisation_id"), *self.own_fields, "source", "review_history")

    def get_list_filter(self, request: HttpRequest) -> tuple:
        return ("status", ConfidenceBandFilter, (self.moment, admin.DateFieldListFilter), "channel")


@admin.register(Decision)
class DecisionAdmin(ExtractedAdmin):
    list_display = ("friendly_id", "summary", "channel", "status", "certainty", "decided", "reviewed_at")
    search_fields = ("summary", "rationale", "friendly_id")
    moment = "decided_at"
    own_fields = (
        ("summary", "rationale"),
        ("decided_by", "decided_at", "valid_until"),
        ("confidence", "status", "superseded_by"),
        "tags",
        ("source_key", "extraction_model", "restatement", "prompt_version"),
        ("reviewed_at", "reviewed_by", "created_at"),
    )
    date_hierarchy = "decided_at"
    ordering = ("-decided_at",)
    actions = _actions(
        confirm=_Review("Confirm selected decisions", "confirmed"),
        supersede=_Review(
            "Mark selected decisions superseded", "marked superseded", _to(DecisionStatus.SUPERSEDED, "valid_until")
        ),
        reverse=_Review(
            "Mark selected decisions reversed", "marked reversed", _to(DecisionStatus.REVERSED, "valid_until")
        ),
        reject=_Review(
            "Reject selected decisions (not a real decision)",
            "rejected",
            _to(DecisionStatus.REJECTED),
            level=messages.WARNING,
        ),
    )

    @admin.display(description="decided (the channel's time)", ordering="decided_at")
    def decided(self, obj: Decision) -> str:
        return _channel_time(obj.decided_at, obj.channel)

    def _review(self, request: HttpRequest, queryset: QuerySet, action: str, **fields: object) -> int:
        fields = {"reviewed_at": timezone.now(), "reviewed_by": _actor(request), **fields}
        return review.bulk_review(queryset, actor=_actor(request), action=action, **fields)


class OwnerForm(forms.Form):
    owner_id = forms.CharField(max_length=200, help_text="Wire user id (uuid@domain)")
    owner_name = forms.CharField(max_length=120, required=False, help_text="Display name")

    def clean(self) -> dict:
        data = super().clean()
        for name in ("owner_id", "owner_name"):
            if any(ord(c) < 32 for c in data.get(name) or ""):
                self.add_error(name, "no control characters")
        return data


class DeadlineForm(forms.Form):
    deadline = forms.DateTimeField(required=False, help_text="YYYY-MM-DD HH:MM (UTC); empty clears the deadline")


def _channel_time(moment: datetime | None, channel: ChannelConfig) -> str:
    """A record's moment as the channel's people live it: a deadline at the end of a Friday in New York is
    that Friday, not Saturday morning in UTC (the admin's own time)."""
    if moment is None:
        return "-"
    return moment.astimezone(channels.channel_zone(channel.timezone)).strftime("%a %-d %b %Y, %H:%M")


@admin.register(Action)
class ActionAdmin(ExtractedAdmin):
    list_display = ("friendly_id", "description", "channel", "owner_name", "due", "status", "certainty")
    search_fields = ("description", "owner_name", "friendly_id")
    moment = "deadline"
    own_fields = (
        "description",
        ("owner_id", "owner_name"),
        ("deadline", "status", "staleness_at"),
        ("confidence", "tags"),
        ("source_key", "related_decision"),
        ("extraction_model", "restatement", "prompt_version"),
        ("created_at", "last_status_check", "completed_at"),
    )
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    actions = (
        *_actions(
            mark_done=_Review(
                "Mark selected actions done",
                "marked done",
                _to(ActionStatus.DONE, "completed_at", "last_status_check"),
                audited="done",
            ),
            mark_cancelled=_Review(
                "Cancel selected actions", "cancelled", _to(ActionStatus.CANCELLED, "last_status_check"), "cancel"
            ),
            reopen=_Review(
                "Reopen selected actions", "reopened", _to(ActionStatus.OPEN, "last_status_check", completed_at=None)
            ),
        ),
        "reassign_owner",
        "set_deadline",
    )

    def _review(self, request: HttpRequest, queryset: QuerySet, action: str, **fields: object) -> int:
        return review.bulk_review(queryset, actor=_actor(request), action=action, **fields)

    @admin.display(description="deadline (the channel's time)", ordering="deadline")
    def due(self, obj: Action) -> str:
        return _channel_time(obj.deadline, obj.channel)

    def _with_form(self, request: HttpRequest, queryset: QuerySet, form_class, name: str, title: str, apply):
        """An action that asks for a value first: the form, then (posted with `apply`) the change."""
        form = form_class(request.POST if "apply" in request.POST else None)
        if "apply" in request.POST and form.is_valid():
            apply(form.cleaned_data)
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": title,
            "opts": self.model._meta,
            "form": form,
            "queryset": queryset,
            "action_name": name,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/knowledge/bulk_form.html", context)

    @admin.action(description="Reassign owner of selected actions")
    def reassign_owner(self, request: HttpRequest, queryset: QuerySet):
        def apply(data: dict) -> None:
            count = self._review(
                request, queryset, "reassign", owner_id=data["owner_id"], owner_name=data["owner_name"] or None
            )
            self.message_user(request, f"{count} action(s) reassigned.")

        return self._with_form(request, queryset, OwnerForm, "reassign_owner", "Reassign owner", apply)

    @admin.action(description="Set deadline of selected actions")
    def set_deadline(self, request: HttpRequest, queryset: QuerySet):
        def apply(data: dict) -> None:
            count = self._review(request, queryset, "set deadline", deadline=data["deadline"])
            self.message_user(request, f"{count} action(s) given a new deadline.")

        return self._with_form(request, queryset, DeadlineForm, "set_deadline", "Set deadline", apply)


@admin.register(Entity)
class EntityAdmin(ReviewedAdmin):
    list_display = ("name", "entity_type", "organisation_id", "mention_count", "last_mentioned", "deleted")
    list_filter = ("entity_type", "organisation_id", "deleted")
    search_fields = ("name", "aliases")
    actions = ("merge",)

    @admin.action(description="Merge selected entities (into the most mentioned)")
    def merge(self, request: HttpRequest, queryset: QuerySet) -> None:
        try:
            kept = review.merge_entities(list(queryset), actor=_actor(request))
        except review.ReviewError as exc:
            self.message_user(request, f"Not merged: {exc.reason}.", level=messages.ERROR)
            return
        channel = ChannelConfig.objects.filter(channel_id=kept.channel_id).first()
        if channel is not None:  # its vector again, now that its aliases changed
            from celery import current_app

            from ground.queues import Queue

            current_app.send_task(
                "pipeline.tasks.embed_records",
                kwargs={
                    "channel_id": channel.channel_id,
                    "epoch": channel.epoch,
                    "records": [["entity", str(kept.pk)]],
                },
                queue=Queue.EMBED.value,
            )
        self.message_user(request, f"Merged into {kept.name}; aliases: {', '.join(kept.aliases) or 'none'}.")


@admin.register(ReviewAudit)
class ReviewAuditAdmin(ReadOnlyAdmin):
    list_display = ("at", "actor", "action", "record", "channel", "before", "after")
    list_filter = ("action", "actor", ("at", admin.DateFieldListFilter))
    search_fields = ("record", "actor")
    date_hierarchy = "at"
    # Never edited; deletable only as Django's other rows are, so deleting a record here takes its entries.


def dashboard_view(request: HttpRequest) -> TemplateResponse:
    """/admin/dashboard/: messages, records, model usage and cost, queue depths, expired and fallback counts."""
    board = dashboard.build()
    context = {**admin.site.each_context(request), "title": "Dashboard", "board": board}
    return TemplateResponse(request, "admin/knowledge/dashboard.html", context)


admin.site.index_template = "admin/knowledge/index.html"


@admin.register(EntityRelationship)
class EntityRelationshipAdmin(ReadOnlyAdmin):
    list_display = ("source", "relationship", "target", "observation_count", "confidence", "last_observed")
    list_filter = ("relationship",)
    search_fields = ("source__name", "target__name", "context")
    list_select_related = ("source", "target")


@admin.register(ConversationSignal)
class ConversationSignalAdmin(ReadOnlyAdmin):
    list_display = ("signal_type", "summary", "channel", "occurred_at", "confidence")
    list_filter = ("signal_type", ConfidenceBandFilter, "channel")
    search_fields = ("summary",)
    date_hierarchy = "occurred_at"
    ordering = ("-occurred_at",)  # the newest first, as the decisions and actions
    fields = (
        ("channel", "organisation_id"),
        ("signal_type", "summary"),
        ("participants", "tags", "related_entities"),
        ("occurred_at", "confidence"),
        ("source_ref", "source_key"),
        ("extraction_model", "restatement", "created_at"),
    )


@admin.register(Summary)
class SummaryAdmin(ReadOnlyAdmin):
    list_display = ("scope_type", "scope_id", "granularity", "period_start", "period_end", "sentiment")
    list_filter = ("granularity", "scope_type", "sentiment")
    search_fields = ("summary", "scope_id")
    ordering = ("-period_start",)
    exclude = ("search_vector",)


@admin.register(Embedding)
class EmbeddingAdmin(ReadOnlyAdmin):
    list_display = ("source_type", "source_id", "channel_id", "created_at", "model")
    list_filter = ("source_type", "model")
    search_fields = ("channel_id", "source_id")
    exclude = ("embedding",)  # a vector is no use to a reviewer and can be inverted towards text


@admin.register(MessageReceipt)
class MessageReceiptAdmin(ReadOnlyAdmin):
    list_display = ("wire_msg_id", "channel_id", "author_id", "sent_at", "tier", "outcome")
    list_filter = ("outcome", "tier")
    search_fields = ("wire_msg_id", "channel_id")


@admin.register(LlmCall)
class LlmCallAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "slot", "model", "fallback_used", "outcome", "latency_ms", "cost")
    list_filter = ("slot", "outcome", "fallback_used", "model")
    date_hierarchy = "created_at"
    change_list_template = "admin/knowledge/llmcall/change_list.html"

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        usage = (
            LlmCall.objects.annotate(day=TruncDay("created_at"))
            .values("day", "slot")
            .annotate(
                calls=Count("id"),
                prompt_tokens=Sum("prompt_tokens"),
                completion_tokens=Sum("completion_tokens"),
                cost=Sum("cost"),
            )
            .order_by("-day", "slot")[:60]
        )
        return super().changelist_view(request, extra_context={**(extra_context or {}), "usage": list(usage)})


@admin.register(PipelineCounter)
class PipelineCounterAdmin(ReadOnlyAdmin):
    list_display = ("channel_id", "name", "value", "updated_at")
    list_filter = ("name",)


@admin.register(FriendlyIdSequence)
class FriendlyIdSequenceAdmin(ReadOnlyAdmin):
    list_display = ("channel_id", "kind", "last_value")


@admin.register(RomanBot)
class RomanBotAdmin(ReadOnlyAdmin):
    list_display = ("bot_id", "channel_id", "created_at", "removed_at")
    exclude = ("token_ciphertext",)  # a secret: never displayed
