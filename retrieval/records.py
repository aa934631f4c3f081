"""Hydration: the candidate keys the paths found become full records, read again inside the scope."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection

from retrieval import paths
from retrieval.fusion import RecordKey
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
    # Relevance to the question being answered (None when hydrated without one).
    similarity: float | None = None
    coverage: float | None = None

    @property
    def key(self) -> RecordKey:
        return (self.type, self.id)

    @property
    def cite_id(self) -> str:
        return self.friendly_id or self.id


_CHANNEL_NAME = "COALESCE((SELECT c.channel_name FROM channel_config c WHERE c.channel_id = {col}), {col})"

# One branch per record type, all with the same columns so hydration is a single UNION ALL: the hit's rank,
# type, id, friendly_id, channel_id, channel name, occurred_at, confidence, text, status, source_ref,
# then typed extras x1, x2 (text), xs (text[]), t1, t2 (timestamptz) whose meaning depends on the type.
# Each branch reads the keys to hydrate from a CTE `hits (t, id, rank)`: a path's own hits when hydration
# is folded into the path's statement (`Hydrator.statement`, retrieval.ask), or a list of keys (`hydrating`,
# `hydrate`).
_QUERIES: dict[str, str] = {
    "decision": """
        SELECT h.rank, 'decision', d.id::text, d.friendly_id, d.channel_id, {chname}, d.decided_at,
               d.confidence::float8, d.summary, d.status, d.source_ref::jsonb, d.rationale::text,
               (SELECT s.friendly_id FROM decisions s WHERE s.id = d.superseded_by)::text, d.decided_by::text[],
               d.valid_until, NULL::timestamptz, {sim_decision}, {cov_d}
        FROM hits h JOIN decisions d ON h.t = 'decision' AND d.id = h.id::uuid WHERE d.status <> 'rejected' AND {scope}
    """,
    "action": """
        SELECT h.rank, 'action', a.id::text, a.friendly_id, a.channel_id, {chname},
               COALESCE((a.source_ref->'timestamp_range'->>'start')::timestamptz, a.created_at),
               a.confidence::float8, a.description, a.status, a.source_ref::jsonb, a.owner_id::text,
               a.owner_name::text, NULL::text[], a.deadline, a.completed_at, {sim_action}, {cov_a}
        FROM hits h JOIN actions a ON h.t = 'action' AND a.id = h.id::uuid WHERE {scope}
    """,
    "signal": """
        SELECT h.rank, 'signal', s.id::text, NULL, s.channel_id, {chname}, s.occurred_at, s.confidence::float8,
               s.summary, s.signal_type, s.source_ref::jsonb, NULL::text, NULL::text, s.participants::text[],
               NULL::timestamptz, NULL::timestamptz, {sim_signal}, {cov_s}
        FROM hits h JOIN conversation_signals s ON h.t = 'signal' AND s.id = h.id::uuid WHERE {scope}
    """,
    "summary": """
        SELECT h.rank, 'summary', m.id::text, NULL, m.scope_id, {chname}, m.period_end, 0.8::float8, m.summary,
               m.granularity,
               jsonb_build_object('timestamp_range', jsonb_build_object('start', m.period_start, 'end', m.period_end)),
               NULL::text, NULL::text, NULL::text[], m.period_start, NULL::timestamptz, {sim_summary}, {cov_m}
        FROM hits h JOIN summaries m ON h.t = 'summary' AND m.id = h.id::uuid WHERE {scope}
    """,
    "entity": """
        SELECT h.rank, 'entity', e.id::text, NULL, e.channel_id, {chname},
               COALESCE(e.last_mentioned, e.first_seen, now()),
               0.7::float8, e.name, e.entity_type, jsonb_build_object('entity', e.id::text),
               (SELECT string_agg(x.line, '; ' ORDER BY x.line) FROM (
                    SELECT DISTINCT s.name || ' ' || replace(r.relationship, '_', ' ') || ' ' || t.name AS line
                    FROM (SELECT r.source_id, r.target_id, r.relationship FROM entity_relationships r
                          WHERE r.source_id = e.id AND {relscope}
                          UNION ALL
                          SELECT r.source_id, r.target_id, r.relationship FROM entity_relationships r
                          WHERE r.target_id = e.id AND r.source_id <> e.id AND {relscope}) r
                    JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
                    WHERE {sscope} AND {tscope}
                    ORDER BY line LIMIT 6) x),
               NULL::text, NULL::text[], NULL::timestamptz, NULL::timestamptz, {sim_entity}, {cov_e}
        FROM hits h JOIN entities e ON h.t = 'entity' AND e.id = h.id::uuid WHERE {scope}
    """,
}


_ALIAS = {"decision": "d", "action": "a", "signal": "s", "summary": "m", "entity": "e"}


def _similarity(kind: str, with_vector: bool) -> str:
    """Cosine similarity of the record's own embedding to the question (NULL without a question vector)."""
    if not with_vector:
        return "NULL::float8"
    return (
        "(SELECT (1 - (x.embedding <=> %(question_vector)s::vector))::float8 FROM embeddings x"
        f" WHERE x.source_type = '{kind}' AND x.source_id = {_ALIAS[kind]}.id)"
    )


def _coverage(kind: str, terms: int) -> str:
    """The share of the question's terms the record's text matches (NULL without terms)."""
    if not terms:
        return "NULL::float8"
    alias = _ALIAS[kind]
    vector = (
        "to_tsvector('english', e.name || ' ' || array_to_string(e.aliases, ' '))"
        if kind == "entity"
        else f"{alias}.search_vector"
    )
    query = [f"websearch_to_tsquery('english', %(term{i})s)" for i in range(terms)]
    hits = " + ".join(f"({vector} @@ {q})::int" for q in query)
    return f"(({hits})::float8 / {paths.counted_terms(query)})"  # as the full-text path counts its terms


@functools.lru_cache(maxsize=128)
def _branches(kinds: tuple[str, ...], personal: bool, with_vector: bool, terms: int) -> str:
    """The hydration branches of `kinds`, as `Hydrator.statement` joins them. A scope's predicates are text naming
    the parameters of `RetrievalScope.params()`, never their values, and differ only between a channel's scope
    and a 1:1's (`personal`): the text is kept per kind of scope, the values are bound on every statement."""
    shape = RetrievalScope(organisation_id="", channel_id="", user_id="", personal=personal)
    return " UNION ALL ".join(f"({_sql(kind, shape, with_vector=with_vector, terms=terms)})" for kind in kinds)


def _sql(kind: str, scope: RetrievalScope, *, with_vector: bool = False, terms: int = 0) -> str:
    alias = _ALIAS[kind]
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
        **{f"sim_{kind}": _similarity(kind, with_vector)},
        **{f"cov_{alias}": _coverage(kind, terms)},
    )


def _record(row: tuple[Any, ...]) -> Record:
    _rank, kind, rid, friendly, channel_id, channel_name, occurred, confidence, text, status, source_ref, *extra = row
    x1, x2, xs, t1, t2, similarity, coverage = extra
    detail: dict[str, Any] = {}
    if kind == "decision":
        detail = {"rationale": x1, "decided_by": xs, "valid_until": t1, "superseded_by": x2}
    elif kind == "action":
        detail = {"owner_id": x1, "owner_name": x2, "deadline": t1, "completed_at": t2}
    elif kind == "signal":
        detail = {"participants": xs or []}
    elif kind == "summary":
        detail = {"period_start": t1, "period_end": occurred}
    elif kind == "entity":
        detail = {"relations": x1 or ""}
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
        similarity=None if similarity is None else float(similarity),
        coverage=None if coverage is None else float(coverage),
    )


class Hydrator:
    """Hydration folded into a statement of keys: `fetch` runs a query (its rows start with type and id, best
    first) with the records read inside the scope in the same round trip, keeps the records and returns the
    keys in the query's order. `hydrate` runs it over a list of keys; it may be called from threads.

    With the question's vector and terms, each record also carries its cosine similarity to the question
    and the share of the terms its text matches: what the answer step judges relevance by.
    """

    def __init__(
        self, scope: RetrievalScope, *, question_vector: Sequence[float] | None = None, terms: Sequence[str] = ()
    ) -> None:
        self.scope = scope
        self.records: dict[RecordKey, Record] = {}
        self._params: dict[str, object] = {**scope.params()}
        self._with_vector = question_vector is not None
        if question_vector is not None:
            self._params["question_vector"] = paths.vector_literal(question_vector)
        self._terms = len(terms)
        for i, term in enumerate(terms):
            self._params[f"term{i}"] = term
        self._lock = threading.Lock()

    def fetch(self, sql: str, params: dict[str, object], kinds: Iterable[str] = tuple(_QUERIES)) -> list[RecordKey]:
        """Run `sql` (a path's hits: rows starting with type and id, best first) with its records hydrated in
        the same statement (a branch per kind in `kinds`); keep the records, return their keys, best first."""
        statement, all_params, generic = self.statement(sql, params, kinds)
        return self.keep(paths._fetch(statement, all_params, generic=generic))

    def statement(
        self, sql: str, params: dict[str, object], kinds: Iterable[str] = tuple(_QUERIES)
    ) -> tuple[str, dict[str, object], bool]:
        """(statement, parameters, generic) of `fetch`: generic, to be prepared and run with its generic plan on
        a pool connection (`paths.configure_session`). The entities' relations are read from each side's own
        index (a `UNION ALL` of the relations an entity is the source of and those it is the target of): with
        `source_id = e.id OR target_id = e.id` the generic plan was 30x slower than a custom one."""
        branches = _branches(tuple(kinds), self.scope.personal, self._with_vector, self._terms)
        # A statement with a WITH list of its own (`paths.Query`) gets the hits' CTE added to that list.
        ctes, select = (f"{sql.ctes}, ", sql.select) if isinstance(sql, paths.Query) else ("", sql)
        recursive = "RECURSIVE " if isinstance(sql, paths.Query) and sql.recursive else ""
        statement = (
            f"WITH {recursive}{ctes}hits AS MATERIALIZED"
            f" (SELECT k.t, k.id, row_number() OVER () AS rank FROM ({select}) k)"
            f" SELECT * FROM ({branches}) hydrated ORDER BY 1"
        )
        return statement, {**params, **self._params}, True

    def keep(self, rows: Iterable[tuple[Any, ...]]) -> list[RecordKey]:
        """Keep the records of a hydrating statement's rows; their keys, best first."""
        records = [_record(row) for row in rows]
        with self._lock:
            for record in records:
                self.records[record.key] = record
        return [r.key for r in records]


_KEYS = "SELECT * FROM unnest(%(hydrate_types)s::text[], %(hydrate_ids)s::text[]) AS k(t, id)"


def hydrating(keys: Iterable[RecordKey], hydrator: Hydrator) -> dict[str, tuple[str, dict[str, object], bool]]:
    """`hydrate` not yet run: per kind of record among `keys`, the (statement, parameters, generic) that reads
    them (rows for `hydrator.keep`)."""
    by_kind: dict[str, list[str]] = {}
    for kind, rid in dict.fromkeys(keys):
        if kind in _QUERIES:
            by_kind.setdefault(kind, []).append(rid)
    return {
        kind: hydrator.statement(_KEYS, {"hydrate_types": [kind] * len(ids), "hydrate_ids": ids}, (kind,))
        for kind, ids in by_kind.items()
    }


def hydrate(
    keys: Iterable[RecordKey],
    scope: RetrievalScope,
    *,
    question_vector: Sequence[float] | None = None,
    terms: Sequence[str] = (),
) -> dict[RecordKey, Record]:
    """The keys' records, each read again inside the scope, in one round trip."""
    wanted = [(kind, rid) for kind, rid in dict.fromkeys(keys) if kind in _QUERIES]
    if not wanted:
        return {}
    hydrator = Hydrator(scope, question_vector=question_vector, terms=terms)
    hydrator.fetch(
        _KEYS,
        {"hydrate_types": [k for k, _ in wanted], "hydrate_ids": [r for _, r in wanted]},
        kinds=dict.fromkeys(k for k, _ in wanted),
    )
    return hydrator.records


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
