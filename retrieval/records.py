"""Hydration: the candidate keys the paths found become full records, read again inside the scope."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection

from retrieval.fusion import RecordKey, RecordMeta
from retrieval.scope import RetrievalScope


@dataclass(frozen=True)
class Record:
    type: str  # decision | action | signal | entity | summary
    id: str
    friendly_id: str | None
    channel_id: str
    channel_name: str
    occurred_at: datetime
    confidence: float
    text: str
    status: str | None
    source_ref: dict[str, Any]
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> RecordKey:
        return (self.type, self.id)

    @property
    def cite_id(self) -> str:
        return self.friendly_id or self.id

    @property
    def meta(self) -> RecordMeta:
        return RecordMeta(occurred_at=self.occurred_at, confidence=self.confidence)


_CHANNEL_NAME = "COALESCE((SELECT c.channel_name FROM channel_config c WHERE c.channel_id = {col}), {col})"

_QUERIES: dict[str, str] = {
    "decision": """
        SELECT d.id::text, d.friendly_id, d.channel_id, {chname}, d.decided_at, d.confidence, d.summary, d.status,
               d.source_ref, d.rationale, d.decided_by, d.valid_until,
               (SELECT s.friendly_id FROM decisions s WHERE s.id = d.superseded_by)
        FROM decisions d WHERE d.id = ANY(%(ids)s::uuid[]) AND d.status <> 'rejected' AND {scope}
    """,
    "action": """
        SELECT a.id::text, a.friendly_id, a.channel_id, {chname},
               COALESCE((a.source_ref->'timestamp_range'->>'start')::timestamptz, a.created_at),
               a.confidence, a.description, a.status, a.source_ref, a.owner_id, a.owner_name, a.deadline,
               a.completed_at
        FROM actions a WHERE a.id = ANY(%(ids)s::uuid[]) AND {scope}
    """,
    "signal": """
        SELECT s.id::text, NULL, s.channel_id, {chname}, s.occurred_at, s.confidence, s.summary, s.signal_type,
               s.source_ref
        FROM conversation_signals s WHERE s.id = ANY(%(ids)s::uuid[]) AND {scope}
    """,
    "summary": """
        SELECT m.id::text, NULL, m.scope_id, {chname}, m.period_end, 0.8, m.summary, m.granularity,
               jsonb_build_object('timestamp_range', jsonb_build_object('start', m.period_start, 'end', m.period_end)),
               m.period_start
        FROM summaries m WHERE m.id = ANY(%(ids)s::uuid[]) AND {scope}
    """,
    "entity": """
        SELECT e.id::text, NULL, e.channel_id, {chname}, COALESCE(e.last_mentioned, e.first_seen, now()),
               0.7, e.name, e.entity_type, jsonb_build_object('entity', e.id::text),
               (SELECT string_agg(x.line, '; ' ORDER BY x.line) FROM (
                    SELECT DISTINCT s.name || ' ' || replace(r.relationship, '_', ' ') || ' ' || t.name AS line
                    FROM entity_relationships r
                    JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
                    WHERE (r.source_id = e.id OR r.target_id = e.id) AND {relscope}
                      AND {sscope} AND {tscope}
                    LIMIT 6) x)
        FROM entities e WHERE e.id = ANY(%(ids)s::uuid[]) AND {scope}
    """,
}


def _sql(kind: str, scope: RetrievalScope) -> str:
    alias = {"decision": "d", "action": "a", "signal": "s", "summary": "m", "entity": "e"}[kind]
    col = "m.scope_id" if kind == "summary" else f"{alias}.channel_id"
    predicate = {
        "decision": scope.decisions,
        "action": scope.actions,
        "signal": scope.signals,
        "summary": scope.summaries,
        "entity": scope.entities,
    }[kind](alias)
    return _QUERIES[kind].format(
        chname=_CHANNEL_NAME.format(col=col),
        scope=predicate,
        relscope=scope.relationships("r"),
        sscope=scope.entities("s"),
        tscope=scope.entities("t"),
    )


def _record(kind: str, row: tuple[Any, ...]) -> Record:
    rid, friendly, channel_id, channel_name, occurred, confidence, text, status, source_ref, *rest = row
    detail: dict[str, Any] = {}
    if kind == "decision":
        detail = {"rationale": rest[0], "decided_by": rest[1], "valid_until": rest[2], "superseded_by": rest[3]}
    elif kind == "action":
        detail = {"owner_id": rest[0], "owner_name": rest[1], "deadline": rest[2], "completed_at": rest[3]}
    elif kind == "summary":
        detail = {"period_start": rest[0], "period_end": occurred}
    elif kind == "entity":
        detail = {"relations": rest[0] or ""}
    return Record(
        type=kind,
        id=rid,
        friendly_id=friendly,
        channel_id=channel_id,
        channel_name=channel_name,
        occurred_at=occurred,
        confidence=float(confidence if confidence is not None else 0.6),
        text=text,
        status=status,
        # Django's cursor hands jsonb back as text (its JSONField decodes it); decode it here likewise.
        source_ref=json.loads(source_ref) if isinstance(source_ref, str) else (source_ref or {}),
        detail=detail,
    )


def hydrate(keys: Iterable[RecordKey], scope: RetrievalScope) -> dict[RecordKey, Record]:
    by_kind: dict[str, list[str]] = {}
    for kind, rid in keys:
        by_kind.setdefault(kind, []).append(rid)
    records: dict[RecordKey, Record] = {}
    with connection.cursor() as cur:
        for kind, ids in by_kind.items():
            if kind not in _QUERIES:
                continue
            cur.execute(_sql(kind, scope), {**scope.params(), "ids": list(dict.fromkeys(ids))})
            for row in cur.fetchall():
                record = _record(kind, row)
                records[record.key] = record
    return records


def contradicting_pairs(
    decisions: list[Record], scope: RetrievalScope, threshold: float
) -> list[tuple[Record, Record]]:
    """Pairs (newer, older) of cited decisions, both still in force in one channel, whose vectors are
    as close as the contradiction check's threshold, or that a reviewer marked as questioned."""
    live = [d for d in decisions if d.status in ("active", "questioned")]
    if len(live) < 2:
        return []
    by_id = {d.id: d for d in live}
    with connection.cursor() as cur:
        cur.execute(
            f"""
            SELECT a.source_id::text, b.source_id::text
            FROM embeddings a JOIN embeddings b ON a.source_id < b.source_id
            WHERE a.source_type = 'decision' AND b.source_type = 'decision'
              AND a.source_id = ANY(%(ids)s::uuid[]) AND b.source_id = ANY(%(ids)s::uuid[])
              AND {scope.embeddings("a")} AND {scope.embeddings("b")}
              AND a.channel_id = b.channel_id
              AND 1 - (a.embedding <=> b.embedding) >= %(threshold)s
            """,
            {**scope.params(), "ids": list(by_id), "threshold": threshold},
        )
        rows = cur.fetchall()
    pairs = []
    for left, right in rows:
        first, second = sorted((by_id[left], by_id[right]), key=lambda d: d.occurred_at)
        pairs.append((second, first))
    return pairs
