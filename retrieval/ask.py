"""The question path: plan → five scoped paths → fusion → context pack → answer, with timings.

`retrieve` is the search alone (no answer model), used by the answer path and by bench/retrieval_speed.py;
`ask` is what `@Jeeves <question>`, `jeeves ask` and `jeeves eval --answers` call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
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
from retrieval.plan import PlanContext, QueryPlan, analyse
from retrieval.records import Record, contradicting_pairs, hydrate
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
    path_ms: dict[str, float] = field(default_factory=dict)  # per path (its keys; hydration is after), for the bench
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
            owner_id = extra[0]
            members.setdefault(name.lower(), owner_id)
            members.setdefault(name.split()[0].lower(), owner_id)
    return PlanContext(now=now, asker_id=scope.user_id, entity_names=entity_names, members=members)


_contexts: dict[RetrievalScope, tuple[float, PlanContext]] = {}
_contexts_lock = threading.Lock()
_CONTEXTS_MAX = 256


def cached_plan_context(scope: RetrievalScope, now: datetime, ttl_s: float) -> PlanContext:
    """`plan_context`, kept per scope for `ttl_s` seconds: a conversation asks several questions in a row, and
    the names only steer the search (a name learnt in the last seconds is missed, never a record shown)."""
    if ttl_s <= 0:
        return plan_context(scope, now)
    with _contexts_lock:
        cached = _contexts.get(scope)
    if cached is not None and time.monotonic() - cached[0] < ttl_s:
        return replace(cached[1], now=now)
    ctx = plan_context(scope, now)
    with _contexts_lock:
        if len(_contexts) >= _CONTEXTS_MAX:
            _contexts.clear()
        _contexts[scope] = (time.monotonic(), ctx)
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
    deferred: list[Callable[[], None]] = []  # the offline plan's accounting row, written beside the paths
    if plan is None:
        ctx = cached_plan_context(scope, now, cfg.plan_context_ttl_s)
        plan = analyse(question, ctx, channel_id=scope.channel_id, deferred=deferred)
    timings["plan"] = _ms(t)

    t = time.perf_counter()
    if query_vector is None:  # the semantic path and the relevance judgement both use it
        query_vector = _query_vector(question)
    # The paths run side by side on connections of their own (the step waits for the slowest path, not for
    # their sum), each a small statement returning keys; their records are then read once, inside `scope`
    # again: a statement per kind of record found, side by side on the same threads. Hydrating in each path's
    # own statement made every statement several times larger, and Postgres spent as long planning them as
    # running them; one statement for every kind was planned and run on one core.
    runners: dict[str, Callable[[], list[RecordKey]]] = {
        "structured": lambda: paths.structured(plan, scope, cfg),
        "semantic": lambda: paths.semantic(plan, scope, cfg, query_vector),
        "fulltext": lambda: paths.fulltext(plan, scope, cfg),
        "graph": lambda: paths.graph(plan, scope, cfg),
        "summary": lambda: paths.summary(plan, scope, cfg),
    }
    jobs: dict[str, Callable[[], Any]] = {name: run for name, run in runners.items() if name in plan.paths}
    jobs.update({f"_deferred{i}": job for i, job in enumerate(deferred)})
    # The accounting row goes last: it takes the first thread a path leaves (usually the quick structured one).
    done = parallel.run(jobs, threads=cfg.path_threads, prepare=lambda: paths.configure_session(cfg))
    found = {name: keys for name, (keys, _ms_taken) in done.items() if name in runners}
    path_ms = {name: ms for name, (_found, ms) in done.items() if name in runners}
    by_kind: dict[str, list[RecordKey]] = {}
    for keys in found.values():
        for key in keys:
            by_kind.setdefault(key[0], []).append(key)
    hydrated = parallel.run(
        {
            kind: (lambda keys=keys: hydrate(keys, scope, question_vector=query_vector, terms=plan.keywords))
            for kind, keys in by_kind.items()
        },
        threads=cfg.path_threads,
        prepare=lambda: paths.configure_session(cfg),
    )
    records = {k: r for part, _ms_taken in hydrated.values() for k, r in part.items()}
    # A hit whose record is not in scope (or no longer there) is no hit.
    hits = {name: [key for key in keys if key in records] for name, keys in found.items()}
    timings["paths"] = _ms(t)

    t = time.perf_counter()
    fused = fuse(
        hits,
        {k: r.meta for k, r in records.items()},
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


def _names(channel_id: str, records: list[Record]) -> dict[str, str]:
    """Display names by user id: the channel's member cache, and the owners records carry."""
    from redis.exceptions import RedisError

    from pipeline import members

    names = {r.detail["owner_id"]: r.detail["owner_name"] for r in records if r.detail.get("owner_name")}
    try:
        names.update({m.user_id: m.name for m in members.all_members(channel_id) if m.name})
    except RedisError as exc:  # names make the answer kinder; without the cache it still answers
        logger.warning("ask: member cache unavailable (%s); deciders unnamed", type(exc).__name__)
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
    ranked = found.ranked()
    scorer = relevance.load()
    answering = relevance.settled(
        found.plan, ranked, gate=scorer.gate_for(question), scores=found.scores, floor=scorer.answer_floor
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
    timings["answer"] = _ms(t)
    by_key = {f.key: f for f in found.fused}
    cited = [
        CitedRecord(
            id=r.cite_id,
            type=r.type,
            channel_id=r.channel_id,
            paths=list(by_key[r.key].paths),
            score=round(by_key[r.key].score, 8),
            source_ref=r.source_ref,
        )
        for r in result.cited
    ]
    _observe(timings, found.path_ms, "cited" if cited else "no_record")
    logger.info("ask: channel=%s cited=%s model=%s", channel_id, [c.id for c in cited], result.model)
    return AskResult(answer=result.text, records=cited, tokens=pack.tokens, timings_ms=timings)
