"""Writes of the contradiction duty (docs/architecture.md §8): judged pairs of decisions, held, raised once, answered.

A pair (older, newer) is recorded once with the judge's verdict. A replacement the team stated is
applied at once (the older is superseded); a contradiction, or a replacement nobody stated, is held
until both decisions are `HOLD` old and then claimed for one prompt; the answer (supersede / keep
both / dismiss) closes it for good. A pair whose decisions changed meanwhile is withdrawn unasked.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from knowledge.models import (
    ChannelState,
    ConflictStatus,
    ConflictVerdict,
    Decision,
    DecisionConflict,
    DecisionStatus,
)
from knowledge.verbatim import guard_text

logger = logging.getLogger(__name__)

# People often correct themselves within minutes: a pair is raised only once both decisions are this old.
HOLD = timedelta(minutes=30)
CHOICES: dict[str, str] = {
    "supersede": ConflictStatus.SUPERSEDED,
    "keep": ConflictStatus.KEPT,
    "dismiss": ConflictStatus.DISMISSED,
}


@dataclass(frozen=True)
class Verdict:
    """What a judge said of one pair."""

    verdict: str  # a ConflictVerdict value
    reason: str
    score: float
    stated: bool = False  # the team said the newer replaces the older


def judged_pairs(decision: Decision) -> set[tuple[str, str]]:
    """(older id, newer id) of every pair with `decision` already on record: each is judged once."""
    rows = DecisionConflict.objects.filter(Q(older=decision) | Q(newer=decision)).values_list("older_id", "newer_id")
    return {(str(a), str(b)) for a, b in rows}


def record_verdict(
    older: Decision, newer: Decision, verdict: Verdict, *, cosine: float | None, judge_model: str
) -> DecisionConflict | None:
    """Store the verdict on (older, newer) as held (to be asked) or compatible. None when the pair was
    judged before (a redelivered check, or the same pair reached from its other decision)."""
    status = ConflictStatus.COMPATIBLE if verdict.verdict == ConflictVerdict.COMPATIBLE else ConflictStatus.HELD
    try:
        with transaction.atomic():
            return DecisionConflict.objects.create(
                channel_id=newer.channel_id,
                organisation_id=newer.organisation_id,
                older=older,
                newer=newer,
                verdict=verdict.verdict,
                stated=verdict.stated,
                score=round(float(verdict.score), 4),
                cosine=None if cosine is None else round(float(cosine), 4),
                reason=guard_text(" ".join(verdict.reason.split())[:200], ()) or "",
                judge_model=judge_model,
                status=status,
            )
    except IntegrityError:
        return None


def supersede_stated(conflict: DecisionConflict) -> bool:
    """The team said the newer replaces the older: mark the older superseded now, without asking.
    False (and the pair stays held, to be asked) when either decision is no longer active."""
    now = timezone.now()
    with transaction.atomic():
        pair = DecisionConflict.objects.select_for_update().get(pk=conflict.pk)
        decisions = {
            d.pk: d for d in Decision.objects.select_for_update().filter(pk__in=[pair.older_id, pair.newer_id])
        }
        older, newer = decisions.get(pair.older_id), decisions.get(pair.newer_id)
        if pair.status != ConflictStatus.HELD or older is None or newer is None:
            return False
        if older.status != DecisionStatus.ACTIVE or newer.status != DecisionStatus.ACTIVE:
            return False
        older.status = DecisionStatus.SUPERSEDED
        older.superseded_by = newer
        older.valid_until = older.valid_until or max(newer.decided_at, older.decided_at)
        older.save(update_fields=["status", "superseded_by", "valid_until"])
        pair.status, pair.resolved_at = ConflictStatus.SUPERSEDED, now
        pair.save(update_fields=["status", "resolved_at"])
    logger.info("decision superseded as stated: channel=%s old=%s new=%s", pair.channel_id, older.pk, newer.pk)
    return True


def claim_due(now: datetime, *, limit: int = 100) -> list[DecisionConflict]:
    """Held pairs ready to be raised: both decisions at least HOLD old, the channel active.

    Each claimed pair is marked raised in the same transaction, so a second pass (or a second
    worker) never asks again. A held pair whose decisions are no longer both active (someone
    superseded one, a reviewer rejected it) is withdrawn instead: it is never raised. Pairs of a
    paused, secure or left channel stay held until it is active again.
    """
    ready = now - HOLD
    with transaction.atomic():
        held = list(
            DecisionConflict.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("older", "newer", "channel")
            .filter(
                status=ConflictStatus.HELD,
                channel__state=ChannelState.ACTIVE,
                channel__left_at__isnull=True,
                older__decided_at__lte=ready,
                newer__decided_at__lte=ready,
            )
            .order_by("detected_at", "id")[:limit]
        )
        live = [p for p in held if p.older.status == DecisionStatus.ACTIVE and p.newer.status == DecisionStatus.ACTIVE]
        gone = [p.pk for p in held if p not in live]
        if gone:
            DecisionConflict.objects.filter(pk__in=gone).update(status=ConflictStatus.WITHDRAWN, resolved_at=now)
        DecisionConflict.objects.filter(pk__in=[p.pk for p in live]).update(status=ConflictStatus.RAISED, raised_at=now)
    for pair in live:
        pair.status, pair.raised_at = ConflictStatus.RAISED, now
    return live


def resolve(channel_id: str, older_friendly_id: str, newer_friendly_id: str, choice: str, *, by: str) -> bool:
    """Record the channel's answer to a raised pair (supersede / keep / dismiss); a closed pair is never
    raised again. `supersede` counts only once the older is recorded as superseded by the newer."""
    status = CHOICES.get(choice)
    if status is None:
        raise ValueError(f"unknown choice {choice!r}")
    pair = (
        DecisionConflict.objects.select_related("older")
        .filter(
            channel_id=channel_id,
            older__friendly_id=older_friendly_id,
            newer__friendly_id=newer_friendly_id,
            status__in=[ConflictStatus.HELD, ConflictStatus.RAISED],
        )
        .first()
    )
    if pair is None:
        return False
    if status == ConflictStatus.SUPERSEDED and pair.older.superseded_by_id != pair.newer_id:
        return False
    updated = DecisionConflict.objects.filter(
        pk=pair.pk, status__in=[ConflictStatus.HELD, ConflictStatus.RAISED]
    ).update(status=status, resolved_at=timezone.now(), resolved_by=by)
    logger.info("contradiction answered: channel=%s pair=%s %s", channel_id, pair.pk, status)
    return bool(updated)


def superseded_between(channel_id: str, start: datetime, end: datetime) -> list[DecisionConflict]:
    """Pairs closed by superseding the older (stated by the team, or at someone's word) in [start, end)."""
    return list(
        DecisionConflict.objects.select_related("older", "newer")
        .filter(
            channel_id=channel_id,
            status=ConflictStatus.SUPERSEDED,
            resolved_at__gte=start,
            resolved_at__lt=end,
        )
        .order_by("resolved_at")
    )
