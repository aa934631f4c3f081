"""Tier 3: vectors of the *synthesised* text of records (decisions, actions, signals, entities,
summaries) into `embeddings`, given record ids only; and, only with JEEVES_EMBED_MESSAGES=1, the
vector (never the text) of a raw message, called by Tier 1 while the text is in hand."""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.db.models import QuerySet

from knowledge import embeddings
from knowledge.models import Action, ChannelConfig, ConversationSignal, Decision, Embedding, Entity, Summary
from pipeline import embedder

logger = logging.getLogger(__name__)

_probe_lock = threading.Lock()
_probed = False


def ready() -> bool:
    """The embedder passed its start-up probe (run once per process, on first use)."""
    global _probed
    if not _probed:
        with _probe_lock:
            if not _probed:
                embedder.probe()
                _probed = True
    return embedder.enabled()


def vectors(texts: Sequence[str], *, records: bool = False) -> list[list[float]] | None:
    """Vectors for `texts`, or None when embedding is disabled or fails (the caller goes on without).

    `records`: the texts are records' synthesised texts (never a message's), whose vectors this process keeps
    a while (`_RecordVectors`): Tier 2 and the contradiction duty compare the same records run after run."""
    if not texts or not ready():
        return None
    if records:
        return _record_vectors.get(list(texts))
    try:
        return embedder.embed(list(texts))
    except Exception as exc:
        logger.warning("embedding failed (%s); continuing without vectors", type(exc).__name__)
        return None


class _RecordVectors:
    """The last few thousand record texts' vectors in this process, keyed by a digest of the embed model and
    the text (the text itself is not kept). A run compares each new decision with the records Tier 3 has not
    reached yet and the contradiction duty with the channel's nearest decisions: mostly the same records as
    the run before, embedded once instead of every run."""

    SIZE = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: OrderedDict[bytes, list[float]] = OrderedDict()

    @staticmethod
    def _key(model: str, text: str) -> bytes:
        return hashlib.blake2b(f"{model}\x00{text}".encode("utf-8", "replace"), digest_size=16).digest()

    def get(self, texts: list[str]) -> list[list[float]] | None:
        model = settings.JEEVES.slot("embed").model
        keys_ = [self._key(model, t) for t in texts]
        found: dict[bytes, list[float]] = {}
        with self._lock:
            for k in keys_:
                if k in self._cache:
                    self._cache.move_to_end(k)
                    found[k] = self._cache[k]
        missing = list(dict.fromkeys(k for k in keys_ if k not in found))
        if missing:
            at = {k: i for i, k in reversed(list(enumerate(keys_)))}
            try:
                fresh = embedder.embed([texts[at[k]] for k in missing])
            except Exception as exc:
                logger.warning("embedding failed (%s); continuing without vectors", type(exc).__name__)
                return None
            found.update(zip(missing, fresh, strict=True))
            with self._lock:
                for k in missing:
                    self._cache[k] = found[k]
                while len(self._cache) > self.SIZE:
                    self._cache.popitem(last=False)
        return [found[k] for k in keys_]


_record_vectors = _RecordVectors()


def _with_tags(text: str, tags: Sequence[str]) -> str:
    """The record's text plus its topic tags, unless a "Topic:" clause already carries them."""
    if not tags or "Topic:" in text:
        return text
    return f"{text} Topic: {', '.join(tags)}."


def decision_text(summary: str, rationale: str | None, tags: Sequence[str]) -> str:
    """The text a decision's vector is made from: summary, rationale, topic tags. Tier 2 embeds the same
    text in memory to compare a new decision with the stored ones (knowledge.records.record_decision)."""
    return _with_tags(summary if not rationale else f"{summary} {rationale}", tags)


def entity_text(name: str, aliases: Sequence[str]) -> str:
    """The text an entity's vector is made from: its name and first five aliases."""
    return ", ".join([name, *aliases[:5]])


def _record_text_and_meta(source_type: str, record: object) -> tuple[str, str, str | None, object, list[str]]:
    """(text, channel_id, author_id, created_at, topic tags) of a record: the one text its vector is made from."""
    if isinstance(record, Decision):
        return (
            decision_text(record.summary, record.rationale, record.tags),
            record.channel_id,
            (record.decided_by or [None])[0],
            record.decided_at,
            list(record.tags),
        )
    if isinstance(record, Action):
        text = _with_tags(record.description, record.tags)
        return text, record.channel_id, record.owner_id, record.created_at, list(record.tags)
    if isinstance(record, ConversationSignal):
        author = (record.participants or [None])[0]
        return record.summary, record.channel_id, author, record.occurred_at, list(record.tags)
    if isinstance(record, Entity):
        return (
            entity_text(record.name, record.aliases),
            record.channel_id,
            None,
            record.first_seen or record.last_mentioned,
            [],
        )
    if isinstance(record, Summary):
        return record.summary, record.scope_id, None, record.period_end, []
    raise ValueError(f"cannot embed a {source_type}")


def record_text(source_type: str, record: object) -> str:
    """The text `record`'s vector is made from."""
    return _record_text_and_meta(source_type, record)[0]


_MODELS = {
    "decision": Decision,
    "action": Action,
    "signal": ConversationSignal,
    "entity": Entity,
    "summary": Summary,
}


def unembedded(records: QuerySet, source_type: str) -> QuerySet:
    """Those of `records` (rows of `source_type`) with no vector yet: Tier 3 has not reached them."""
    vectors = Embedding.objects.filter(source_type=source_type, source_id__isnull=False)
    return records.exclude(pk__in=vectors.values("source_id"))


def embed_records(records: Sequence[tuple[str, str]]) -> int:
    """Embed each (source_type, id) that has no vector yet. Idempotent; returns rows written.

    The only writer of record vectors (Tier 3; `jeeves reembed` replaces them the same way): each from
    `_record_text_and_meta`'s text, labelled with the embed slot's model."""
    wanted: dict[str, list[uuid.UUID]] = {}
    for source_type, raw_id in records:
        if source_type not in _MODELS:
            raise ValueError(f"unknown source type {source_type!r}")
        ids = wanted.setdefault(source_type, [])
        record_id = uuid.UUID(str(raw_id))
        if record_id not in ids:
            ids.append(record_id)
    todo: list[tuple[str, object]] = []
    for source_type, ids in wanted.items():  # one query per kind for the vectors there, one for the records
        done = set(
            Embedding.objects.filter(source_type=source_type, source_id__in=ids).values_list("source_id", flat=True)
        )
        rows = _MODELS[source_type].objects.in_bulk([i for i in ids if i not in done])
        # A record deleted meanwhile (the author took the message back) is not found: nothing to embed.
        todo += [(source_type, rows[i]) for i in ids if i in rows]
    if not todo:
        return 0
    metas = [_record_text_and_meta(kind, record) for kind, record in todo]
    found = vectors([m[0] for m in metas])
    if found is None:
        return 0
    model_name = settings.JEEVES.slot("embed").model
    written = sum(
        write_vector(kind, record, vector, model_name) for (kind, record), vector in zip(todo, found, strict=True)
    )
    logger.info("embedded %d records", written)
    return written


def write_vector(kind: str, record: object, vector: Sequence[float], model_name: str) -> bool:
    """Store `record`'s vector (made from `record_text`), labelled with `model_name`, with the channel, author,
    time and tags `_record_text_and_meta` gives. False when the record has a vector already, or is gone."""
    _, channel_id, author_id, created_at, tags = _record_text_and_meta(kind, record)
    return embeddings.record_embedding(
        kind,
        record.pk,
        vector,
        channel_id=channel_id,
        organisation_id=record.organisation_id,
        author_id=author_id,
        created_at=created_at,
        topic_tags=tags,
        model=model_name,
    )


def embed_message(
    channel: ChannelConfig, wire_msg_id: str, text: str, *, author_id: str | None, sent_at: datetime | None
) -> bool:
    """One `message` row for a raw message when JEEVES_EMBED_MESSAGES is on and the embedder passed
    its probe. Idempotent (a redelivery writes nothing); the text lives only in this call."""
    if not settings.JEEVES.embed_messages or sent_at is None or not text.strip():
        return False
    if embeddings.has_message_embedding(channel.channel_id, wire_msg_id):
        return False  # a redelivery: skip the model call too
    found = vectors([text])
    if found is None:
        return False
    return embeddings.record_message_embedding(
        channel.channel_id,
        wire_msg_id,
        found[0],
        organisation_id=channel.organisation_id,
        author_id=author_id or None,
        created_at=sent_at,
        model=settings.JEEVES.slot("embed").model,
    )
