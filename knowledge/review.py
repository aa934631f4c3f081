"""Domain services for human review: an action done, still open or cancelled; a decision superseded; the review
desk's bulk actions, each writing an audit entry per record (who, when, what, before and after); entity merge."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from knowledge.models import (
    Action,
    ActionStatus,
    Decision,
    DecisionStatus,
    Entity,
    EntityMention,
    EntityRelationship,
    ReviewAudit,
)

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


# --------------------------------------------------------------------------- the review desk (admin)

_AUDIT_FK = {Decision: "decision", Action: "action_record", Entity: "entity"}


def _jsonable(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _snapshot(obj: object, names: list[str]) -> dict[str, object]:
    fields = {f.name: f for f in obj._meta.concrete_fields}  # a foreign key as its id, never the related row
    return {name: _jsonable(getattr(obj, fields[name].attname if name in fields else name)) for name in names}


def audit(obj: Decision | Action | Entity, *, actor: str, action: str, before: dict, after: dict) -> ReviewAudit:
    record = getattr(obj, "friendly_id", None) or getattr(obj, "name", "")
    return ReviewAudit.objects.create(
        actor=actor,
        action=action,
        channel_id=obj.channel_id,
        record=record,
        before=before,
        after=after,
        **{_AUDIT_FK[type(obj)]: obj},
    )


def bulk_review(queryset, *, actor: str, action: str, **fields: object) -> int:
    """Set `fields` on every decision or action of `queryset`, one audit entry each with the fields' values
    before and after. Returns how many records it changed."""
    model = queryset.model
    names = list(fields)
    changed = 0
    with transaction.atomic():
        # Locked by primary key: the admin's queryset may join other tables.
        for obj in model.objects.select_for_update().filter(pk__in=list(queryset.values_list("pk", flat=True))):
            before = _snapshot(obj, names)
            for name, value in fields.items():
                setattr(obj, name, value)
            obj.save(update_fields=names)
            audit(obj, actor=actor, action=action, before=before, after=_snapshot(obj, names))
            changed += 1
    logger.info("review desk: %s on %d %s by=%s", action, changed, model._meta.db_table, actor)
    return changed


MAX_ALIASES = 20


def merge_entities(entities: list[Entity], *, actor: str) -> Entity:
    """Merge entities that are one thing: the most mentioned is kept, the others' names and aliases become its
    aliases, their mentions and relationships are re-pointed to it (a relationship it already has is
    strengthened, one that would link it to itself goes), their audit entries follow it, and they are deleted
    (their vectors with them). One audit entry on the kept entity says what was merged."""
    if len({e.pk for e in entities}) < 2:
        raise ReviewError("select at least two entities to merge")
    if len({e.organisation_id for e in entities}) > 1:
        raise ReviewError("entities of different organisations cannot be merged")
    with transaction.atomic():
        locked = list(Entity.objects.select_for_update().filter(pk__in=[e.pk for e in entities]))
        locked.sort(key=lambda e: (-e.mention_count, e.first_seen or timezone.now(), e.name))
        keep, others = locked[0], locked[1:]
        other_ids = [o.pk for o in others]
        names = ["name", "aliases", "mention_count", "channel_ids"]
        before = {**_snapshot(keep, names), "merged": [o.name for o in others]}

        seen = {keep.name.lower()}
        aliases = []
        for alias in [*keep.aliases, *(n for o in others for n in (o.name, *o.aliases))]:
            if alias.lower() not in seen:
                seen.add(alias.lower())
                aliases.append(alias)
        keep.aliases = aliases[:MAX_ALIASES]
        keep.channel_ids = list(dict.fromkeys([*keep.channel_ids, *(c for o in others for c in o.channel_ids)]))
        firsts = [e.first_seen for e in locked if e.first_seen]
        lasts = [e.last_mentioned for e in locked if e.last_mentioned]
        keep.first_seen = min(firsts) if firsts else None
        keep.last_mentioned = max(lasts) if lasts else None

        # Mentions: a run that named both keeps one row (the kept entity's).
        kept_runs = set(EntityMention.objects.filter(entity=keep).values_list("channel_id", "run_key"))
        for mention in EntityMention.objects.filter(entity_id__in=other_ids):
            if (mention.channel_id, mention.run_key) in kept_runs:
                mention.delete()
            else:
                kept_runs.add((mention.channel_id, mention.run_key))
                mention.entity = keep
                mention.save(update_fields=["entity"])
        mentions = EntityMention.objects.filter(entity=keep).count()
        keep.mention_count = mentions or sum(e.mention_count for e in locked)

        moving = EntityRelationship.objects.select_for_update().filter(
            models.Q(source_id__in=other_ids) | models.Q(target_id__in=other_ids)
        )
        for rel in moving:
            source = keep.pk if rel.source_id in other_ids else rel.source_id
            target = keep.pk if rel.target_id in other_ids else rel.target_id
            if source == target:
                rel.delete()
                continue
            twin = (
                EntityRelationship.objects.select_for_update()
                .filter(source_id=source, target_id=target, relationship=rel.relationship)
                .exclude(pk=rel.pk)
                .first()
            )
            if twin is None:
                rel.source_id, rel.target_id = source, target
                rel.save(update_fields=["source", "target"])
                continue
            twin.observation_count += rel.observation_count
            twin.channel_ids = list(dict.fromkeys([*twin.channel_ids, *rel.channel_ids]))
            twin.confidence = max(twin.confidence, rel.confidence)
            twin.last_observed = max(filter(None, [twin.last_observed, rel.last_observed]), default=None)
            ref, other_ref = twin.source_ref or {}, rel.source_ref or {}
            ids = list(dict.fromkeys([*ref.get("wire_msg_ids", []), *other_ref.get("wire_msg_ids", [])]))
            twin.source_ref = {**other_ref, **ref, "wire_msg_ids": ids} if (ref or other_ref) else None
            twin.save(update_fields=["observation_count", "channel_ids", "confidence", "last_observed", "source_ref"])
            rel.delete()

        ReviewAudit.objects.filter(entity_id__in=other_ids).update(entity=keep)
        keep.save(update_fields=["aliases", "channel_ids", "first_seen", "last_mentioned", "mention_count"])
        Entity.objects.filter(pk__in=other_ids).delete()
        audit(keep, actor=actor, action="merge", before=before, after=_snapshot(keep, names))
    logger.info("review desk: merged %d entities into %s by=%s", len(others), keep.pk, actor)
    return keep
