"""Entities (names, types, aliases, mentions) and the relationships between them, their one writer (Tier 2).

Dedup (docs/architecture.md §5, entities): same organisation and type, a normalised-name or alias match,
else cosine ≥ JEEVES_ENTITY_DEDUP_THRESHOLD; a match is updated, else a row is inserted."""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from knowledge.embeddings import nearest
from knowledge.models import (
    ChannelConfig,
    Embedding,
    Entity,
    EntityMention,
    EntityRelationship,
)
from knowledge.records import Written
from knowledge.sources import ids_of, merge_source_refs
from knowledge.verbatim import guard_tags, guard_text


@functools.lru_cache(maxsize=65536)
def normalise_name(name: str) -> str:
    # Cached: a run's alias match normalises the stored aliases of up to 500 entities per entity it writes.
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
    match = same_kind.filter(normalised_name__in=forms).values_list("pk", flat=True).first()
    if match is None:
        overlapping = same_kind.filter(aliases__overlap=list(forms | {name, *aliases}))
        match = next(iter(overlapping.values_list("pk", flat=True)), None)
    if match is None:
        match = _alias_match(same_kind, forms)
    if match is None and vector is not None:
        match = _nearest_entity(channel.organisation_id, entity_type, vector, unembedded or {})
    if match is None:
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
            return Written(entity, True)
        except IntegrityError:  # a concurrent run inserted it first: merge into that row
            match = Entity.objects.get(
                organisation_id=channel.organisation_id, entity_type=entity_type, normalised_name=norm, deleted=False
            ).pk
    return Written(_merge(match, channel, [name, *aliases], run_key, mention_ids, seen_at), False)


def _merge(
    pk: uuid.UUID,
    channel: ChannelConfig,
    names: Sequence[str],
    run_key: str | None,
    mention_ids: Sequence[str],
    seen_at: datetime,
) -> Entity:
    """Merge one run's names, channel and mention into the entity `pk`, under its row lock: the aliases and
    channels are read after any concurrent merge committed, so none is lost (the match above was read
    without a lock). FOR NO KEY UPDATE, the lock the UPDATE takes anyway: inserts referring to the entity
    (mentions, relationships) are not blocked. The count is added to the one read under that lock (no read
    after the UPDATE); inside a run's transaction no savepoint (nothing here is caught)."""
    with transaction.atomic(savepoint=False):
        entity = Entity.objects.select_for_update(no_key=True).get(pk=pk)
        new_aliases = [a for a in names if normalise_name(a) != entity.normalised_name]
        entity.aliases = list(dict.fromkeys([*entity.aliases, *new_aliases]))[:20]
        entity.channel_ids = list(dict.fromkeys([*entity.channel_ids, channel.channel_id]))
        counted = _new_mention(entity, channel, run_key, mention_ids, seen_at)
        if counted:
            entity.mention_count += 1
        if entity.last_mentioned is None or seen_at > entity.last_mentioned:
            entity.last_mentioned = seen_at
        entity.save(update_fields=["aliases", "channel_ids", "mention_count", "last_mentioned"])
    return entity


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
    """Record one run's mention of `entity`; False when this run was counted already (a redelivery). One
    statement: the insert does nothing on the run's key (entity_mentions_run_uniq)."""
    if run_key is None:
        return True
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {EntityMention._meta.db_table} (entity_id, channel_id, run_key, wire_msg_ids, seen_at)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (entity_id, channel_id, run_key) DO NOTHING RETURNING id",
            [entity.pk, channel.channel_id, run_key, list(dict.fromkeys(ids)), seen_at],
        )
        return cursor.fetchone() is not None


def _alias_match(same_kind, forms: set[str]) -> uuid.UUID | None:
    # Aliases are stored as written ("Billing Worker"); compare their normalised forms.
    for pk, aliases in same_kind.exclude(aliases=[]).values_list("id", "aliases")[:500]:
        if any(normalise_name(a) in forms for a in aliases):
            return pk  # all _merge needs
    return None


def _nearest_entity(
    organisation_id: str,
    entity_type: str,
    vector: Sequence[float],
    unembedded: Mapping[uuid.UUID, Sequence[float]],
) -> uuid.UUID | None:
    stored = Embedding.objects.filter(source_type="entity", organisation_id=organisation_id)
    ids = nearest(stored, vector, unembedded, settings.JEEVES.entity_dedup_threshold)
    if not ids:
        return None
    found = set(Entity.objects.filter(id__in=ids, entity_type=entity_type, deleted=False).values_list("id", flat=True))
    return next((i for i in ids if i in found), None)


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
        with transaction.atomic(savepoint=False):
            # Locked like an entity's merge: a concurrent run's source ids are read once it committed; the count
            # is added to the one read under the lock.
            existing = (
                EntityRelationship.objects.select_for_update(no_key=True)
                .filter(source=source, target=target, relationship=relationship)
                .first()
            )
            if existing is not None:
                new_ids = set(ids_of(ref)) - set(ids_of(existing.source_ref))
                observed = bool(new_ids or not ids_of(ref))
                if observed:
                    existing.observation_count += 1
                existing.source_ref = merge_source_refs(existing.source_ref or {}, ref)
                existing.channel_ids = list(dict.fromkeys([*existing.channel_ids, channel.channel_id]))
                existing.last_observed = max(filter(None, [existing.last_observed, observed_at]))
                existing.confidence = max(existing.confidence, confidence)
                existing.save(
                    update_fields=["observation_count", "source_ref", "channel_ids", "last_observed", "confidence"]
                )
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
