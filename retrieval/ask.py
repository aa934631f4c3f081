"""The question path: plan → five scoped paths → fusion → context pack → answer, with timings.

`retrieve` is the search alone (no answer model), used by the answer path and by bench/retrieval_speed.py;
`ask` is what `@Jeeves <question>`, `jeeves ask` and `jeeves eval --answers` call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.utils import timezone

from ground import metrics
from knowledge.channels import channel_zone
from retrieval import answer as answers
from retrieval import parallel, paths, relevance
from retrieval.config import RetrievalConfig
from retrieval.fusion import Fused, RecordKey, fuse
from retrieval.pack import build_pack
from retrieval.plan import OfflinePlanRow, PlanContext, QueryPlan, analyse
from retrieval.records import Hydrator, Record, contradicting_pairs, hydrating
from retrieval.scope import RetrievalScope, UnknownChannel

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CitedRecord:
    id: str
    type: str
    channel_id: str
    paths: list[str]
    score: float
    source_ref: dict[str, Any]


@dataclass
class AskResult:
    answer: str
    records: list[CitedRecord] = field(default_factory=list)
    tokens: int = 0
    timings_ms: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Retrieval:
    plan: QueryPlan
    fused: list[Fused]
    records: dict[RecordKey, Record]
    path_hits: dict[str, list[RecordKey]]
    timings_ms: dict[str, float]
    # The paths' round trip (each path that ran: they share it) and the hydration's, for the bench and metrics.
    path_ms: dict[str, float] = field(default_factory=dict)
    # Each candidate's features and probability of answering the question (retrieval.relevance).
    features: dict[RecordKey, list[float]] = field(default_factory=dict)
    scores: dict[RecordKey, float] = field(default_factory=dict)

    def ranked(self) -> list[Record]:
        return [self.records[f.key] for f in self.fused]


def plan_context(scope: RetrievalScope, now: datetime) -> PlanContext:
    """Names the planner may match in the question: entities and people of the scope (one round trip)."""
    with connection.cursor() as cur:
        cur.execute(
            f"""
            (SELECT 'entity', e.mention_count, e.name, e.aliases FROM entities e WHERE {scope.entities("e")}
             ORDER BY e.mention_count DESC LIMIT 2000)
            UNION ALL
            (SELECT DISTINCT 'member', 0, a.owner_name, ARRAY[a.owner_id] FROM actions a WHERE {scope.actions("a")}
             AND a.owner_id IS NOT NULL AND a.owner_name IS NOT NULL LIMIT 500)
            """,
            scope.params(),
        )
        rows = cur.fetchall()
    entity_names: dict[str, str] = {}
    members: dict[str, str] = {}
    # Most mentioned first, so a surface form two entities share names the busier one.
    for kind, _count, name, extra in sorted(rows, key=lambda r: (r[0], -r[1])):
        if kind == "entity":
            for surface in [name, *(extra or [])]:
                entity_names.setdefault(surface.lower(), name)
        else:
            _name_member(members, name, extra[0])
    if not scope.personal:  # the channel's members name people with no record yet ("what is Ana doing?")
        for member in _channel_members(scope.channel_id):
            if member.name:
                _name_member(members, member.name, member.user_id)
            if member.handle:
                members.setdefault(member.handle.lower(), member.user_id)
    return PlanContext(now=now, asker_id=scope.user_id, entity_names=entity_names, members=members)


def _name_member(members: dict[str, str], name: str, user_id: str) -> None:
    members.setdefault(name.lower(), user_id)
    members.setdefault(name.split()[0].lower(), user_id)


def _channel_members(channel_id: str) -> list:
    """The channel's member cache (Redis): names make answers kinder; without the cache Jeeves still answers,
    naming people from the records alone."""
    from redis.exceptions import RedisError

    from pipeline import members

    try:
        return members.all_members(channel_id)
    except RedisError as exc:
        logger.warning("ask: member cache unavailable (%s); people named from records only", type(exc).__name__)
        return []


_contexts: dict[RetrievalScope, tuple[float, PlanContext]] = {}
_contexts_lock = threading.Lock()
_CONTEXTS_MAX = 256


def cached_plan_context(scope: RetrievalScope, now: datetime, ttl_s: float) -> PlanContext:
    """`plan_context`, kept per scope for `ttl_s` seconds: a conversation asks several questions in a row, and
    the names only steer the search (a name learnt in the last seconds is missed, never a record shown). A
    channel's names are the same for every asker there (its scope predicates do not name the user), so they
    are kept per channel; a 1:1's per asker."""
    if ttl_s <= 0:
        return plan_context(scope, now)
    key = scope if scope.personal else replace(scope, user_id="")
    with _contexts_lock:
        cached = _contexts.get(key)
    if cached is not None and time.monotonic() - cached[0] < ttl_s:
        return replace(cached[1], now=now, asker_id=scope.user_id)
    ctx = plan_context(scope, now)
    with _contexts_lock:
        if len(_contexts) >= _CONTEXTS_MAX:
            _contexts.clear()
        _contexts[key] = (time.monotonic(), ctx)
    return ctx


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 2)


def _query_vector(question: str) -> list[float] | None:
    from pipeline import embedder

    if not embedder.enabled():
        return None
    try:
        return embedder.embed([question])[0]
    except Exception as exc:  # the semantic path is one of five: the others still answer
        logger.warning("query embedding failed (%s); semantic path skipped", type(exc).__name__)
        return None


class _Search:
    """The planned paths and the hydration of what they find, in a few pipelines side by side.

    The paths' statements and the offline plan's accounting row are split into `RetrievalConfig.path_pipelines`
    groups of about the same cost, each sent to the server on a pool connection of its own in one round trip
    (psycopg pipeline mode: the server runs a group's statements one after another without waiting for the
    client). The statements with a generic plan (all paths but the semantic one) read their hits' records,
    inside the scope again, in the same statement (`records.Hydrator.statement`: the hits are a CTE of the
    statement), so their group needs no second round trip; the semantic statement, planned for its scope every
    time, returns keys, and its group then reads the records no statement has read yet (a statement per kind,
    a second round trip on its connection). A record two paths find is read twice, by the same query inside
    the same scope: the same record. Before (to 5 December), every group read its hits' records in a second
    round trip. A single pipeline for everything was slower (the server then runs every statement on one
    core); so was reading the records in the semantic statement too (planned every time, 1.4 against
    0.3 ms), and sending every group from the asking thread without the pool's threads.
    """

    def __init__(
        self,
        plan: QueryPlan,
        scope: RetrievalScope,
        cfg: RetrievalConfig,
        query_vector: Sequence[float] | None,
        deferred: list[OfflinePlanRow],
    ) -> None:
        self.plan, self.scope, self.cfg, self.query_vector, self.deferred = plan, scope, cfg, query_vector, deferred
        self.found: dict[str, list[RecordKey]] = {}
        self.records: dict[RecordKey, Record] = {}
        self.ms: dict[str, float] = {}

    def statements(self, hydrator: Hydrator) -> dict[str, parallel.Statement]:
        """The planned paths' statements, by path (a path with nothing to look for has none). Those with a generic
        plan read the records of their hits inside the scope again in the same statement (`hydrator`); the
        semantic one, planned for its scope every time, returns keys (`FOLDED` names the others): reading the
        records in it too made it several times longer to plan (1.4 against 0.3 ms at 100k)."""
        plan, scope, cfg = self.plan, self.scope, self.cfg
        out: dict[str, parallel.Statement] = {}

        def collect(name: str) -> paths.Fetch:
            def fetch(sql: str, params: dict[str, object], kinds: Iterable[str] = ()) -> list[RecordKey]:
                out[name] = parallel.Statement(*hydrator.statement(sql, params, kinds))
                return []

            return fetch

        if "structured" in plan.paths:
            paths.structured(plan, scope, cfg, fetch=collect("structured"))
        if "semantic" in plan.paths:
            semantic = paths.semantic_statement(plan, scope, cfg, self.query_vector)
            if semantic is not None:
                out["semantic"] = parallel.Statement(*semantic)
        if "fulltext" in plan.paths:
            paths.fulltext(plan, scope, cfg, fetch=collect("fulltext"))
        if "graph" in plan.paths:
            paths.graph(plan, scope, cfg, fetch=collect("graph"))
        if "summary" in plan.paths:
            paths.summary(plan, scope, cfg, fetch=collect("summary"))
        return out

    def run(self, *, ways: int, threads: int) -> None:
        """The paths' hits with their records (and the accounting row), in at most `ways` groups side by side on
        pool connections (inside the caller's transaction, one after another on its own connection)."""
        in_transaction = connection.in_atomic_block
        hydrator = Hydrator(self.scope, question_vector=self.query_vector, terms=self.plan.keywords)
        statements: dict[str, list[parallel.Statement]] = {
            name: [statement] for name, statement in self.statements(hydrator).items()
        }
        if not in_transaction:  # one transaction up to the pipeline's sync: its commit waits for no flush
            for i, row in enumerate(self.deferred):
                statements[f"_row{i}"] = [
                    parallel.Statement(sql, params, bool(params)) for sql, params in row.statements()
                ]
        lock = threading.Lock()

        def group(names: list[str]) -> dict[str, list[RecordKey]]:
            # This group's paths: one round trip; then, for the semantic path's hits, the records no statement has
            # read yet, in a second.
            t = time.perf_counter()
            rows = self._pipeline(names, statements)
            found: dict[str, list[RecordKey]] = {}
            unread: list[RecordKey] = []
            for name in names:
                if name in FOLDED:
                    found[name] = hydrator.keep(rows[name])
                elif not name.startswith("_"):
                    found[name] = [(row[0], row[1]) for row in rows[name]]
                    unread += found[name]
            paths_ms = _ms(t)
            t = time.perf_counter()
            with lock:
                unread = [key for key in unread if key not in hydrator.records]
            by_kind = hydrating(unread, hydrator)
            if by_kind:
                hydrated = self._pipeline(
                    list(by_kind), {kind: [parallel.Statement(*statement)] for kind, statement in by_kind.items()}
                )
                for kind in by_kind:
                    hydrator.keep(hydrated[kind])
            with lock:
                self.ms.update(dict.fromkeys(found, paths_ms))
                if by_kind:
                    self.ms["hydrate"] = max(self.ms.get("hydrate", 0.0), _ms(t))
            return found

        jobs = {f"group{i}": (lambda names=names: group(names)) for i, names in enumerate(_split(statements, ways))}
        done = parallel.run(jobs, threads=threads, prepare=lambda: paths.configure_session(self.cfg))
        found = {name: keys for keys, _ms_taken in done.values() for name, keys in keys.items()}
        self.found = {name: found.get(name, []) for name in paths_of(self.plan)}
        if in_transaction:  # inside the caller's transaction, as `record_llm_call` writes it there
            for row in self.deferred:
                row()
        self.records = hydrator.records

    def _pipeline(self, names: list[str], statements: dict[str, list[parallel.Statement]]) -> dict[str, list[tuple]]:
        prepared = paths._session_configured()
        sent: list[parallel.Statement] = []
        if "semantic" in names and not prepared:  # the HNSW settings for this transaction only
            sent.append(parallel.Statement(*paths.hnsw_settings(self.cfg, local=True)))
        last: dict[str, int] = {}
        for name in names:
            sent += statements[name]
            last[name] = len(sent) - 1
        rows = parallel.pipeline(sent, prepared=prepared)
        return {name: rows[i] for name, i in last.items()}


# The paths whose statement reads its hits' records too (`_Search.statements`): all but the semantic one.
FOLDED = frozenset({"structured", "fulltext", "graph", "summary"})


# Rough server time of each statement (ms at 100k, `EXPLAIN ANALYZE`), to split them into pipelines of about
# the same cost: the paths (with their hits' records, but the semantic one).
_COST = {"graph": 4.0, "fulltext": 2.5, "semantic": 1.5, "structured": 0.5, "summary": 0.3, "entity": 2.0}


def _split(statements: dict[str, list[parallel.Statement]], ways: int) -> list[list[str]]:
    """The entries in at most `ways` groups of about the same cost (the costliest first, each to the cheapest
    group), each group in the entries' own order."""
    groups: list[list[str]] = [[] for _ in range(max(1, ways))]
    costs = [0.0] * len(groups)
    for name in sorted(statements, key=lambda n: -_COST.get(n, 0.5)):
        i = costs.index(min(costs))
        groups[i].append(name)
        costs[i] += _COST.get(name, 0.5)
    order = list(statements)
    return [sorted(group, key=order.index) for group in groups if group]


def paths_of(plan: QueryPlan) -> list[str]:
    """The planned paths, in the order fusion meets them."""
    return [name for name in ("structured", "semantic", "fulltext", "graph", "summary") if name in plan.paths]


def retrieve(
    question: str,
    scope: RetrievalScope,
    cfg: RetrievalConfig | None = None,
    *,
    now: datetime | None = None,
    query_vector: Sequence[float] | None = None,
    plan: QueryPlan | None = None,
    scorer: relevance.Scorer | None = None,
) -> Retrieval:
    """Plan, run the planned paths inside `scope`, hydrate (inside `scope` again) and fuse. No answer model."""
    cfg = cfg or RetrievalConfig.from_settings()
    now = now or timezone.now()
    timings: dict[str, float] = {}
    t = time.perf_counter()
    deferred: list[OfflinePlanRow] = []  # the offline plan's accounting row, written with the paths' statements
    if plan is None:
        ctx = cached_plan_context(scope, now, cfg.plan_context_ttl_s)
        plan = analyse(question, ctx, channel_id=scope.channel_id, deferred=deferred)
    timings["plan"] = _ms(t)

    t = time.perf_counter()
    if query_vector is None:  # the semantic path and the relevance judgement both use it
        query_vector = _query_vector(question)
    search = _Search(plan, scope, cfg, query_vector, deferred)
    search.run(ways=cfg.path_pipelines, threads=cfg.path_threads)
    found, records, path_ms = search.found, search.records, search.ms
    # A hit whose record is not in scope (or no longer there) is no hit.
    hits = {name: [key for key in keys if key in records] for name, keys in found.items()}
    timings["paths"] = _ms(t)

    t = time.perf_counter()
    fused = fuse(
        hits,
        records,
        weights=cfg.path_weights,
        now=now,
        half_life_days=cfg.recency_half_life_days,
        rrf_k=cfg.rrf_k,
        multi_path_boost=cfg.multi_path_boost,
    )
    scorer = scorer or relevance.load()
    features = relevance.featurise(plan, fused, records)
    scores = {key: scorer.probability(row) for key, row in features.items()}
    fused = relevance.rerank(fused, scores)[: cfg.top_n]
    timings["fuse"] = _ms(t)
    return Retrieval(
        plan=plan, fused=fused, records=records, path_hits=hits, timings_ms=timings, path_ms=path_ms,
        features=features, scores=scores,
    )  # fmt: skip


def _contradictions(
    cited: list[Record], candidates: list[Record], scope: RetrievalScope, cfg: RetrievalConfig
) -> list[tuple[Record, Record]]:
    """Pairs (newer, older) of contradicting decisions in force, one of them the record that answers."""
    if not cited or cited[0].type != "decision":
        return []
    decisions = [r for r in candidates if r.type == "decision"][: answers.MAX_CITED * 2]
    pairs = contradicting_pairs(decisions, scope, cfg.contradiction_threshold)
    return [(newer, older) for newer, older in pairs if cited[0] in (newer, older)][:1]


def _names(
    channel_id: str, records: list[Record], people: Sequence[str] = (), scope: RetrievalScope | None = None
) -> dict[str, str]:
    """Display names by user id: the channel's member cache, and the owners records carry; for `people` the
    cache does not name, the name their actions in `scope` carry."""
    names = {r.detail["owner_id"]: r.detail["owner_name"] for r in records if r.detail.get("owner_name")}
    names.update({m.user_id: m.name for m in _channel_members(channel_id) if m.name})
    unnamed = [p for p in people if p not in names]
    if unnamed and scope is not None:
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT DISTINCT ON (a.owner_id) a.owner_id, a.owner_name FROM actions a WHERE {scope.actions('a')}"
                " AND a.owner_id = ANY(%(unnamed)s) AND a.owner_name IS NOT NULL",
                {**scope.params(), "unnamed": unnamed},
            )
            names.update(dict(cur.fetchall()))
    return names


def _observe(timings: dict[str, float], path_ms: dict[str, float], outcome: str) -> None:
    """Metrics: each step (plan, paths, fuse, answer), each path that ran, and the total, by answer outcome."""
    metrics.retrieval({**timings, **path_ms, "total": sum(timings.values())}, outcome)


def ask(channel_id: str, user_id: str, question: str) -> AskResult:
    """Answer `question` for `user_id` asking in `channel_id`, citing the records it rests on."""
    cfg = RetrievalConfig.from_settings()
    try:
        scope = RetrievalScope.for_asker(channel_id, user_id)
    except UnknownChannel:
        return AskResult(answer=answers.NO_RECORD, timings_ms={"plan": 0.0, "paths": 0.0, "fuse": 0.0, "answer": 0.0})
    found = retrieve(question, scope, cfg)
    timings = dict(found.timings_ms)

    t = time.perf_counter()
    if found.plan.response_format == "list" and len(found.plan.record_types) == 1:
        listed = _listed(found)
        setting = answers.Setting(
            channel_id=channel_id,
            timezone=scope.timezone,
            now=timezone.now(),
            names=_names(channel_id, listed, found.plan.owner_ids, scope),
            asker_id=user_id,
        )
        if (result := answers.listing(found.plan, listed, setting)) is not None:
            return _answered(channel_id, found, result, timings, t, tokens=0)
    ranked = found.ranked()
    scorer = relevance.load()
    answering = relevance.settled(
        found.plan,
        ranked,
        gate=scorer.gate_for(question),
        scores=found.scores,
        floor=scorer.answer_floor,
        sure=scorer.sure_for(question),
    )
    if not answering:
        timings["answer"] = _ms(t)
        _observe(timings, found.path_ms, "no_record")
        logger.info("ask: channel=%s no record (paths=%s)", channel_id, {k: len(v) for k, v in found.path_hits.items()})
        return AskResult(answer=answers.NO_RECORD, timings_ms=timings)
    # The pack holds what settles the question, best first, and the entities around it for context.
    answering_keys = {r.key for r in answering}
    ranked = [r for r in ranked if r.key in answering_keys or r.type == "entity"]
    pack = build_pack(question, ranked, cfg.context_tokens, zone=channel_zone(scope.timezone))
    in_pack = [r for r in answering if r in pack.records]
    original = answers.asks_for_the_original(question)
    cited = answers.cite(in_pack, found.scores, margin=scorer.margin, original_first=original)
    pairs = _contradictions(cited, in_pack, scope, cfg)
    for pair in pairs:  # the answer names both sides of a contradiction, so it cites both
        missing = [r for r in pair if r not in cited]
        cited = [*cited[: answers.MAX_CITED - len(missing)], *missing]
    setting = answers.Setting(
        channel_id=channel_id, timezone=scope.timezone, now=timezone.now(), names=_names(channel_id, ranked)
    )
    result = answers.respond(found.plan, pack, pairs, cited, setting)
    # Only near the question: said unless the question is a filter ("my open actions", an id), whose hits
    # answer it by definition whatever their probability.
    doubtful = found.scores.get(result.cited[0].key, 1.0) < scorer.hedge_below if result.cited else False
    if doubtful and not relevance.is_filter(found.plan):
        result = replace(result, text=f"{answers.NEAREST} {result.text}")
    return _answered(channel_id, found, result, timings, t, tokens=pack.tokens)


def _answered(
    channel_id: str, found: Retrieval, result: answers.Answer, timings: dict[str, float], t: float, *, tokens: int
) -> AskResult:
    """The answer with the records it cites, its timings observed and logged (ids only, never text)."""
    timings["answer"] = _ms(t)
    by_key = {f.key: f for f in found.fused}
    cited = [
        CitedRecord(
            id=r.cite_id,
            type=r.type,
            channel_id=r.channel_id,
            paths=list(by_key[r.key].paths) if r.key in by_key else ["structured"],
            score=round(by_key[r.key].score, 8) if r.key in by_key else 0.0,
            source_ref=r.source_ref,
        )
        for r in result.cited
    ]
    _observe(timings, found.path_ms, "cited" if cited else "no_record")
    logger.info("ask: channel=%s cited=%s model=%s", channel_id, [c.id for c in cited], result.model)
    return AskResult(answer=result.text, records=cited, tokens=tokens, timings_ms=timings)


def _listed(found: Retrieval) -> list[Record]:
    """For a question asking what someone has on or decided (`plan.response_format` "list" over one record type),
    the records the structured path found under its filters: they are the answer, whatever their words. Actions
    soonest deadline first, then the newest; decisions newest first."""
    kind = found.plan.record_types[0]
    hits = [found.records[k] for k in found.path_hits.get("structured", [])]
    hits = [r for r in hits if r.type == kind and relevance.citable(r)]
    far = datetime.max.replace(tzinfo=UTC)
    return sorted(hits, key=lambda r: (r.detail.get("deadline") or far, -r.occurred_at.timestamp()))
