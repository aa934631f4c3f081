"""Tier 4: daily (08:00 channel-local) and weekly (Monday 08:00) channel summaries through the `summarise` slot.

A daily is written from the period's records (decisions, actions, signals: synthesised text only)
and its receipts (counts, authors); a weekly from the week's dailies. Neither ever sees a message.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, tzinfo
from typing import Annotated, Literal

from celery.exceptions import SoftTimeLimitExceeded
from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Count, Q
from django.db.models.functions import Coalesce
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field

from ground import metrics
from ground.config import LOCAL_MODEL
from ground.wording import counted, joined
from knowledge import contradictions, proactive
from knowledge.channels import channel_zone
from knowledge.models import (
    Action,
    ActionStatus,
    ChannelConfig,
    ConversationSignal,
    Decision,
    DecisionConflict,
    DecisionStatus,
    MessageReceipt,
    SignalType,
    Summary,
)
from pipeline import llm, prompts
from pipeline.classify import typed_by_members

logger = logging.getLogger(__name__)

Granularity = Literal["daily", "weekly"]
SUMMARY_HOUR = 8  # docs/architecture.md §8: 08:00 in the channel's timezone
LIST_LIMIT = 10
SIGNAL_LIMIT = 5
# Which notes a summary mentions first (signal types: docs/architecture.md §5).
_SIGNAL_ORDER = [SignalType.BLOCKER, SignalType.CONCERN, SignalType.QUESTION, SignalType.UPDATE, SignalType.DISCUSSION]
_SIGNAL_LABEL = {
    SignalType.BLOCKER: "A blocker",
    SignalType.CONCERN: "A concern",
    SignalType.QUESTION: "An open question",
    SignalType.UPDATE: "An update",
    SignalType.DISCUSSION: "Discussed",
    SignalType.REFERENCE: "For reference",
}
_SEVERITY = ["blocked", "contentious", "productive", "routine"]


class SummaryResult(BaseModel):
    """What the `summarise` slot answers (a model or the offline template)."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    summary: Annotated[str, Field(min_length=1, max_length=4000)]


@dataclass(frozen=True)
class Period:
    start: datetime  # aware, channel-local midnight
    end: datetime
    first_day: date  # the channel-local date the period begins


@dataclass
class Material:
    """What one summary is written from: records and counts, never message text."""

    channel: ChannelConfig
    granularity: Granularity
    period: Period
    decisions: list[Decision] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    signals: list[ConversationSignal] = field(default_factory=list)
    dailies: list[Summary] = field(default_factory=list)
    superseded: list[DecisionConflict] = field(default_factory=list)  # replacements recorded in the period
    message_count: int = 0
    participants: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.decisions or self.actions or self.signals or self.dailies or self.superseded)


# --------------------------------------------------------------------------- when


def is_due(granularity: Granularity, local_now: datetime) -> bool:
    """Daily: the 08:00 hour, channel-local; weekly: the same hour on a Monday (beat asks hourly)."""
    if local_now.hour != SUMMARY_HOUR:
        return False
    return granularity == "daily" or local_now.weekday() == 0


def period_for(granularity: Granularity, local_now: datetime) -> Period:
    """The previous local day, or the previous local week (Monday to Monday)."""
    zone = local_now.tzinfo
    today = local_now.date()
    if granularity == "daily":
        first, last = today - timedelta(days=1), today
    else:
        monday = today - timedelta(days=today.weekday())
        first, last = monday - timedelta(days=7), monday
    return Period(
        start=datetime.combine(first, time(0), tzinfo=zone),
        end=datetime.combine(last, time(0), tzinfo=zone),
        first_day=first,
    )


def due_channels(granularity: Granularity, now: datetime) -> list[tuple[ChannelConfig, Period]]:
    """Active group channels where it is now the summary hour, with the period to summarise.

    A 1:1 gets no channel summary: retrieval never reads one there (docs/guarantees.md §2).
    """
    due = []
    channels = ChannelConfig.objects.active().filter(is_personal=False)
    for channel in channels.order_by("channel_id"):
        local_now = now.astimezone(channel_zone(channel.timezone))
        if is_due(granularity, local_now):
            due.append((channel, period_for(granularity, local_now)))
    return due


# --------------------------------------------------------------------------- what


def _receipts(channel_id: str, period: Period) -> tuple[int, list[str]]:
    row = (
        MessageReceipt.objects.filter(channel_id=channel_id)
        .annotate(at=Coalesce("sent_at", "received_at"))
        .filter(at__gte=period.start, at__lt=period.end)
        .aggregate(n=Count("id"), authors=ArrayAgg("author_id", distinct=True, filter=Q(author_id__isnull=False)))
    )
    return row["n"] or 0, sorted(row["authors"] or [])


def gather(channel: ChannelConfig, granularity: Granularity, period: Period) -> Material:
    records = _from_dailies(channel, period) if granularity == "weekly" else _from_records(channel, period)
    return Material(
        channel=channel,
        granularity=granularity,
        period=period,
        superseded=contradictions.superseded_between(channel.channel_id, period.start, period.end),
        **records,
    )


def _from_dailies(channel: ChannelConfig, period: Period) -> dict:
    """A weekly's material: the period's daily summaries and the records they name."""
    dailies = list(
        Summary.objects.filter(
            scope_type="channel",
            scope_id=channel.channel_id,
            granularity="daily",
            period_start__gte=period.start,
            period_start__lt=period.end,
        ).order_by("period_start")
    )
    decision_ids = list(dict.fromkeys(i for d in dailies for i in d.key_decisions))
    action_ids = list(dict.fromkeys(i for d in dailies for i in d.key_actions))
    by_decision = Decision.objects.in_bulk(decision_ids)
    by_action = Action.objects.in_bulk(action_ids)
    return {
        "decisions": [by_decision[i] for i in decision_ids if i in by_decision],
        "actions": [by_action[i] for i in action_ids if i in by_action],
        "dailies": dailies,
        "message_count": sum(d.message_count or 0 for d in dailies),
        "participants": sorted({p for d in dailies for p in d.participants}),
    }


def _from_records(channel: ChannelConfig, period: Period) -> dict:
    """A daily's (or an on-demand summary's) material: the period's records and receipts."""
    decisions = list(
        Decision.objects.filter(channel=channel, decided_at__gte=period.start, decided_at__lt=period.end)
        .exclude(status=DecisionStatus.REJECTED)
        .order_by("decided_at")
    )
    actions = list(
        Action.objects.filter(channel=channel)
        .filter(
            Q(created_at__gte=period.start, created_at__lt=period.end)
            | Q(completed_at__gte=period.start, completed_at__lt=period.end)
        )
        .order_by("created_at")
    )
    signals = list(
        ConversationSignal.objects.filter(
            channel=channel, occurred_at__gte=period.start, occurred_at__lt=period.end
        ).order_by("occurred_at")
    )
    count, authors = _receipts(channel.channel_id, period)
    people = {*authors, *(p for d in decisions for p in d.decided_by), *(p for s in signals for p in s.participants)}
    people.update(a.owner_id for a in actions if a.owner_id)
    return {
        "decisions": decisions,
        "actions": actions,
        "signals": signals,
        "message_count": count,
        "participants": sorted(people),
    }


def sentiment(material: Material) -> str:
    """A simple rule: blocked (a blocker noted) > contentious (two concerns, or a decision
    overturned) > productive (anything decided or undertaken) > routine. A weekly takes the
    most severe of its dailies."""
    if material.granularity == "weekly":
        found = {d.sentiment for d in material.dailies if d.sentiment}
        return next((s for s in _SEVERITY if s in found), "routine")
    kinds = Counter(s.signal_type for s in material.signals)
    if kinds[SignalType.BLOCKER]:
        return "blocked"
    overturned = any(d.status in (DecisionStatus.SUPERSEDED, DecisionStatus.REVERSED) for d in material.decisions)
    if kinds[SignalType.CONCERN] >= 2 or overturned:
        return "contentious"
    if material.decisions or material.actions:
        return "productive"
    return "routine"


# --------------------------------------------------------------------------- the offline template


def _more(lines: list[str], total: int) -> list[str]:
    return lines + ([f"- and {total - len(lines)} more"] if total > len(lines) else [])


def _action_line(action: Action, zone: tzinfo) -> str:
    owner = action.owner_name or "nobody named"
    deadline = action.deadline.astimezone(zone) if action.deadline else None
    due = f", due {deadline.day} {deadline:%B}" if deadline else ""
    return f"- {action.friendly_id} ({owner}{due}): {action.description.rstrip('.')}."


def _decision_line(decision: Decision) -> str:
    status = "" if decision.status == DecisionStatus.ACTIVE else f" (since {decision.status})"
    return f"- {decision.friendly_id}{status}: {decision.summary.rstrip('.')}."


def _superseded_line(pair: DecisionConflict) -> str:
    older, newer = pair.older.friendly_id, pair.newer.friendly_id
    if pair.resolved_by:
        return f"- {older} is now superseded by {newer}, as confirmed in the channel."
    return f"- {older} is superseded by {newer}: the team said the plan had changed, and I have marked it so."


def _records_part(material: Material) -> list[str]:
    lines: list[str] = []
    if material.decisions:
        lines.append("Decisions:")
        lines += _more([_decision_line(d) for d in material.decisions[:LIST_LIMIT]], len(material.decisions))
    lines += [_superseded_line(p) for p in material.superseded[:LIST_LIMIT]]
    still_open = [a for a in material.actions if a.status == ActionStatus.OPEN]
    if still_open:
        lines.append("Actions still open:")
        zone = material.period.start.tzinfo
        lines += _more([_action_line(a, zone) for a in still_open[:LIST_LIMIT]], len(still_open))
    finished = [a.friendly_id for a in material.actions if a.status == ActionStatus.DONE]
    if finished:
        lines.append(f"Completed: {joined(finished)}.")
    withdrawn = [a.friendly_id for a in material.actions if a.status == ActionStatus.CANCELLED]
    if withdrawn:
        lines.append(f"Withdrawn: {joined(withdrawn)}.")
    return lines


def offline_summary(material: Material, mood: str) -> SummaryResult:
    """The offline engine's summary: a template in Jeeves' voice over the records (no message text)."""
    name = material.channel.channel_name or "this channel"
    day = material.period.first_day
    people = counted(len(material.participants), "participant")
    recorded = [
        counted(len(material.decisions), "decision"),
        counted(len(material.actions), "action"),
    ]
    if material.granularity == "daily":
        recorded.append(counted(len(material.signals), "other matter"))
        head = (
            f"{name}, {day:%A} {day.day} {day:%B}: {counted(material.message_count, 'message')} "
            f"from {people}; I noted {joined(recorded)}."
        )
    else:
        head = (
            f"{name}, the week of {day.day} {day:%B}: {counted(len(material.dailies), 'day')} with business "
            f"on record, {counted(material.message_count, 'message')} from {people}; I noted {joined(recorded)}."
        )
    lines = [head]
    if material.granularity == "weekly":
        for daily in material.dailies:
            local = daily.period_start.astimezone(material.period.start.tzinfo)
            lines.append(
                f"- {local:%A}: {counted(daily.message_count or 0, 'message')}, "
                f"{counted(len(daily.key_decisions), 'decision')}, {counted(len(daily.key_actions), 'action')}"
                f" ({daily.sentiment or 'routine'})."
            )
    lines += _records_part(material)
    ranked = sorted(
        material.signals,
        key=lambda s: (_SIGNAL_ORDER.index(s.signal_type) if s.signal_type in _SIGNAL_ORDER else 99, s.occurred_at),
    )
    if ranked:
        lines.append("Of note:")
        lines += _more(
            [f"- {_SIGNAL_LABEL.get(s.signal_type, 'Noted')}: {s.summary.rstrip('.')}." for s in ranked[:SIGNAL_LIMIT]],
            len(ranked),
        )
    period = "day" if material.granularity == "daily" else "week"
    closing = {
        "blocked": f"One notes that the {period} ended with a matter blocked.",
        "contentious": f"One notes that the {period} was not without its disagreements.",
        "productive": f"On the whole, a productive {period}.",
        "routine": f"On the whole, a quiet {period}.",
    }[mood]
    lines.append(closing)
    return SummaryResult(summary="\n".join(lines))


# --------------------------------------------------------------------------- the slot


def _model_input(material: Material) -> str:
    zone = material.period.start.tzinfo
    payload: dict[str, object] = {
        "channel": material.channel.channel_name or material.channel.channel_id,
        "typed_by_members": typed_by_members(material.channel.purpose, material.channel.context_type, []),
        "granularity": material.granularity,
        "period": {
            "from": material.period.first_day.isoformat(),
            "until_before": material.period.end.date().isoformat(),
        },
        "message_count": material.message_count,
        "participant_count": len(material.participants),
        "decisions": [
            {"id": d.friendly_id, "summary": d.summary, "rationale": d.rationale, "status": d.status}
            for d in material.decisions
        ],
        "actions": [
            {
                "id": a.friendly_id,
                "description": a.description,
                "owner": a.owner_name,
                "deadline": a.deadline.astimezone(zone).date().isoformat() if a.deadline else None,
                "status": a.status,
            }
            for a in material.actions
        ],
        "signals": [{"type": s.signal_type, "note": s.summary} for s in material.signals],
        "superseded": [
            {"decision": p.older.friendly_id, "by": p.newer.friendly_id, "confirmed_by_someone": bool(p.resolved_by)}
            for p in material.superseded
        ],
        "dailies": [
            {"date": d.period_start.astimezone(zone).date().isoformat(), "summary": d.summary} for d in material.dailies
        ],
    }
    return json.dumps(payload, ensure_ascii=False)


def write_summary(material: Material) -> Summary | None:
    """Summarise `material` through the `summarise` slot and store it; None when it was empty or already written."""
    if material.empty:
        return None
    mood = sentiment(material)
    prompt = prompts.load("summarise")
    messages = [
        {"role": "system", "content": prompt.text},
        {"role": "user", "content": _model_input(material)},
    ]
    try:
        answer = llm.structured(
            "summarise",
            messages,
            SummaryResult,
            lambda: offline_summary(material, mood),
            channel_id=material.channel.channel_id,
        )
        text, model = answer.value.summary, answer.model
    except llm.SlotFailure:
        logger.warning("summary: model output invalid twice; using the template: channel=%s", material.channel.pk)
        text, model = offline_summary(material, mood).summary, LOCAL_MODEL
    return proactive.record_summary(
        proactive.SummaryFields(
            channel=material.channel,
            granularity=material.granularity,
            period_start=material.period.start,
            period_end=material.period.end,
            summary=text,
            sentiment=mood,
            message_count=material.message_count,
            model_version=f"{model} ({prompt.version})",
            key_decisions=[d.id for d in material.decisions],
            key_actions=[a.id for a in material.actions],
            participants=material.participants,
        )
    )


def summarise_due(granularity: Granularity, now: datetime | None = None) -> list[tuple[ChannelConfig, Summary]]:
    """Write the summaries due at `now` (one per channel whose local hour is 08); returns the new ones.

    Idempotent: a channel whose summary for the period exists is skipped before any model call.
    """
    if granularity not in ("daily", "weekly"):
        raise ValueError(f"unknown granularity {granularity!r}")
    now = now or timezone.now()
    written = []
    for channel, period in due_channels(granularity, now):
        if proactive.summary_exists(channel.channel_id, granularity, period.start):
            continue
        try:
            summary = write_summary(gather(channel, granularity, period))
        except SoftTimeLimitExceeded:
            raise
        except Exception as exc:  # one channel's failure must not cost the others their summary
            logger.warning("summary failed: channel=%s (%s)", channel.channel_id, type(exc).__name__)
            continue
        if summary is not None:
            written.append((channel, summary))
            metrics.proactive("summary")
    logger.info("summaries: granularity=%s written=%d", granularity, len(written))
    return written


def rewrite(channel: ChannelConfig, granularity: str, start: datetime, end: datetime) -> Summary | None:
    """Write again a summary withdrawn because a record it retold was forgotten: the same period, from
    the records left (nothing when none are). An on-demand summary is not written again."""
    if granularity not in ("daily", "weekly") or proactive.summary_exists(channel.channel_id, granularity, start):
        return None
    zone = channel_zone(channel.timezone)
    local = start.astimezone(zone)
    period = Period(start=local, end=end.astimezone(zone), first_day=local.date())
    return write_summary(gather(channel, granularity, period))
