"""The five retrieval paths. Each runs one scoped SQL statement (scope inside the WHERE) and returns keys, best first.

Each path hands its statement to `fetch`: by default `keys` runs it and returns the keys (the question path
then reads all paths' records at once, `records.hydrate`); `records.Hydrator.fetch` would read a path's records
(inside the scope again) in the same statement.

structured: decisions/actions by friendly id, owner, status, type, date range, tag;
semantic: pgvector HNSW cosine over `embeddings` (iterative index scan, so a small channel still gets k);
fulltext: `websearch_to_tsquery` over the synthesised text; graph: BFS over entity_relationships (≤ 3 hops);
summary: summaries overlapping the time range (or matching the words when there is none).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import psycopg
from django.db import connection, transaction

from retrieval.config import RetrievalConfig
from retrieval.fusion import RecordKey
from retrieval.plan import QueryPlan
from retrieval.scope import RetrievalScope

logger = logging.getLogger(__name__)


def _fetch(sql: str, params: dict[str, object], *, generic: bool = False) -> list[tuple]:
    """The statement's rows. `generic`, on a retrieval pool connection: a server-side prepared statement run
    with its generic plan (planned once per connection); elsewhere, or without it, planned on every run."""
    if generic and _session_configured():
        with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cur:
            cur.execute(sql, params, prepare=True)
            return cur.fetchall()
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def keys(sql: str, params: dict[str, object], kinds: Iterable[str] = ()) -> list[RecordKey]:
    """The keys of a path's statement (its rows start with type and id), best first."""
    return [(row[0], row[1]) for row in _fetch(sql, params)]


def generic_keys(sql: str, params: dict[str, object], kinds: Iterable[str] = ()) -> list[RecordKey]:
    """`keys`, the statement prepared and run with its generic plan (see `configure_session`)."""
    return [(row[0], row[1]) for row in _fetch(sql, params, generic=True)]


Fetch = Callable[..., list[RecordKey]]  # (sql, params, kinds) -> keys: `keys`, or records.Hydrator.fetch


class Query(str):
    """A statement with a WITH list: its text, and its parts for a caller that wraps it (`records.Hydrator`
    adds its own CTE to the same list and reads the hits of `select`, instead of nesting the whole statement)."""

    ctes: str
    select: str
    recursive: bool

    def __new__(cls, ctes: str, select: str, *, recursive: bool = False) -> Query:
        query = super().__new__(cls, f"WITH {'RECURSIVE ' if recursive else ''}{ctes} {select}")
        query.ctes, query.select, query.recursive = ctes, select, recursive
        return query


# --------------------------------------------------------------------------- structured

_ACTION_TIME = "COALESCE((a.source_ref->'timestamp_range'->>'start')::timestamptz, a.created_at)"


@dataclass(frozen=True)
class _Listed:
    """A record table as the structured path filters it: the column that dates a record, what an owner filter and
    a time range test, and what it always leaves out."""

    kind: str
    table: str
    alias: str
    at: str
    owned: str
    during: str
    always: tuple[str, ...] = ()
    has_status: bool = True


_DECISIONS = _Listed(
    "decision",
    "decisions",
    "d",
    at="d.decided_at",
    owned="d.decided_by && %(owners)s::text[]",
    during="(%(start)s::timestamptz IS NULL OR d.decided_at >= %(start)s OR d.valid_until >= %(start)s)"
    " AND (%(end)s::timestamptz IS NULL OR d.decided_at < %(end)s)",
    always=("d.status <> 'rejected'",),
)
_ACTIONS = _Listed(
    "action",
    "actions",
    "a",
    at=_ACTION_TIME,
    owned="a.owner_id = ANY(%(owners)s)",
    during=f"(%(start)s::timestamptz IS NULL OR {_ACTION_TIME} >= %(start)s OR a.deadline >= %(start)s"
    " OR a.completed_at >= %(start)s)"
    f" AND (%(end)s::timestamptz IS NULL OR {_ACTION_TIME} < %(end)s)",
)

# Of signals, a plan lists only blockers ("is anything blocked?", `plan.offline_plan`); one raised by a person is
# theirs.
_BLOCKERS = _Listed(
    "signal",
    "conversation_signals",
    "s",
    at="s.occurred_at",
    owned="s.participants && %(owners)s::text[]",
    during="(%(start)s::timestamptz IS NULL OR s.occurred_at >= %(start)s)"
    " AND (%(end)s::timestamptz IS NULL OR s.occurred_at < %(end)s)",
    always=("s.signal_type = 'blocker'",),
    has_status=False,
)


def _listed(table: _Listed, scoped: str, plan: QueryPlan, *, by_tags: bool) -> str:
    """One table's newest records in scope that pass the plan's filters (or, with none, carry one of its tags)."""
    a = table.alias
    cond = [scoped, *table.always]
    if plan.friendly_ids:
        cond.append(f"{a}.friendly_id = ANY(%(friendly)s)")
    if plan.owner_ids:
        cond.append(table.owned)
    if plan.statuses and table.has_status:
        cond.append(f"{a}.status = ANY(%(statuses)s)")
    if plan.time_range:
        cond.append(table.during)
    if by_tags:
        cond.append(f"{a}.tags && %(kws)s::text[]")
    return (
        f"(SELECT '{table.kind}' AS t, {a}.id::text AS id, ({a}.tags && %(kws)s::text[]) AS tagged, {table.at} AS at"
        f" FROM {table.table} {a} WHERE {' AND '.join(cond)} ORDER BY {table.at} DESC LIMIT %(k)s)"
    )


LISTED = 100  # the structured path's hits for a list question (retrieval.ask), not the ten of a search


def structured(
    plan: QueryPlan, scope: RetrievalScope, cfg: RetrievalConfig, fetch: Fetch = generic_keys
) -> list[RecordKey]:
    """Filters, not words: runs only when the plan names an id, an owner, a status, a type, a date or a tag."""
    params: dict[str, object] = {
        **scope.params(),
        "friendly": plan.friendly_ids,
        "owners": plan.owner_ids,
        "statuses": plan.statuses,
        "kws": [k.lower() for k in plan.keywords],
        "start": plan.time_range.start if plan.time_range else None,
        "end": plan.time_range.end if plan.time_range else None,
        # A list answer ("what is Priya working on?") counts what the filters find: all of it, within reason.
        "k": LISTED if plan.response_format == "list" else cfg.k["structured"],
    }
    has_filter = bool(plan.friendly_ids or plan.owner_ids or plan.statuses or plan.record_types or plan.time_range)
    if not has_filter and not plan.keywords:
        return []
    want = set(plan.record_types) or {"decision", "action"}
    if plan.friendly_ids:
        want = {"decision" if f.startswith("DEC-") else "action" for f in plan.friendly_ids}
    parts: list[str] = []
    if "decision" in want:
        parts.append(_listed(_DECISIONS, scope.decisions("d"), plan, by_tags=not has_filter))
    if "action" in want:
        parts.append(_listed(_ACTIONS, scope.actions("a"), plan, by_tags=not has_filter))
    if "signal" in want:
        parts.append(_listed(_BLOCKERS, scope.signals("s"), plan, by_tags=not has_filter))
    sql = f"SELECT t, id, tagged, at FROM ({' UNION ALL '.join(parts)}) x ORDER BY tagged DESC, at DESC LIMIT %(k)s"
    return fetch(sql, params, want)


# --------------------------------------------------------------------------- semantic

# The embeddings the semantic path searches (not message vectors). The partial covering index
# `embeddings_scope_cover_idx` (knowledge/migrations/0003) is built on this predicate, and the planner uses
# it only when this implies it: change both together (tests/retrieval/test_paths.py checks the plan).
SEARCHED_KINDS = "e.source_id IS NOT NULL AND e.source_type IN ('decision', 'action', 'signal', 'summary', 'entity')"


_configured = threading.local()


def hnsw_settings(cfg: RetrievalConfig, *, local: bool) -> tuple[str, dict[str, str]]:
    """The settings the iterative HNSW scan needs: for the transaction (`local`) or the connection's session.

    relaxed_order: the index keeps scanning past rows the scope filters out (pgvector >= 0.8).
    """
    sql = (
        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', %(local)s),"
        " set_config('hnsw.ef_search', %(ef)s, %(local)s), set_config('hnsw.max_scan_tuples', %(max_scan)s, %(local)s)"
    )
    return sql, {"local": local, "ef": str(int(cfg.hnsw_ef_search)), "max_scan": str(int(cfg.hnsw_max_scan_tuples))}


# Statements whose generic plan was checked to keep the custom plans' shape (the same indexes, no slower):
# the structured, graph and summary paths and the hydration of every kind. A custom plan of each
# costs 0.1-1 ms to make at 100k (as much as running the small ones; more on a loaded machine). The full-text
# path too, since its rows are matched against the words' CTE (`_Words`): for a scope of at most
# `scope_first_max_rows` rows per table (read first, see `_scope_first`) faster than a custom plan (p50 1.4
# against 2.3 ms at 100k, 1.6 against 3.7 at 1M); for a larger scope its generic plan cannot start from the
# scope's btree index when the words are common, as a custom plan can (measured by forcing that branch: 5.5
# against 4.0 ms at 100k, 2.3 against 3.3 at 1M). Not the semantic path (a generic plan is made for an average
# scope and sorts it exactly; a large channel would lose the HNSW walk a custom plan can choose).
_PREPARE_NEVER_BY_COUNT = 2**31 - 1  # psycopg prepares only the statements run with prepare=True


def configure_session(cfg: RetrievalConfig) -> None:
    """Give this thread's connection the HNSW settings for its session (a connection only retrieval uses),
    and generic plans for its prepared statements (`generic_keys`; `plan_cache_mode` touches no other)."""
    raw = connection.connection
    if raw is not None and getattr(_configured, "raw", None) is raw:
        return
    sql, params = hnsw_settings(cfg, local=False)
    _fetch(sql + ", set_config('plan_cache_mode', 'force_generic_plan', false)", params)
    connection.connection.prepare_threshold = _PREPARE_NEVER_BY_COUNT
    _configured.raw = connection.connection


def _session_configured() -> bool:
    raw = connection.connection
    return raw is not None and getattr(_configured, "raw", None) is raw


def semantic(
    plan: QueryPlan,
    scope: RetrievalScope,
    cfg: RetrievalConfig,
    query_vector: Sequence[float] | None,
    fetch: Fetch = keys,
) -> list[RecordKey]:
    """Nearest records by cosine, scope in the same query.

    A scope holding at most `cfg.exact_scan_max_rows` embeddings (a channel, a person's own records) is
    scanned exactly through its btree index (a channel: an index-only scan of `embeddings_scope_cover_idx`,
    which carries the vectors): faster than walking the org-wide HNSW graph for a filter that passes one
    row in a thousand, and never short of k. A larger scope walks the HNSW index with
    an iterative scan, which keeps going until k rows pass the scope.
    """
    statement = semantic_statement(plan, scope, cfg, query_vector)
    if statement is None:
        return []
    sql, params = statement
    if _session_configured():
        return fetch(sql, params)
    if connection.in_atomic_block:  # the caller's transaction: the settings last until it ends
        _fetch(*hnsw_settings(cfg, local=True))
        return fetch(sql, params)
    with transaction.atomic():
        _fetch(*hnsw_settings(cfg, local=True))
        return fetch(sql, params)


def vector_literal(vector: Sequence[float]) -> str:
    """A vector as pgvector's text form, six decimals; the last one made is kept (a question's vector is written
    for its semantic statement and again for the similarity of every record read)."""
    global _last_literal
    key, last = tuple(vector), _last_literal
    if last is not None and last[0] == key:
        return last[1]
    literal = "[" + ",".join(f"{x:.6f}" for x in key) + "]"
    _last_literal = (key, literal)
    return literal


_last_literal: tuple[tuple[float, ...], str] | None = None


def semantic_statement(
    plan: QueryPlan, scope: RetrievalScope, cfg: RetrievalConfig, query_vector: Sequence[float] | None
) -> tuple[str, dict[str, object]] | None:
    """The semantic path's statement and parameters (None without a question vector); see `semantic`. It needs the
    HNSW settings (`hnsw_settings`) for its session or its transaction."""
    if query_vector is None:
        return None
    params = {
        **scope.params(),
        "q": vector_literal(query_vector),
        "k": cfg.k["semantic"],
        "min_sim": cfg.min_similarity,
        "cap": cfg.exact_scan_max_rows + 1,
    }
    where = f"{scope.embeddings('e')} AND {SEARCHED_KINDS}"
    # One statement, two branches gated by the scope's size (a constant of the statement, so only one runs):
    # the scope's rows read through the btree (at most cap of them; MATERIALIZED so the HNSW index is not
    # used), which ARE the exact answer when there are no more than the threshold; else the iterative HNSW
    # scan (relaxed order, so re-sorted by distance).
    sql = f"""
        WITH scoped AS MATERIALIZED (
            SELECT e.source_type, e.source_id, e.embedding <=> %(q)s::vector AS dist FROM embeddings e
            WHERE {where} LIMIT %(cap)s
        )
        (SELECT source_type AS t, source_id::text AS id FROM scoped
         WHERE (SELECT count(*) FROM scoped) < %(cap)s AND 1 - dist >= %(min_sim)s ORDER BY dist LIMIT %(k)s)
        UNION ALL
        (SELECT t, id FROM (
            SELECT e.source_type AS t, e.source_id::text AS id, e.embedding <=> %(q)s::vector AS dist
            FROM embeddings e WHERE {where} AND (SELECT count(*) FROM scoped) >= %(cap)s
            ORDER BY e.embedding <=> %(q)s::vector LIMIT %(k)s
         ) nearest WHERE 1 - dist >= %(min_sim)s ORDER BY dist)
    """
    return sql, params


# --------------------------------------------------------------------------- full text


def counted_terms(queries: Sequence[str]) -> str:
    """SQL for how many of the tsquery expressions `queries` hold a word text search keeps (at least 1): a stop
    word alone ("some", "own") matches nothing, so it is no term a record could cover."""
    return "greatest(" + " + ".join(f"(numnode({q}) > 0)::int" for q in queries) + ", 1)::float"


class _Words:
    """The question's words as tsqueries (one bound parameter each).

    Coverage (the share of the words a record matches) is a sum of boolean matches per row, with no subquery
    per row. A word that is all stop words counts for nothing. A statement with several tables (the full-text
    path) computes the per-word queries once, in the one-row CTE `q` (`cte`, `coverage_q`, `rank_q`), and
    matches rows against `q.any_words`: the same values, a statement a quarter the size to send, parse and
    plan, and one that can be prepared with a generic plan (`paths.configure_session`): a match written as
    `websearch_to_tsquery(parameter)` would run the function on every row of a generic plan. `any`,
    `coverage`: the same as constants of the statement, for the summary path's single table.
    """

    def __init__(self, keywords: Sequence[str], params: dict[str, object]) -> None:
        self.terms: list[str] = []
        for i, kw in enumerate(keywords):
            params[f"kw{i}"] = kw
            self.terms.append(f"websearch_to_tsquery('english', %(kw{i})s)")
        params["any_words"] = " or ".join(keywords)
        self.any = "websearch_to_tsquery('english', %(any_words)s)"
        self._n = counted_terms(self.terms)

    def coverage(self, col: str) -> str:
        return "((" + " + ".join(f"({col} @@ {t})::int" for t in self.terms) + f") / {self._n})"

    def cte(self) -> str:
        terms = "".join(f", {t} AS t{i}" for i, t in enumerate(self.terms))
        return f"q AS MATERIALIZED (SELECT {self.any} AS any_words{terms}, {self._n} AS n)"

    def coverage_q(self, col: str) -> str:
        return "((" + " + ".join(f"({col} @@ q.t{i})::int" for i in range(len(self.terms))) + ") / q.n)"

    def rank_q(self, col: str) -> str:
        return f"ts_rank_cd({col}, q.any_words)"


def _scope_first(
    name: str, table: str, alias: str, predicate: str, match: str, select: str, order: str, join: str = ""
) -> tuple[str, str]:
    """(CTE, branch) for a text match inside the scope, in one statement, scope rows first.

    A scope is a channel or one person's records, so usually a few thousand rows at most: reading them
    through the scope's btree index and testing the match on each beats intersecting with a GIN scan
    of the whole table (a common word matches a tenth of it), which the planner prefers because it
    cannot see that cost. The CTE reads at most `scope_cap` scope rows; when the scope is larger, the
    second half of the branch runs instead (the planner's own plan: scope and GIN together). The two
    halves are gated by the count, a constant of the statement, so only one of them executes.
    `join` adds FROM items to both halves (", q": the words' CTE).
    """
    cte = (
        f"{name} AS MATERIALIZED (SELECT {alias}.id, {alias}.search_vector FROM {table} {alias}"
        f" WHERE {predicate} LIMIT %(scope_cap)s)"
    )
    branch = (
        f"(SELECT {select} FROM {name} {alias}{join} WHERE {match}"
        f" AND (SELECT count(*) FROM {name}) < %(scope_cap)s ORDER BY {order} LIMIT %(k)s)"
        " UNION ALL "
        f"(SELECT {select} FROM {table} {alias}{join} WHERE {predicate} AND {match}"
        f" AND (SELECT count(*) FROM {name}) >= %(scope_cap)s ORDER BY {order} LIMIT %(k)s)"
    )
    return cte, branch


def fulltext(plan: QueryPlan, scope: RetrievalScope, cfg: RetrievalConfig, fetch: Fetch = keys) -> list[RecordKey]:
    """Any of the question's words (OR), ranked by how many of them a record covers, then ts_rank_cd."""
    if not plan.keywords:
        return []
    params: dict[str, object] = {
        **scope.params(),
        "k": cfg.k["fulltext"],
        "min_cov": cfg.min_term_coverage,
        "scope_cap": cfg.scope_first_max_rows + 1,
    }
    words = _Words(plan.keywords, params)
    ctes, branches = [words.cte()], []
    for kind, table, alias, predicate in (
        ("decision", "decisions", "d", scope.decisions("d") + " AND d.status <> 'rejected'"),
        ("action", "actions", "a", scope.actions("a")),
        ("signal", "conversation_signals", "s", scope.signals("s")),
        ("summary", "summaries", "m", scope.summaries("m")),
    ):
        col = f"{alias}.search_vector"
        cte, branch = _scope_first(
            f"scoped_{kind}",
            table,
            alias,
            predicate,
            match=f"{col} @@ q.any_words",
            select=f"'{kind}' AS t, {alias}.id::text AS id, {words.coverage_q(col)} AS cov,"
            f" {words.rank_q(col)} AS rank",
            order="cov DESC, rank DESC",
            join=", q",
        )
        ctes.append(cte)
        branches.append(branch)
    sql = Query(
        ", ".join(ctes),
        f"SELECT t, id FROM ({' UNION ALL '.join(branches)}) hits"
        " WHERE cov >= %(min_cov)s ORDER BY cov DESC, rank DESC LIMIT %(k)s",
    )
    return fetch(sql, params, ("decision", "action", "signal", "summary"))


# --------------------------------------------------------------------------- graph


def graph(plan: QueryPlan, scope: RetrievalScope, cfg: RetrievalConfig, fetch: Fetch = generic_keys) -> list[RecordKey]:
    """BFS from the plan's entities over relationships (every hop stays in scope), nearest first.

    Returns the entities reached, and after them the records that name a reached neighbour, so
    "what blocks X" finds the records about whatever blocks X. One statement: the walk, then the records.
    """
    if not plan.entities:
        return []
    params = {
        **scope.params(),
        "names": [n.lower() for n in plan.entities],
        "depth": cfg.graph_depth,
        "k": cfg.k["graph"],
        "scope_cap": cfg.scope_first_max_rows + 1,
    }
    # The neighbours' names as one OR query; records are read scope rows first (see _scope_first).
    q = "nq.q"
    ctes, branches = [], []
    for kind, table, alias, predicate in (
        ("decision", "decisions", "d", scope.decisions("d") + " AND d.status <> 'rejected'"),
        ("action", "actions", "a", scope.actions("a")),
    ):
        cte, branch = _scope_first(
            f"scoped_{kind}",
            table,
            alias,
            predicate,
            match=f"{alias}.search_vector @@ {q}",
            select=f"'{kind}' AS t, {alias}.id::text AS id, ts_rank_cd({alias}.search_vector, {q}) AS rank",
            order="rank DESC",
            join=", nq",
        )
        ctes.append(cte)
        branches.append(branch)
    # The scope's relationships, each way, to an entity in scope: read once, not on every hop.
    walk = f"""edges AS MATERIALIZED (
            SELECT x.a, x.b FROM (
                SELECT r.source_id AS a, r.target_id AS b FROM entity_relationships r WHERE {scope.relationships("r")}
                UNION ALL
                SELECT r.target_id, r.source_id FROM entity_relationships r WHERE {scope.relationships("r")}
            ) x JOIN entities n ON n.id = x.b WHERE {scope.entities("n")}
        ),
        walk(id, depth) AS (
            SELECT e.id, 0 FROM entities e
            WHERE {scope.entities("e")}
              AND (lower(e.name) = ANY(%(names)s) OR EXISTS (
                   SELECT 1 FROM unnest(e.aliases) al WHERE lower(al) = ANY(%(names)s)))
          UNION
            SELECT x.b, w.depth + 1 FROM walk w JOIN edges x ON x.a = w.id WHERE w.depth < %(depth)s
        ),
        reached AS MATERIALIZED (
            SELECT e.id, e.name, min(w.depth) AS depth
            FROM walk w JOIN entities e ON e.id = w.id
            WHERE {scope.entities("e")}
            GROUP BY e.id, e.name ORDER BY depth, e.name LIMIT %(k)s
        ),
        nq AS MATERIALIZED (
            SELECT websearch_to_tsquery('english', string_agg('"' || name || '"', ' or ' ORDER BY depth, name)) AS q
            FROM reached WHERE depth > 0 HAVING count(*) > 0
        )"""
    select = f"""
        SELECT t, id FROM (
            (SELECT 'entity' AS t, id::text AS id, 0 AS part, row_number() OVER (ORDER BY depth, name) AS pos
             FROM reached)
            UNION ALL
            (SELECT t, id, 1, row_number() OVER (ORDER BY rank DESC) FROM (
                SELECT t, id, rank FROM ({" UNION ALL ".join(branches)}) x ORDER BY rank DESC LIMIT %(k)s) named)
        ) walked ORDER BY part, pos
    """
    sql = Query(", ".join([walk, *ctes]), select, recursive=True)
    return fetch(sql, params, ("entity", "decision", "action"))


# --------------------------------------------------------------------------- summary


def summary(
    plan: QueryPlan, scope: RetrievalScope, cfg: RetrievalConfig, fetch: Fetch = generic_keys
) -> list[RecordKey]:
    """Rolling summaries overlapping the plan's time range, most overlapping first; else those on topic."""
    params: dict[str, object] = {**scope.params(), "k": cfg.k["summary"], "kws": plan.keywords}
    if plan.time_range is not None:
        params.update(start=plan.time_range.start, end=plan.time_range.end)
        sql = f"""
            SELECT 'summary' AS t, m.id::text AS id FROM summaries m
            WHERE {scope.summaries("m")}
              AND (%(end)s::timestamptz IS NULL OR m.period_start < %(end)s)
              AND (%(start)s::timestamptz IS NULL OR m.period_end > %(start)s)
            ORDER BY (m.granularity = 'daily') DESC, m.period_end DESC LIMIT %(k)s
        """
    elif plan.keywords:
        params["min_cov"] = cfg.min_term_coverage
        words = _Words(plan.keywords, params)
        sql = f"""
            SELECT 'summary' AS t, m.id::text AS id FROM summaries m
            WHERE {scope.summaries("m")} AND m.search_vector @@ {words.any}
              AND {words.coverage("m.search_vector")} >= %(min_cov)s
            ORDER BY m.period_end DESC LIMIT %(k)s
        """
    else:
        return []
    return fetch(sql, params, ("summary",))
