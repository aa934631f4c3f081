"""Writes of the proactive tier (docs/architecture.md §8): claiming stale actions for a nudge, channel summaries, and
the personal digest's subscriptions."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from knowledge.channels import channel_zone
from knowledge.models import Action, ActionStatus, ChannelConfig, ChannelState, DigestSubscription, Summary
from knowledge.verbatim import guard_text

logger = logging.getLogger(__name__)

# An action is asked about at most once a day (docs/architecture.md §8); the grace lets the same beat slot
# a day later (which may fire a little early) ask again.
RECHECK_AFTER = timedelta(hours=24)
BEAT_GRACE = timedelta(minutes=10)


def claim_stale_actions(now: datetime, *, limit: int = 500) -> list[Action]:
    """Open actions of active channels that are past due and were not asked about in 24 hours,
    most overdue first; each is stamped `last_status_check = now` in the same transaction, so a
    second run (or a second worker) within a day finds nothing to ask.

    Past due means `staleness_at` has passed, or the deadline when no `staleness_at` is set:
    `staleness_at` starts as the deadline (or creation + JEEVES_STALENESS_DAYS) and is moved on
    when someone answers "still in progress", which must quiet an overdue action for a while.
    """
    with transaction.atomic():
        due = (
            Action.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("channel")
            .filter(
                status=ActionStatus.OPEN,
                channel__state=ChannelState.ACTIVE,
                channel__left_at__isnull=True,
            )
            .filter(Q(staleness_at__lt=now) | Q(staleness_at__isnull=True, deadline__lt=now))
            .filter(Q(last_status_check__isnull=True) | Q(last_status_check__lt=now - RECHECK_AFTER + BEAT_GRACE))
            .order_by(Coalesce("staleness_at", "deadline"), "created_at")[:limit]
        )
        actions = list(due)
        Action.objects.filter(pk__in=[a.pk for a in actions]).update(last_status_check=now)
    for action in actions:
        action.last_status_check = now
    return actions


@dataclass(frozen=True)
class SummaryFields:
    """One channel summary as the summarise tier produced it (synthesised text only)."""

    channel: ChannelConfig
    granularity: str
    period_start: datetime
    period_end: datetime
    summary: str
    sentiment: str | None
    message_count: int
    model_version: str
    key_decisions: list[uuid.UUID] = field(default_factory=list)
    key_actions: list[uuid.UUID] = field(default_factory=list)
    participants: list[str] = field(default_factory=list)


def summary_exists(channel_id: str, granularity: str, period_start: datetime) -> bool:
    return Summary.objects.filter(
        scope_type="channel", scope_id=channel_id, granularity=granularity, period_start=period_start
    ).exists()


def _guarded_lines(text: str) -> str:
    # No message is at hand here; the guard still drops opaque tokens (keys, hashes). Line by
    # line, because it folds whitespace and a summary keeps its list layout.
    lines = (guard_text(line, ()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def record_summary(fields: SummaryFields) -> Summary | None:
    """Insert a channel summary; None when one for the same period exists (a rerun or a redelivery)."""
    try:
        with transaction.atomic():
            summary = Summary.objects.create(
                scope_type="channel",
                scope_id=fields.channel.channel_id,
                organisation_id=fields.channel.organisation_id,
                period_start=fields.period_start,
                period_end=fields.period_end,
                granularity=fields.granularity,
                summary=_guarded_lines(fields.summary),
                key_decisions=list(fields.key_decisions),
                key_actions=list(fields.key_actions),
                participants=list(dict.fromkeys(fields.participants)),
                sentiment=fields.sentiment,
                message_count=fields.message_count,
                model_version=fields.model_version,
            )
    except IntegrityError:
        return None
    logger.info(
        "summary written: channel=%s granularity=%s summary=%s",
        fields.channel.channel_id,
        fields.granularity,
        summary.pk,
    )
    return summary


# --------------------------------------------------------------------------- the personal digest

DIGEST_WEEKDAY, DIGEST_HOUR = 0, 8  # Monday 08:00 in the 1:1's timezone


def set_digest(channel: ChannelConfig, user_id: str, enabled: bool) -> DigestSubscription:
    """`digest on` / `digest off` in a 1:1: the Monday note is delivered there."""
    subscription, _ = DigestSubscription.objects.update_or_create(
        channel=channel,
        user_id=user_id,
        defaults={"organisation_id": channel.organisation_id, "enabled": enabled, "updated_at": timezone.now()},
    )
    logger.info("digest %s: channel=%s", "on" if enabled else "off", channel.channel_id)
    return subscription


def _local(now: datetime, zone_name: str | None) -> datetime:
    return now.astimezone(channel_zone(zone_name))


def claim_due_digests(now: datetime) -> list[tuple[DigestSubscription, date]]:
    """Enabled subscriptions of active conversations where it is now the Monday 08:00 hour and whose note for
    that Monday has not gone out; each is stamped with the Monday in the same transaction, so a second pass
    (or a second worker) sends nothing. A paused or secure conversation gets none."""
    with transaction.atomic():
        subscriptions = (
            DigestSubscription.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("channel")
            .filter(enabled=True, channel__state=ChannelState.ACTIVE, channel__left_at__isnull=True)
        )
        due = []
        for subscription in subscriptions:
            local = _local(now, subscription.channel.timezone)
            if local.weekday() == DIGEST_WEEKDAY and local.hour == DIGEST_HOUR:
                if subscription.last_sent_on != local.date():
                    due.append((subscription, local.date()))
        for subscription, day in due:
            DigestSubscription.objects.filter(pk=subscription.pk).update(last_sent_on=day)
    return due
