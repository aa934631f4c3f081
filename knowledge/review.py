"""Domain services for human review: an action done, still open or cancelled; a decision superseded."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from knowledge.models import Action, ActionStatus, Decision, DecisionStatus

logger = logging.getLogger(__name__)


class ReviewError(ValueError):
    """The review action cannot be applied; `reason` says why in a few words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def mark_action_done(channel_id: str, friendly_id: str, *, by: str) -> Action:
    """Set the channel's action `friendly_id` to done (completed now). Idempotent for an action already done."""
    with transaction.atomic():
        action = Action.objects.select_for_update().filter(channel_id=channel_id, friendly_id=friendly_id).first()
        if action is None:
            raise ReviewError("unknown action")
        if action.status != ActionStatus.DONE:
            now = timezone.now()
            action.status = ActionStatus.DONE
            action.completed_at = now
            action.last_status_check = now
            action.save(update_fields=["status", "completed_at", "last_status_check"])
            logger.info("action done: channel=%s action=%s by=%s", channel_id, action.id, by)
    return action


def keep_action_open(channel_id: str, friendly_id: str, *, by: str) -> Action:
    """Someone says the action is still in progress: it stays open, and the next staleness
    nudge waits JEEVES_STALENESS_DAYS (its `staleness_at` moves on)."""
    with transaction.atomic():
        action = Action.objects.select_for_update().filter(channel_id=channel_id, friendly_id=friendly_id).first()
        if action is None:
            raise ReviewError("unknown action")
        if action.status not in (ActionStatus.OPEN, ActionStatus.STALE):
            raise ReviewError(f"the action is already {action.status}")
        now = timezone.now()
        action.status = ActionStatus.OPEN
        action.last_status_check = now
        action.staleness_at = now + timedelta(days=settings.JEEVES.staleness_days)
        action.save(update_fields=["status", "last_status_check", "staleness_at"])
        logger.info("action still open: channel=%s action=%s by=%s", channel_id, action.id, by)
    return action


def cancel_action(channel_id: str, friendly_id: str, *, by: str) -> Action:
    """Withdraw the channel's action `friendly_id` (status cancelled). Idempotent; a done action stays done."""
    with transaction.atomic():
        action = Action.objects.select_for_update().filter(channel_id=channel_id, friendly_id=friendly_id).first()
        if action is None:
            raise ReviewError("unknown action")
        if action.status == ActionStatus.DONE:
            raise ReviewError("the action is already done")
        if action.status != ActionStatus.CANCELLED:
            action.status = ActionStatus.CANCELLED
            action.last_status_check = timezone.now()
            action.save(update_fields=["status", "last_status_check"])
            logger.info("action cancelled: channel=%s action=%s by=%s", channel_id, action.id, by)
    return action


@dataclass(frozen=True)
class Superseded:
    old: Decision
    new: Decision


def supersede_decision(channel_id: str, old_friendly_id: str, new_friendly_id: str, *, by: str) -> Superseded:
    """Mark decision `old` superseded by `new` (same channel): status, superseded_by, valid_until; history kept."""
    if old_friendly_id == new_friendly_id:
        raise ReviewError("a decision cannot supersede itself")
    with transaction.atomic():
        found = {
            d.friendly_id: d
            for d in Decision.objects.select_for_update().filter(
                channel_id=channel_id, friendly_id__in=[old_friendly_id, new_friendly_id]
            )
        }
        old, new = found.get(old_friendly_id), found.get(new_friendly_id)
        if old is None or new is None:
            raise ReviewError("unknown decision")
        if new.status != DecisionStatus.ACTIVE:
            raise ReviewError("the replacing decision is not active")
        now = timezone.now()
        old.status = DecisionStatus.SUPERSEDED
        old.superseded_by = new
        old.valid_until = old.valid_until or max(new.decided_at, old.decided_at)
        old.reviewed_at = now
        old.reviewed_by = by
        old.save(update_fields=["status", "superseded_by", "valid_until", "reviewed_at", "reviewed_by"])
        logger.info("decision superseded: channel=%s old=%s new=%s by=%s", channel_id, old.id, new.id, by)
    return Superseded(old=old, new=new)
