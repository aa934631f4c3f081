"""Forgetting on request (docs/guarantees.md §7): a message its author deleted, a channel Jeeves has
left, everything of one person, records past retention. Every table, embeddings included, no orphan.

Like knowledge/records.py, entities.py and receipts.py these are the writes; the bridge, the tasks and
`jeeves purge` decide when.
Each returns how many rows it deleted or changed per table (`Counter` keyed by table name). A record
cannot say which of its words came from which message, so a record resting on a forgotten message
goes whole; the summaries that retold it are withdrawn (the caller may write them again).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.contrib.admin.models import LogEntry
from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from knowledge import gate
from knowledge.models import (
    Action,
    ChannelConfig,
    ConversationSignal,
    Decision,
    DecisionConflict,
    DigestSubscription,
    Embedding,
    Entity,
    EntityMention,
    EntityRelationship,
    FriendlyIdSequence,
    LlmCall,
    MessageReceipt,
    MessageTombstone,
    PipelineCounter,
    ReviewAudit,
    RomanBot,
    Summary,
)

logger = logging.getLogger(__name__)

# How long a deleted message's id is kept to stop a late (or redelivered) copy of it being recorded.
TOMBSTONE_DAYS = 7
LOCK_TIMEOUT_MS = 3000
# Record kinds that rest on messages: model, embeddings' source_type, the time a summary would place it at.
_RECORDS: tuple[tuple[type, str, str], ...] = (
    (Decision, "decision", "decided_at"),
    (Action, "action", "created_at"),
    (ConversationSignal, "signal", "occurred_at"),
)


@dataclass(frozen=True)
class SummaryPeriod:
    """A channel summary withdrawn because a record it retold is gone: write it again from what is left."""

    channel_id: str
    granularity: str
    period_start: datetime
    period_end: datetime


@dataclass
class Forgotten:
    counts: Counter = field(default_factory=Counter)
    summaries: list[SummaryPeriod] = field(default_factory=list)


def _table(model: type) -> str:
    return model._meta.db_table


def _delete(qs: QuerySet, counts: Counter) -> None:
    """Delete `qs` (and what cascades from it), counting rows per table."""
    _, per_model = qs.delete()
    from django.apps import apps

    for label, n in per_model.items():
        if n:
            counts[_table(apps.get_model(label))] += n


def _drop_vectors(kind: str, ids: Iterable[uuid.UUID], counts: Counter) -> None:
    # The database would drop them too (trigger of migration 0005); deleting first lets them be counted.
    ids = list(ids)
    if ids:
        _delete(Embedding.objects.filter(source_type=kind, source_id__in=ids), counts)


# --------------------------------------------------------------------------- tombstones


def tombstone(channel_id: str, wire_msg_id: str, now: datetime | None = None) -> None:
    """Remember that the message was deleted (its id only) for TOMBSTONE_DAYS."""
    expires = (now or timezone.now()) + timedelta(days=TOMBSTONE_DAYS)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO message_tombstones (channel_id, wire_msg_id, expires_at) VALUES (%s, %s, %s)"
            " ON CONFLICT (channel_id, wire_msg_id) DO UPDATE SET expires_at = EXCLUDED.expires_at",
            [channel_id, wire_msg_id, expires],
        )
    # The webhook's gate refuses the message from now on (in a caller's transaction, before its commit: the
    # safe side, a message refused while its tombstone may still roll back).
    gate.note_tombstone(channel_id, wire_msg_id)


def tombstoned(channel_id: str, wire_msg_ids: Iterable[str]) -> set[str]:
    """Which of these messages of the channel were deleted by their authors."""
    ids = list(wire_msg_ids)
    if not ids:
        return set()
    return set(
        MessageTombstone.objects.filter(
            channel_id=channel_id, wire_msg_id__in=ids, expires_at__gt=timezone.now()
        ).values_list("wire_msg_id", flat=True)
    )


# --------------------------------------------------------------------------- one message, or several of a channel


def forget_message(channel_id: str, wire_msg_id: str) -> Forgotten:
    """The author deleted the message: every record resting on it is withdrawn (with its vector), its
    id leaves relationships and entity mentions (a mention with no message left goes, an entity with
    no mention left goes), its receipt goes, and the summaries that retold a withdrawn record are
    withdrawn. The tombstone is committed first, so an extraction finishing meanwhile sees it."""
    tombstone(channel_id, wire_msg_id)
    with transaction.atomic():
        with connection.cursor() as cursor:
            # Behind a long lock (an extraction writing these rows) fail fast: the task retries with backoff.
            cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT_MS}ms'")
        return _withdraw_messages(channel_id, [wire_msg_id])


def _withdraw_messages(channel_id: str, ids: Sequence[str]) -> Forgotten:
    out = Forgotten()
    counts = out.counts
    gone: dict[str, list[uuid.UUID]] = {}
    times: list[datetime] = []
    for model, kind, at in _RECORDS:
        rows = list(
            model.objects.select_for_update()
            .filter(channel_id=channel_id, source_ref__wire_msg_ids__has_any_keys=list(ids))
            .values_list("pk", at)
        )
        gone[kind] = [pk for pk, _ in rows]
        times += [t for _, t in rows if t is not None]
        _drop_vectors(kind, gone[kind], counts)
        _delete(model.objects.filter(pk__in=gone[kind]), counts)

    forgotten = set(ids)
    for rel in EntityRelationship.objects.select_for_update().filter(
        channel_ids__contains=[channel_id], source_ref__wire_msg_ids__has_any_keys=list(ids)
    ):
        remaining = [i for i in (rel.source_ref or {}).get("wire_msg_ids", []) if i not in forgotten]
        if not remaining:
            _delete(EntityRelationship.objects.filter(pk=rel.pk), counts)
            continue
        rel.source_ref = {**rel.source_ref, "wire_msg_ids": remaining}
        rel.observation_count = max(1, rel.observation_count - 1)
        rel.context = None  # it may restate the forgotten message
        rel.save(update_fields=["source_ref", "observation_count", "context"])
        counts[_table(EntityRelationship)] += 1

    _forget_mentions(
        EntityMention.objects.select_for_update().filter(channel_id=channel_id, wire_msg_ids__overlap=list(ids)),
        forgotten,
        channel_id,
        counts,
    )
    _withdraw_summaries(channel_id, gone, times, out)
    _delete(MessageReceipt.objects.filter(channel_id=channel_id, wire_msg_id__in=ids), counts)
    _delete(Embedding.objects.filter(source_type="message", channel_id=channel_id, wire_msg_id__in=ids), counts)
    return out


def _forget_mentions(mentions: QuerySet, forgotten: set[str], channel_id: str, counts: Counter) -> None:
    """Take the forgotten messages out of entity mentions; a mention left with none is gone, and so is
    an entity left with no mention (its relationships and vector with it)."""
    lost: Counter = Counter()
    for mention in mentions:
        remaining = [i for i in mention.wire_msg_ids if i not in forgotten]
        if remaining:
            mention.wire_msg_ids = remaining
            mention.save(update_fields=["wire_msg_ids"])
            counts[_table(EntityMention)] += 1
        else:
            mention.delete()
            counts[_table(EntityMention)] += 1
            lost[mention.entity_id] += 1
    for entity in Entity.objects.select_for_update().filter(pk__in=list(lost)):
        left = entity.mention_count - lost[entity.pk]
        if left <= 0:
            _drop_vectors("entity", [entity.pk], counts)
            _delete(Entity.objects.filter(pk=entity.pk), counts)
            continue
        entity.mention_count = left
        fields = ["mention_count"]
        still_here = EntityMention.objects.filter(entity=entity, channel_id=channel_id).exists()
        elsewhere = EntityMention.objects.filter(entity=entity).exclude(channel_id=channel_id).exists()
        if elsewhere and not still_here and channel_id in entity.channel_ids:
            entity.channel_ids = [c for c in entity.channel_ids if c != channel_id]
            fields.append("channel_ids")
        entity.save(update_fields=fields)
        counts[_table(Entity)] += 1


def _citing(records: dict[str, list[uuid.UUID]]) -> Q:
    """Summaries citing any of these decisions or actions."""
    cites = Q(pk__in=[])
    if records.get("decision"):
        cites |= Q(key_decisions__overlap=records["decision"])
    if records.get("action"):
        cites |= Q(key_actions__overlap=records["action"])
    return cites


def _withdraw_summaries(
    channel_id: str, gone: dict[str, list[uuid.UUID]], times: list[datetime], out: Forgotten
) -> None:
    """Summaries that retold a withdrawn record: the channel's covering its time (or citing it), and any
    person summary citing it. The channel's are returned to be written again from what is left."""
    cites = _citing(gone)
    covers = Q(pk__in=[])
    for t in times:
        covers |= Q(period_start__lte=t, period_end__gt=t)
    channel_summaries = Summary.objects.filter(scope_type="channel", scope_id=channel_id).filter(cites | covers)
    for s in channel_summaries.order_by("period_start"):
        out.summaries.append(SummaryPeriod(channel_id, s.granularity, s.period_start, s.period_end))
    doomed = Summary.objects.filter(Q(pk__in=channel_summaries.values("pk")) | (Q(scope_type="person") & cites))
    ids = list(doomed.values_list("pk", flat=True))
    _drop_vectors("summary", ids, out.counts)
    _delete(Summary.objects.filter(pk__in=ids), out.counts)


# --------------------------------------------------------------------------- a whole channel


def purge_channel(channel_id: str) -> Counter:
    """Everything Jeeves holds of the channel, in every table: its records and their vectors, its
    summaries (and person summaries retelling its records), its share of entities and relationships,
    receipts, counters, model-call rows, tombstones, Roman bot, the channel row and admin log entries."""
    counts: Counter = Counter()
    with transaction.atomic():
        message_ids = list(MessageReceipt.objects.filter(channel_id=channel_id).values_list("wire_msg_id", flat=True))
        record_ids: dict[str, list[uuid.UUID]] = {
            kind: list(model.objects.filter(channel_id=channel_id).values_list("pk", flat=True))
            for model, kind, _ in _RECORDS
        }
        retelling = Q(scope_type="channel", scope_id=channel_id) | (Q(scope_type="person") & _citing(record_ids))
        summary_ids = list(Summary.objects.filter(retelling).values_list("pk", flat=True))
        _delete(Embedding.objects.filter(channel_id=channel_id), counts)
        _drop_vectors("summary", summary_ids, counts)
        _delete(Summary.objects.filter(pk__in=summary_ids), counts)
        for model, kind, _ in _RECORDS:
            _drop_vectors(kind, record_ids[kind], counts)
            _delete(model.objects.filter(channel_id=channel_id), counts)

        _leave_shared(channel_id, set(message_ids), counts)
        for model in (MessageReceipt, PipelineCounter, FriendlyIdSequence, LlmCall, MessageTombstone, RomanBot):
            _delete(model.objects.filter(channel_id=channel_id), counts)
        logged = [channel_id, *(str(i) for ids in record_ids.values() for i in ids), *map(str, summary_ids)]
        _delete(LogEntry.objects.filter(content_type__app_label="knowledge", object_id__in=logged), counts)
        _delete(ChannelConfig.objects.filter(channel_id=channel_id), counts)
    # Once committed: a preview (`jeeves purge` without --yes) rolls back and logs nothing.
    transaction.on_commit(lambda: logger.info("channel purged: channel=%s %s", channel_id, dict(counts)))
    return counts


def _leave_shared(channel_id: str, message_ids: set[str], counts: Counter) -> None:
    """Entities and relationships are shared by an organisation's channels: the channel's share goes
    (its mentions, its id, its message ids); what no other channel holds goes whole."""
    lost = Counter(EntityMention.objects.filter(channel_id=channel_id).values_list("entity_id", flat=True).iterator())
    _delete(EntityMention.objects.filter(channel_id=channel_id), counts)
    present = set(ChannelConfig.objects.exclude(channel_id=channel_id).values_list("channel_id", flat=True))
    for entity in Entity.objects.select_for_update().filter(
        Q(channel_ids__contains=[channel_id]) | Q(channel_id=channel_id) | Q(pk__in=list(lost))
    ):
        others = [c for c in entity.channel_ids if c != channel_id]
        home = entity.channel_id if entity.channel_id != channel_id else next((c for c in others if c in present), None)
        if not others or home is None:
            _drop_vectors("entity", [entity.pk], counts)
            _delete(Entity.objects.filter(pk=entity.pk), counts)
            continue
        entity.channel_ids, entity.channel_id = others, home
        entity.mention_count = max(1, entity.mention_count - lost[entity.pk])
        entity.save(update_fields=["channel_ids", "channel", "mention_count"])
        counts[_table(Entity)] += 1
    for rel in EntityRelationship.objects.select_for_update().filter(channel_ids__contains=[channel_id]):
        others = [c for c in rel.channel_ids if c != channel_id]
        if not others:
            _delete(EntityRelationship.objects.filter(pk=rel.pk), counts)
            continue
        ref = rel.source_ref or {}
        rel.channel_ids = others
        rel.source_ref = {**ref, "wire_msg_ids": [i for i in ref.get("wire_msg_ids", []) if i not in message_ids]}
        rel.save(update_fields=["channel_ids", "source_ref"])
        counts[_table(EntityRelationship)] += 1


def purge_left_channels(grace: timedelta, now: datetime | None = None) -> dict[str, Counter]:
    """Purge every channel Jeeves left at least `grace` ago (a channel it rejoined meanwhile is kept)."""
    cutoff = (now or timezone.now()) - grace
    due = ChannelConfig.objects.filter(left_at__isnull=False, left_at__lte=cutoff).values_list("channel_id", flat=True)
    return {channel_id: purge_channel(channel_id) for channel_id in list(due)}


# --------------------------------------------------------------------------- one person


def purge_user(user_id: str) -> Counter:
    """A personal data request: everything the person authored (records resting on their messages,
    their receipts and vectors), owns (actions) or decided (decisions), signals they took part in,
    their person summaries and summaries naming them, and their id wherever a channel keeps it."""
    out = Forgotten()  # summaries that retold the person's records are withdrawn, not written again
    counts = out.counts
    with transaction.atomic():
        authored: dict[str, list[str]] = {}
        for cid, mid in MessageReceipt.objects.filter(author_id=user_id).values_list("channel_id", "wire_msg_id"):
            authored.setdefault(cid, []).append(mid)
        for cid, ids in authored.items():
            counts.update(_withdraw_messages(cid, ids).counts)
        gone: dict[str, list[uuid.UUID]] = {}
        times: dict[str, list[datetime]] = {}
        mine = {
            "decision": Q(decided_by__contains=[user_id]),
            "action": Q(owner_id=user_id),
            "signal": Q(participants__contains=[user_id]),
        }
        for model, kind, at in _RECORDS:
            rows = list(model.objects.filter(mine[kind]).values_list("pk", "channel_id", at))
            gone[kind] = [pk for pk, _, _ in rows]
            for _, cid, t in rows:
                times.setdefault(cid, []).append(t)
            _drop_vectors(kind, gone[kind], counts)
            _delete(model.objects.filter(pk__in=gone[kind]), counts)
        for cid, when in times.items():
            _withdraw_summaries(cid, gone, when, out)
        named = Summary.objects.filter(Q(scope_type="person", scope_id=user_id) | Q(participants__contains=[user_id]))
        ids = list(named.values_list("pk", flat=True))
        _drop_vectors("summary", ids, counts)
        _delete(Summary.objects.filter(pk__in=ids), counts)
        _delete(Embedding.objects.filter(author_id=user_id), counts)
        _delete(MessageReceipt.objects.filter(author_id=user_id), counts)
        _delete(DigestSubscription.objects.filter(user_id=user_id), counts)
        counts[_table(Decision)] += Decision.objects.filter(reviewed_by=user_id).update(reviewed_by=None)
        counts[_table(DecisionConflict)] += DecisionConflict.objects.filter(resolved_by=user_id).update(
            resolved_by=None
        )
        # The review desk's entries stay (who reviewed what), the person's id and name scrubbed from them.
        for entry in ReviewAudit.objects.select_for_update().filter(
            Q(before__owner_id=user_id) | Q(after__owner_id=user_id)
        ):
            for side in (entry.before, entry.after):
                if side.get("owner_id") == user_id:
                    side.update({k: None for k in ("owner_id", "owner_name") if k in side})
            entry.save(update_fields=["before", "after"])
            counts[_table(ReviewAudit)] += 1
        for row in ChannelConfig.objects.select_for_update().filter(
            Q(stakeholders__contains=[user_id]) | Q(state_changed_by=user_id) | Q(context_updated_by=user_id)
        ):
            row.stakeholders = [s for s in row.stakeholders if s != user_id]
            row.state_changed_by = None if row.state_changed_by == user_id else row.state_changed_by
            row.context_updated_by = None if row.context_updated_by == user_id else row.context_updated_by
            row.save(update_fields=["stakeholders", "state_changed_by", "context_updated_by"])
            counts[_table(ChannelConfig)] += 1
    transaction.on_commit(lambda: logger.info("person purged: %s", dict(counts)))
    return counts


# --------------------------------------------------------------------------- retention


def age_out(cutoff: datetime | None, now: datetime | None = None) -> Counter:
    """Delete records older than `cutoff` (JEEVES_RETENTION_DAYS; None = keep them) and expired tombstones."""
    counts: Counter = Counter()
    now = now or timezone.now()
    with transaction.atomic():
        _delete(MessageTombstone.objects.filter(expires_at__lte=now), counts)
        if cutoff is None:
            return counts
        for model, kind, at in _RECORDS:
            old = model.objects.filter(**{f"{at}__lt": cutoff})
            _drop_vectors(kind, old.values_list("pk", flat=True), counts)
            _delete(old, counts)
        old_summaries = Summary.objects.filter(period_end__lt=cutoff)
        _drop_vectors("summary", old_summaries.values_list("pk", flat=True), counts)
        _delete(old_summaries, counts)
        _delete(Embedding.objects.filter(source_type="message", created_at__lt=cutoff), counts)
        _delete(EntityRelationship.objects.filter(last_observed__lt=cutoff), counts)
        _delete(EntityMention.objects.filter(seen_at__lt=cutoff), counts)
        old_entities = Entity.objects.filter(last_mentioned__lt=cutoff)
        _drop_vectors("entity", old_entities.values_list("pk", flat=True), counts)
        _delete(old_entities, counts)
        _delete(
            MessageReceipt.objects.filter(Q(sent_at__lt=cutoff) | Q(sent_at__isnull=True, received_at__lt=cutoff)),
            counts,
        )
        _delete(LlmCall.objects.filter(created_at__lt=cutoff), counts)
    logger.info("aged out: before=%s %s", cutoff.isoformat(), dict(counts))
    return counts
