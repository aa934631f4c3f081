"""Every write to the knowledge tables goes through here: dedup, idempotency and guards live once."""

from __future__ import annotations

import hashlib
import logging
import math
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.db.models import F
from django.utils import timezone
from pgvector.django import CosineDistance

from jeeves import metrics
from knowledge import verbatim
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
    EntityMention,
    EntityRelationship,
    LlmCall,
    MessageReceipt,
    Summary,
)

logger = logging.getLogger(__name__)


def channel_accepts(channel_id: str, epoch: int) -> bool:
    """Consent check for workers: the channel is still active and still in the epoch the task was queued in."""
    return ChannelConfig.objects.filter(
        channel_id=channel_id, state=ChannelState.ACTIVE, epoch=epoch, left_at__isnull=True
    ).exists()


def record_receipt(channel_id: str, wire_msg_id: str, *, author_id: str | None, sent_at) -> bool:
    """Record that a message arrived. False when it was seen before (a redelivery): ignore it."""
    try:
        with transaction.atomic():
            MessageReceipt.objects.create(
                channel_id=channel_id, wire_msg_id=wire_msg_id, author_id=author_id, sent_at=sent_at
            )
    except IntegrityError:
        return False
    return True


def ensure_receipt(channel_id: str, wire_msg_id: str, *, author_id: str | None, sent_at) -> tuple[int, str]:
    """The message's (tier, outcome), writing its receipt first when the bridge published the task but
    died before committing the receipt (wire_bridge/ingest.py publishes first).

    The insert waits while the bridge's transaction holding the same receipt is still open, so the
    answer is the committed state: the bridge's receipt, or this one when the bridge rolled back.
    """
    MessageReceipt.objects.bulk_create(
        [MessageReceipt(channel_id=channel_id, wire_msg_id=wire_msg_id, author_id=author_id, sent_at=sent_at)],
        ignore_conflicts=True,
    )
    return (
        MessageReceipt.objects.filter(channel_id=channel_id, wire_msg_id=wire_msg_id)
        .values_list("tier", "outcome")
        .get()
    )


def mark_expired(channel_id: str, wire_msg_id: str) -> bool:
    """The message's text expired before it was classified: mark and count it, once.

    Only a receipt still waiting at tier 0 moves, so a redelivered copy of a task whose first copy
    classified the message (and discarded its text) is not counted as expired.
    """
    with transaction.atomic():  # a reader never sees the receipt expired before it is counted
        moved = MessageReceipt.objects.filter(
            channel_id=channel_id, wire_msg_id=wire_msg_id, tier=0, outcome=MessageReceipt.Outcome.QUEUED
        ).update(outcome=MessageReceipt.Outcome.EXPIRED)
        if moved:
            bump_counter(channel_id, "expired")
    if moved:
        metrics.CLAIM_CHECK_EXPIRED.inc()
    return bool(moved)


def receipt_tier(channel_id: str, wire_msg_id: str) -> int:
    """How far the message went (0 received, 1 classified, 2 extracted); -1 when there is no receipt."""
    tier = (
        MessageReceipt.objects.filter(channel_id=channel_id, wire_msg_id=wire_msg_id)
        .values_list("tier", flat=True)
        .first()
    )
    return -1 if tier is None else tier


def mark_receipt(
    channel_id: str,
    wire_msg_id: str,
    *,
    outcome: str,
    tier: int | None = None,
    categories: list[str] | None = None,
) -> None:
    fields: dict[str, object] = {"outcome": outcome}
    if tier is not None:
        fields["tier"] = tier
    if categories is not None:
        fields["categories"] = categories
    MessageReceipt.objects.filter(channel_id=channel_id, wire_msg_id=wire_msg_id).update(**fields)


def bump_counter(channel_id: str, name: str, by: int = 1) -> None:
    """Add `by` to the channel's counter `name`: one atomic upsert, exact under concurrent workers."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO pipeline_counters (channel_id, name, value, updated_at) VALUES (%s, %s, %s, now())
            ON CONFLICT (channel_id, name)
            DO UPDATE SET value = pipeline_counters.value + EXCLUDED.value, updated_at = EXCLUDED.updated_at
            """,
            [channel_id, name, by],
        )


# --------------------------------------------------------------------------- the no-verbatim guard


class VerbatimText(ValueError):
    """A text about to be stored repeats a run of more than verbatim.MAX_RUN words of a message."""


# An opaque token (12+ letters and digits, no separator: a key, a hash, a pasted secret) cannot be
# restated, only copied; it is dropped from stored text. Ticket ids (BILL-412) have separators.
_OPAQUE = re.compile(r"\b(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{12,}\b")


def guard_text(text: str | None, sources: Sequence[str]) -> str | None:
    """`text` without opaque tokens when it shares no run of more than verbatim.MAX_RUN (nine) words with
    any source (the one rule and tokenizer of knowledge/verbatim.py); VerbatimText otherwise."""
    if not text:
        return text
    text = " ".join(_OPAQUE.sub("", text).split())
    if not verbatim.is_safe(text, sources):
        raise VerbatimText("stored text would repeat ten or more words of a message")
    return text


def guard_tags(tags: Sequence[str] | None, sources: Sequence[str]) -> list[str]:
    """Tags that repeat no message: each on its own, and all of them read together (a model could
    spread a sentence over several tags); from the end, whatever would complete a copied run goes."""
    kept: list[str] = []
    for tag in tags or []:
        try:
            clean = guard_text(tag, sources)
            if clean:
                guard_text(" ".join([*kept, clean]), sources)
                kept.append(clean)
        except VerbatimText:
            continue
    return kept


# --------------------------------------------------------------------------- source refs and keys


def source_ref(messages: Sequence[tuple[str, datetime]]) -> dict:
    """{"wire_msg_ids": [...], "timestamp_range": {start, end}} from (wire_msg_id, sent_at) pairs."""
    ordered = sorted(messages, key=lambda m: (m[1], m[0]))
    ids = list(dict.fromkeys(m[0] for m in ordered))
    return {
        "wire_msg_ids": ids,
        "timestamp_range": {"start": ordered[0][1].isoformat(), "end": ordered[-1][1].isoformat()},
    }


def merge_source_refs(old: dict, new: dict) -> dict:
    ids = list(dict.fromkeys([*old.get("wire_msg_ids", []), *new.get("wire_msg_ids", [])]))
    old_range, new_range = old.get("timestamp_range") or {}, new.get("timestamp_range") or {}
    starts = [s for s in (old_range.get("start"), new_range.get("start")) if s]
    ends = [e for e in (old_range.get("end"), new_range.get("end")) if e]
    return {
        "wire_msg_ids": ids,
        "timestamp_range": {
            "start": min(starts, key=datetime.fromisoformat) if starts else None,
            "end": max(ends, key=datetime.fromisoformat) if ends else None,
        },
    }


def source_key(kind: str, wire_msg_ids: Sequence[str], ordinal: int = 0) -> str:
    """Natural key of an extracted record: its kind, its sorted source ids and its ordinal among
    records of the same kind resting on the same ids in one run (two decisions in one message)."""
    digest = hashlib.sha1("\x1f".join(sorted(set(wire_msg_ids))).encode()).hexdigest()[:20]
    return f"{kind}:{digest}:{ordinal}"


def next_friendly_id(channel_id: str, kind: str) -> str:
    """DEC-0007 / ACT-0012: one atomic upsert, safe under concurrent workers."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO friendly_id_sequences (channel_id, kind, last_value) VALUES (%s, %s, 1)
            ON CONFLICT (channel_id, kind) DO UPDATE SET last_value = friendly_id_sequences.last_value + 1
            RETURNING last_value
            """,
            [channel_id, kind],
        )
        (value,) = cursor.fetchone()
    return f"{kind}-{value:04d}"


def _ids_of(ref: dict | None) -> list[str]:
    return list((ref or {}).get("wire_msg_ids") or [])


def _figures(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:[.,]\d+)?", text))


# --------------------------------------------------------------------------- decisions, actions, signals

DECISION_DEDUP_COSINE = 0.9


@dataclass(frozen=True)
class Written:
    """What a write did: the row, and whether it was new (False: an existing row was updated)."""

    record: models.Model
    created: bool


def record_decision(
    channel: ChannelConfig,
    *,
    summary: str,
    rationale: str | None,
    decided_by: list[str],
    decided_at: datetime,
    confidence: float,
    source: dict,
    sources_text: Sequence[str],
    key: str,
    tags: list[str] | None = None,
    extraction_model: str | None = None,
    prompt_version: str | None = None,
    vector: Sequence[float] | None = None,
    restates: str | None = None,
    unembedded: Mapping[uuid.UUID, Sequence[float]] | None = None,
) -> Written:
    """Insert a decision, or, when it restates an active one of the channel (the model says so, or
    cosine ≥ 0.9 on the synthesised text with the same figures), extend that row's source_ref.

    No vector is stored here: Tier 3 (pipeline/embed.py) writes every record's one vector. `vector` is
    this decision's Tier-3 text (`pipeline.embed.decision_text` of the guarded fields) embedded in
    memory, for the comparison only; `unembedded` holds in-memory vectors, made the same way, of the
    channel's decisions Tier 3 has not embedded yet (written earlier in this run, or one run ago)."""
    summary, rationale, tags = decision_fields(summary, rationale, tags, sources_text)
    existing = Decision.objects.filter(channel=channel, source_key=key).first()
    if existing is not None:
        return Written(existing, False)
    restated = _restated_decision(channel, summary, vector, restates, unembedded or {})
    if restated is not None:
        restated.source_ref = merge_source_refs(restated.source_ref, source)
        restated.confidence = max(restated.confidence, confidence)
        restated.decided_by = list(dict.fromkeys([*restated.decided_by, *decided_by]))
        restated.save(update_fields=["source_ref", "confidence", "decided_by"])
        logger.info("decision restated: channel=%s decision=%s", channel.channel_id, restated.friendly_id)
        return Written(restated, False)
    # get_or_create: a concurrent run that wrote the same key first wins; the friendly id is drawn
    # inside the insert's transaction, so a lost race does not use one up.
    decision, created = Decision.objects.get_or_create(
        channel=channel,
        source_key=key,
        defaults={
            "friendly_id": lambda: next_friendly_id(channel.channel_id, "DEC"),
            "organisation_id": channel.organisation_id,
            "summary": summary,
            "rationale": rationale,
            "restatement": verbatim.restatement(summary, sources_text),
            "decided_by": list(dict.fromkeys(decided_by)),
            "decided_at": decided_at,
            "confidence": confidence,
            "tags": tags or [],
            "source_ref": source,
            "extraction_model": extraction_model,
            "prompt_version": prompt_version,
        },
    )
    return Written(decision, created)


def decision_fields(
    summary: str, rationale: str | None, tags: Sequence[str] | None, sources_text: Sequence[str]
) -> tuple[str, str | None, list[str]]:
    """(summary, rationale, tags) as record_decision stores them; VerbatimText when one is a copy."""
    return guard_text(summary, sources_text) or "", guard_text(rationale, sources_text), guard_tags(tags, sources_text)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors held in memory (pgvector's `1 - <=>` for stored ones)."""
    norms = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return math.fsum(x * y for x, y in zip(a, b, strict=True)) / norms if norms else 0.0


def _nearest(
    stored: models.QuerySet, vector: Sequence[float], unembedded: Mapping[uuid.UUID, Sequence[float]], floor: float
) -> list[uuid.UUID]:
    """Ids of the five records nearest `vector` with a similarity ≥ `floor`, nearest first: among the stored
    vectors of `stored` (Embedding rows) and the in-memory ones of records Tier 3 has not embedded yet."""
    near = [
        (float(distance), source_id)
        for source_id, distance in stored.annotate(distance=CosineDistance("embedding", list(vector)))
        .filter(distance__lte=1 - floor)
        .order_by("distance")
        .values_list("source_id", "distance")[:5]
    ]
    for source_id, other in unembedded.items():
        if (similarity := cosine(vector, other)) >= floor:
            near.append((1 - similarity, source_id))
    return [source_id for _, source_id in sorted(near, key=lambda n: n[0])][:5]


def _restated_decision(
    channel: ChannelConfig,
    summary: str,
    vector: Sequence[float] | None,
    restates: str | None,
    unembedded: Mapping[uuid.UUID, Sequence[float]],
) -> Decision | None:
    active = Decision.objects.filter(channel=channel, status=DecisionStatus.ACTIVE)
    if restates:
        named = active.filter(friendly_id=restates.strip().upper()).first()
        if named is not None:
            return named
    if vector is None:
        return None
    stored = Embedding.objects.filter(source_type="decision", channel_id=channel.channel_id)
    nearest = _nearest(stored, vector, unembedded, DECISION_DEDUP_COSINE)
    by_id = active.in_bulk(nearest)
    for decision in (by_id[i] for i in nearest if i in by_id):
        # A changed figure (5 attempts → 3 attempts) is a new decision, not a restatement.
        if _figures(decision.summary) == _figures(summary):
            return decision
    return None


def record_action(
    channel: ChannelConfig,
    *,
    description: str,
    owner_id: str | None,
    owner_name: str | None,
    deadline: datetime | None,
    status: str,
    confidence: float,
    source: dict,
    sources_text: Sequence[str],
    key: str,
    continues_ids: Sequence[str] = (),
    related_decision: Decision | None = None,
    tags: list[str] | None = None,
    extraction_model: str | None = None,
    prompt_version: str | None = None,
    created_at: datetime | None = None,
) -> Written:
    """Insert an action, or update the one it continues (an earlier action resting on one of
    `continues_ids`: a progress or completion message): status, deadline, source_ref."""
    description = guard_text(description, sources_text) or ""
    tags = guard_tags(tags, sources_text)
    existing = Action.objects.filter(channel=channel, source_key=key).first()
    if existing is None and continues_ids:
        candidates = Action.objects.filter(channel=channel, source_ref__wire_msg_ids__has_any_keys=list(continues_ids))
        existing = candidates.order_by("created_at").first()
    if existing is not None:
        existing.source_ref = merge_source_refs(existing.source_ref, source)
        fields = ["source_ref"]
        if status == ActionStatus.DONE and existing.status != ActionStatus.DONE:
            existing.status, existing.completed_at = ActionStatus.DONE, timezone.now()
            fields += ["status", "completed_at"]
        if deadline is not None and existing.deadline != deadline:
            existing.deadline, existing.staleness_at = deadline, deadline
            fields += ["deadline", "staleness_at"]
        if owner_id and not existing.owner_id:
            existing.owner_id, existing.owner_name = owner_id, owner_name
            fields += ["owner_id", "owner_name"]
        existing.save(update_fields=fields)
        return Written(existing, False)
    created = created_at or timezone.now()
    staleness_at = deadline or created + timedelta(days=settings.JEEVES.staleness_days)
    action, created = Action.objects.get_or_create(
        channel=channel,
        source_key=key,
        defaults={
            "friendly_id": lambda: next_friendly_id(channel.channel_id, "ACT"),
            "organisation_id": channel.organisation_id,
            "description": description,
            "restatement": verbatim.restatement(description, sources_text),
            "owner_id": owner_id,
            "owner_name": owner_name,
            "deadline": deadline,
            "status": status,
            "completed_at": timezone.now() if status == ActionStatus.DONE else None,
            "staleness_at": staleness_at,
            "confidence": confidence,
            "tags": tags or [],
            "source_ref": source,
            "related_decision": related_decision,
            "extraction_model": extraction_model,
            "prompt_version": prompt_version,
        },
    )
    return Written(action, created)


def record_signal(
    channel: ChannelConfig,
    *,
    signal_type: str,
    summary: str,
    occurred_at: datetime,
    source: dict,
    sources_text: Sequence[str],
    key: str,
    participants: list[str] | None = None,
    confidence: float = 0.6,
    related_entities: list[uuid.UUID] | None = None,
    tags: list[str] | None = None,
    extraction_model: str | None = None,
) -> Written:
    summary = guard_text(summary, sources_text) or ""
    tags = guard_tags(tags, sources_text)
    signal, created = ConversationSignal.objects.get_or_create(
        channel=channel,
        source_key=key,
        defaults={
            "organisation_id": channel.organisation_id,
            "signal_type": signal_type,
            "summary": summary,
            "restatement": verbatim.restatement(summary, sources_text),
            "participants": list(dict.fromkeys(participants or [])),
            "tags": tags or [],
            "related_entities": related_entities or [],
            "occurred_at": occurred_at,
            "confidence": confidence,
            "source_ref": source,
            "extraction_model": extraction_model,
        },
    )
    return Written(signal, created)


# --------------------------------------------------------------------------- entities and relationships


def normalise_name(name: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", name.casefold().replace("_", " ")).split())


def upsert_entity(
    channel: ChannelConfig,
    *,
    name: str,
    entity_type: str,
    aliases: Sequence[str] = (),
    seen_at: datetime,
    sources_text: Sequence[str] = (),
    vector: Sequence[float] | None = None,
    run_key: str | None = None,
    mention_ids: Sequence[str] = (),
    unembedded: Mapping[uuid.UUID, Sequence[float]] | None = None,
) -> Written:
    """Entity dedup (docs/architecture.md §5, entities): same organisation and type, alias or normalised-name match,
    else embedding cosine ≥ JEEVES_ENTITY_DEDUP_THRESHOLD; a match is updated, else inserted.
    `vector` (the Tier-3 text embedded in memory) and `unembedded` (in-memory vectors of entities Tier 3
    has not embedded yet) serve that comparison only: Tier 3 writes the entity's vector.
    `run_key` makes a redelivered run count a mention once; with `mention_ids` (the run's message
    ids) the mention keeps its evidence, so deleting those messages takes it away again."""
    name, aliases = entity_fields(name, aliases, sources_text)
    norm = normalise_name(name)
    if not norm:
        raise ValueError("an entity needs a name")
    forms = {norm, *(normalise_name(a) for a in aliases if normalise_name(a))}
    same_kind = Entity.objects.filter(organisation_id=channel.organisation_id, entity_type=entity_type, deleted=False)
    match = same_kind.filter(normalised_name__in=forms).first()
    if match is None:
        match = next((e for e in same_kind.filter(aliases__overlap=list(forms | {name, *aliases}))), None)
    if match is None:
        match = _alias_match(same_kind, forms)
    if match is None and vector is not None:
        match = _nearest_entity(channel.organisation_id, entity_type, vector, unembedded or {})
    if match is not None:
        new_aliases = [a for a in [name, *aliases] if normalise_name(a) != match.normalised_name]
        match.aliases = list(dict.fromkeys([*match.aliases, *new_aliases]))[:20]
        match.channel_ids = list(dict.fromkeys([*match.channel_ids, channel.channel_id]))
        counted = _new_mention(match, channel, run_key, mention_ids, seen_at)
        if counted:
            # Added in the UPDATE itself: concurrent runs mentioning the entity each count.
            match.mention_count = F("mention_count") + 1
        if match.last_mentioned is None or seen_at > match.last_mentioned:
            match.last_mentioned = seen_at
        match.save(update_fields=["aliases", "channel_ids", "mention_count", "last_mentioned"])
        if counted:
            match.refresh_from_db(fields=["mention_count"])
        return Written(match, False)
    try:
        with transaction.atomic():
            entity = Entity.objects.create(
                channel=channel,
                channel_ids=[channel.channel_id],
                organisation_id=channel.organisation_id,
                entity_type=entity_type,
                name=name,
                normalised_name=norm,
                aliases=new_entity_aliases(name, aliases),
                first_seen=seen_at,
                last_mentioned=seen_at,
            )
            _new_mention(entity, channel, run_key, mention_ids, seen_at)
    except IntegrityError:
        entity = Entity.objects.get(
            organisation_id=channel.organisation_id, entity_type=entity_type, normalised_name=norm, deleted=False
        )
        return Written(entity, False)
    return Written(entity, True)


def entity_fields(name: str, aliases: Sequence[str], sources_text: Sequence[str]) -> tuple[str, list[str]]:
    """(name, aliases) as upsert_entity reads them; VerbatimText when the name is a copy."""
    # An alias that repeats a message is not an alias: dropped, the entity kept.
    return (guard_text(name, sources_text) or "").strip(), guard_tags(aliases, sources_text)


def new_entity_aliases(name: str, aliases: Sequence[str]) -> list[str]:
    """The aliases a new entity is stored with: not its own name again, at most twenty."""
    norm = normalise_name(name)
    return list(dict.fromkeys(a for a in aliases if normalise_name(a) != norm))[:20]


def _new_mention(
    entity: Entity, channel: ChannelConfig, run_key: str | None, ids: Sequence[str], seen_at: datetime
) -> bool:
    """Record one run's mention of `entity`; False when this run was counted already (a redelivery)."""
    if run_key is None:
        return True
    _, created = EntityMention.objects.get_or_create(
        entity=entity,
        channel_id=channel.channel_id,
        run_key=run_key,
        defaults={"wire_msg_ids": list(dict.fromkeys(ids)), "seen_at": seen_at},
    )
    return created


def _alias_match(same_kind, forms: set[str]) -> Entity | None:
    # Aliases are stored as written ("Billing Worker"); compare their normalised forms.
    for entity in same_kind.exclude(aliases=[]).only("id", "aliases", "normalised_name")[:500]:
        if forms & {normalise_name(a) for a in entity.aliases}:
            return Entity.objects.get(pk=entity.pk)
    return None


def _nearest_entity(
    organisation_id: str,
    entity_type: str,
    vector: Sequence[float],
    unembedded: Mapping[uuid.UUID, Sequence[float]],
) -> Entity | None:
    stored = Embedding.objects.filter(source_type="entity", organisation_id=organisation_id)
    ids = _nearest(stored, vector, unembedded, settings.JEEVES.entity_dedup_threshold)
    by_id = {e.id: e for e in Entity.objects.filter(id__in=ids, entity_type=entity_type, deleted=False)}
    return next((by_id[i] for i in ids if i in by_id), None)


def upsert_relationship(
    channel: ChannelConfig,
    *,
    source: Entity,
    target: Entity,
    relationship: str,
    observed_at: datetime,
    ref: dict,
    context: str | None = None,
    sources_text: Sequence[str] = (),
    confidence: float = 0.7,
) -> Written:
    """Upsert on (source, target, relationship): observation_count += 1 unless these messages
    were already counted (a redelivered run)."""
    context = guard_text(context, sources_text)
    for attempt in range(2):
        existing = EntityRelationship.objects.filter(source=source, target=target, relationship=relationship).first()
        if existing is not None:
            new_ids = set(_ids_of(ref)) - set(_ids_of(existing.source_ref))
            observed = bool(new_ids or not _ids_of(ref))
            if observed:
                existing.observation_count = F("observation_count") + 1  # in the UPDATE: concurrent runs each count
            existing.source_ref = merge_source_refs(existing.source_ref or {}, ref)
            existing.channel_ids = list(dict.fromkeys([*existing.channel_ids, channel.channel_id]))
            existing.last_observed = max(filter(None, [existing.last_observed, observed_at]))
            existing.confidence = max(existing.confidence, confidence)
            existing.save(
                update_fields=["observation_count", "source_ref", "channel_ids", "last_observed", "confidence"]
            )
            if observed:
                existing.refresh_from_db(fields=["observation_count"])
            return Written(existing, False)
        try:
            with transaction.atomic():
                created = EntityRelationship.objects.create(
                    source=source,
                    target=target,
                    relationship=relationship,
                    organisation_id=channel.organisation_id,
                    channel_ids=[channel.channel_id],
                    context=context,
                    confidence=confidence,
                    first_observed=observed_at,
                    last_observed=observed_at,
                    source_ref=ref,
                )
            return Written(created, True)
        except IntegrityError:
            if attempt:
                raise
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------- embeddings


_VECTOR_SOURCES: dict[str, type[models.Model]] = {
    "decision": Decision,
    "action": Action,
    "signal": ConversationSignal,
    "entity": Entity,
    "summary": Summary,
}


def record_embedding(
    source_type: str,
    source_id: uuid.UUID,
    vector: Sequence[float],
    *,
    channel_id: str,
    organisation_id: str,
    author_id: str | None,
    created_at: datetime,
    topic_tags: list[str] | None = None,
    model: str | None = None,
) -> bool:
    """Idempotent on (source_type, source_id): False when the record already has a vector, or is gone.

    The record is locked (FOR KEY SHARE) while its vector is written: a delete racing with this waits,
    and its trigger then takes the vector too; a record deleted first gets none. No orphan vector."""
    table = _VECTOR_SOURCES[source_type]._meta.db_table
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT 1 FROM {table} WHERE id = %s FOR KEY SHARE", [source_id])
            if cursor.fetchone() is None:
                return False
        _, created = Embedding.objects.get_or_create(
            source_type=source_type,
            source_id=source_id,
            defaults={
                "channel_id": channel_id,
                "organisation_id": organisation_id,
                "author_id": author_id,
                "created_at": created_at,
                "topic_tags": topic_tags or [],
                "model": model,
                "embedding": list(vector),
            },
        )
    return created


def has_embedding(source_type: str, source_id: uuid.UUID) -> bool:
    return Embedding.objects.filter(source_type=source_type, source_id=source_id).exists()


def record_message_embedding(
    channel_id: str,
    wire_msg_id: str,
    vector: Sequence[float],
    *,
    organisation_id: str,
    author_id: str | None,
    created_at: datetime,
    model: str | None = None,
) -> bool:
    """The vector of a raw message (only with JEEVES_EMBED_MESSAGES=1; never its text). One row per
    (channel, message): a redelivered task hits the partial unique index and writes nothing (False)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO embeddings
                (id, source_type, source_id, wire_msg_id, channel_id, organisation_id, author_id,
                 created_at, topic_tags, model, embedding)
            VALUES (gen_random_uuid(), 'message', NULL, %s, %s, %s, %s, %s, '{}', %s, %s::vector)
            ON CONFLICT (channel_id, wire_msg_id) WHERE source_type = 'message' DO NOTHING
            RETURNING id
            """,
            [
                wire_msg_id,
                channel_id,
                organisation_id,
                author_id,
                created_at,
                model,
                "[" + ",".join(repr(float(x)) for x in vector) + "]",
            ],
        )
        return cursor.fetchone() is not None


def has_message_embedding(channel_id: str, wire_msg_id: str) -> bool:
    return Embedding.objects.filter(source_type="message", channel_id=channel_id, wire_msg_id=wire_msg_id).exists()


# --------------------------------------------------------------------------- model calls


def record_llm_call(
    *,
    slot: str,
    model: str,
    outcome: str,
    latency_ms: int,
    fallback_used: bool = False,
    attempt: int = 1,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    cost: float | None = None,
    channel_id: str | None = None,
) -> None:
    """One row per model call: never the prompt or the completion."""
    LlmCall.objects.create(
        slot=slot,
        model=model,
        outcome=outcome,
        latency_ms=max(0, int(latency_ms)),
        fallback_used=fallback_used,
        attempt=attempt,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost=Decimal(str(round(cost, 6))) if cost else None,
        channel_id=channel_id,
    )
    metrics.llm_call(
        slot=slot,
        model=model,
        outcome=outcome,
        latency_ms=latency_ms,
        fallback_used=fallback_used,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )
