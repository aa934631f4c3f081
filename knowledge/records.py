"""Decisions, action items and conversation signals: the one writer of each new row (Tier 2, and Tier 1's
signals). A restated decision or a continued action extends the row it restates; every text passes the
verbatim guard (knowledge/verbatim.py). No vector is written here: Tier 3 writes every record's one vector
(knowledge/embeddings.py). Review changes (done, supersede, ...) are knowledge/review.py's."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from knowledge import verbatim
from knowledge.embeddings import nearest
from knowledge.models import (
    Action,
    ActionStatus,
    ChannelConfig,
    ConversationSignal,
    Decision,
    DecisionStatus,
    Embedding,
)
from knowledge.sources import merge_source_refs, said_at
from knowledge.verbatim import guard_tags, guard_text

logger = logging.getLogger(__name__)


DECISION_DEDUP_COSINE = 0.9


@dataclass(frozen=True)
class Written:
    """What a write did: the row, and whether it was new (False: an existing row was updated)."""

    record: models.Model
    created: bool


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


def _figures(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:[.,]\d+)?", text))


@dataclass(frozen=True, kw_only=True)
class _Draft:
    """A record's own columns as read, named as the model names them; its writer guards the texts and tags
    (knowledge/verbatim.py) and stores the rest as they are. These three every kind has; each kind adds its own."""

    confidence: float
    tags: list[str] | None = None
    extraction_model: str | None = None


@dataclass(frozen=True, kw_only=True)
class DecisionDraft(_Draft):
    """What record_decision stores."""

    summary: str
    rationale: str | None
    decided_by: list[str]
    decided_at: datetime
    prompt_version: str | None = None


@dataclass(frozen=True, kw_only=True)
class ActionDraft(_Draft):
    """What record_action stores."""

    description: str
    owner_id: str | None
    owner_name: str | None
    deadline: datetime | None
    status: str
    related_decision: Decision | None = None
    prompt_version: str | None = None


@dataclass(frozen=True, kw_only=True)
class SignalDraft(_Draft):
    """What record_signal stores."""

    signal_type: str
    summary: str
    occurred_at: datetime
    participants: list[str] | None = None
    related_entities: list[uuid.UUID] | None = None
    confidence: float = 0.6


def record_decision(
    channel: ChannelConfig,
    draft: DecisionDraft,
    *,
    source: dict,
    sources_text: Sequence[str],
    key: str,
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
    summary, rationale, tags = decision_fields(draft.summary, draft.rationale, draft.tags, sources_text)
    existing = Decision.objects.filter(channel=channel, source_key=key).first()
    if existing is not None:
        return Written(existing, False)
    restated = _restated_decision(channel, summary, vector, restates, unembedded or {})
    if restated is not None:
        restated.source_ref = merge_source_refs(restated.source_ref, source)
        restated.confidence = max(restated.confidence, draft.confidence)
        restated.decided_by = list(dict.fromkeys([*restated.decided_by, *draft.decided_by]))
        restated.save(update_fields=["source_ref", "confidence", "decided_by"])
        logger.info("decision restated: channel=%s decision=%s", channel.channel_id, restated.friendly_id)
        return Written(restated, False)
    row = replace(
        draft, summary=summary, rationale=rationale, tags=tags, decided_by=list(dict.fromkeys(draft.decided_by))
    )
    return _insert(
        Decision,
        channel,
        key,
        row,
        text=summary,
        sources_text=sources_text,
        source=source,
        friendly_kind="DEC",
        looked_up=True,
    )


def _resting(model: type[models.Model], channel: ChannelConfig, msg_ids: Sequence[str], first_by: str):
    """The channel's records of `model` resting on one of `msg_ids`, earliest (by `first_by`) first."""
    return model.objects.filter(channel=channel, source_ref__wire_msg_ids__has_any_keys=list(msg_ids)).order_by(
        first_by
    )


def _continued(model: type[models.Model], channel: ChannelConfig, msg_ids: Sequence[str], first_by: str):
    """The channel's earliest record of `model` (by `first_by`) resting on one of `msg_ids`, or None."""
    return _resting(model, channel, msg_ids, first_by).first() if msg_ids else None


def continue_decision(channel: ChannelConfig, *, source: dict, continues_ids: Sequence[str]) -> Decision | None:
    """Join the messages of `source` to the earliest decision of the channel resting on one of `continues_ids`
    (more evidence of a decision an earlier run stored: an agreement, an amendment). None when there is none:
    a continuation never makes a decision of its own."""
    existing = _continued(Decision, channel, continues_ids, "decided_at")
    if existing is None:
        return None
    existing.source_ref = merge_source_refs(existing.source_ref, source)
    existing.save(update_fields=["source_ref"])
    return existing


def _insert(
    model: type[models.Model],
    channel: ChannelConfig,
    key: str,
    row: _Draft,
    *,
    text: str,
    sources_text: Sequence[str],
    source: dict,
    friendly_kind: str | None = None,
    looked_up: bool = False,
    **derived: object,
) -> Written:
    """A new row under its natural key (channel, source_key): the draft's columns (guarded), the `derived`
    ones, its organisation, the restatement of `text` and where it comes from, unless one is there.
    get_or_create: a concurrent run that wrote the same key first wins; the friendly id (`friendly_kind`:
    DEC, ACT) is drawn inside the insert's transaction, so a lost race does not use one up. `looked_up`: the
    caller has just found no row under the key, so the insert is tried without reading it again."""
    defaults: dict[str, object] = {
        "organisation_id": channel.organisation_id,
        "restatement": verbatim.restatement(text, sources_text),
        "source_ref": source,
        **{f.name: getattr(row, f.name) for f in fields(row)},
        **derived,
    }
    if friendly_kind is not None:
        defaults["friendly_id"] = lambda: next_friendly_id(channel.channel_id, friendly_kind)
    if not looked_up:
        record, created = model.objects.get_or_create(channel=channel, source_key=key, defaults=defaults)
        return Written(record, created)
    # The caller has just read that no row has the key: get_or_create without its own read first (one round
    # trip fewer a record), the rest as it does it.
    try:
        with transaction.atomic():
            values = {k: v() if callable(v) else v for k, v in defaults.items()}
            return Written(model.objects.create(channel=channel, source_key=key, **values), True)
    except IntegrityError:
        found = model.objects.filter(channel=channel, source_key=key).first()
        if found is None:
            raise
        return Written(found, False)


def decision_fields(
    summary: str, rationale: str | None, tags: Sequence[str] | None, sources_text: Sequence[str]
) -> tuple[str, str | None, list[str]]:
    """(summary, rationale, tags) as record_decision stores them; VerbatimText when one is a copy."""
    return guard_text(summary, sources_text) or "", guard_text(rationale, sources_text), guard_tags(tags, sources_text)


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
    near = nearest(stored, vector, unembedded, DECISION_DEDUP_COSINE)
    by_id = active.in_bulk(near)
    for decision in (by_id[i] for i in near if i in by_id):
        # A changed figure (5 attempts → 3 attempts) is a new decision, not a restatement.
        if _figures(decision.summary) == _figures(summary):
            return decision
    return None


def record_action(
    channel: ChannelConfig,
    draft: ActionDraft,
    *,
    source: dict,
    sources_text: Sequence[str],
    key: str,
    continues_ids: Sequence[str] = (),
    created_at: datetime | None = None,
) -> Written:
    """Insert an action, or update the one it continues (an earlier action resting on one of
    `continues_ids`: a progress or completion message): status, deadline, source_ref."""
    description = guard_text(draft.description, sources_text) or ""
    tags = guard_tags(draft.tags, sources_text)
    status, deadline = draft.status, draft.deadline
    existing = Action.objects.filter(channel=channel, source_key=key).first()
    alone = True
    if existing is None and continues_ids:
        # Of the actions resting on those messages (a request shared out makes several), the owner's own.
        resting = list(_resting(Action, channel, continues_ids, "created_at")[:10])
        mine = [a for a in resting if draft.owner_id and a.owner_id == draft.owner_id]
        existing, alone = (mine or resting or [None])[0], len(resting) == 1
    if existing is not None:
        # Read again from the message it alone was opened on (the offline engine's burst continued in a later
        # run, `pipeline.offline.bursts`): the owner it gives with what came after ("ok, on it") is the better one.
        opened_on = ((existing.source_ref or {}).get("wire_msg_ids") or [None])[0]
        again = alone and opened_on is not None and (source.get("wire_msg_ids") or [])[:1] == [opened_on]
        existing.source_ref = merge_source_refs(existing.source_ref, source)
        changed = ["source_ref"]
        if status == ActionStatus.DONE and existing.status != ActionStatus.DONE:
            existing.status, existing.completed_at = ActionStatus.DONE, said_at(source)
            changed += ["status", "completed_at"]
        if deadline is not None and existing.deadline != deadline:
            existing.deadline, existing.staleness_at = deadline, deadline
            changed += ["deadline", "staleness_at"]
        if draft.owner_id and (not existing.owner_id or again) and draft.owner_id != existing.owner_id:
            existing.owner_id, existing.owner_name = draft.owner_id, draft.owner_name
            changed += ["owner_id", "owner_name"]
        existing.save(update_fields=changed)
        return Written(existing, False)
    created = created_at or timezone.now()
    return _insert(
        Action,
        channel,
        key,
        replace(draft, description=description, tags=tags),
        text=description,
        sources_text=sources_text,
        source=source,
        friendly_kind="ACT",
        looked_up=True,
        completed_at=said_at(source) if status == ActionStatus.DONE else None,
        staleness_at=deadline or created + timedelta(days=settings.JEEVES.staleness_days),
    )


def record_signal(
    channel: ChannelConfig, draft: SignalDraft, *, source: dict, sources_text: Sequence[str], key: str
) -> Written:
    summary = guard_text(draft.summary, sources_text) or ""
    row = replace(
        draft,
        summary=summary,
        participants=list(dict.fromkeys(draft.participants or [])),
        related_entities=draft.related_entities or [],
        tags=guard_tags(draft.tags, sources_text),
    )
    return _insert(ConversationSignal, channel, key, row, text=summary, sources_text=sources_text, source=source)
