"""Vectors (`embeddings`), their one writer: Tier 3 (pipeline/embed.py) and `jeeves reembed` write through
here, one vector per record (and per raw message with JEEVES_EMBED_MESSAGES=1); plus the nearest-neighbour
read that decision and entity dedup compare with."""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime

from django.db import connection, models, transaction
from pgvector.django import CosineDistance

from knowledge.models import (
    Action,
    ConversationSignal,
    Decision,
    Embedding,
    Entity,
    Summary,
)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors held in memory (pgvector's `1 - <=>` for stored ones)."""
    norms = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return math.fsum(x * y for x, y in zip(a, b, strict=True)) / norms if norms else 0.0


def nearest(
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
