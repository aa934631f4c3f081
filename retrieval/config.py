"""Retrieval configuration as data: one frozen recipe built from settings.JEEVES (weights, budgets, k)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

PATHS: tuple[str, ...] = ("structured", "semantic", "fulltext", "graph", "summary")


@dataclass(frozen=True)
class RetrievalConfig:
    path_weights: dict[str, float]
    recency_half_life_days: float
    context_tokens: int
    complexity_threshold: float
    contradiction_threshold: float
    rrf_k: int = 60
    multi_path_boost: float = 1.5
    # Below these a path's hit is not worth hydrating (the paths cast a wide net; relevance judges).
    min_similarity: float = 0.2
    min_term_coverage: float = 0.3
    # Which candidates answer, the no-record gate and the citing margin are the fitted relevance model's
    # (retrieval.relevance, retrieval/artefacts/relevance.json), not settings.
    hnsw_ef_search: int = 40
    # Semantic path: a scope with at most this many embeddings is scanned exactly (btree pre-filter,
    # ~10 ms per 1,000 rows on the bench); a larger one walks the HNSW index with an iterative scan
    # that reads at most `hnsw_max_scan_tuples` index tuples looking for k rows in scope.
    exact_scan_max_rows: int = 3000
    hnsw_max_scan_tuples: int = 20000
    # Full-text matches: a scope of at most this many rows per table is read first (btree) and each row
    # tested; a larger one is left to the planner (GIN and scope together). See paths._scope_first.
    scope_first_max_rows: int = 5000
    graph_depth: int = 3
    # Hits each path returns, and records the fused list keeps.
    k: dict[str, int] = field(
        default_factory=lambda: {"structured": 10, "semantic": 10, "fulltext": 10, "graph": 10, "summary": 5}
    )
    top_n: int = 10
    # Threads (each with its own database connection) the paths' groups run on side by side (retrieval.parallel).
    path_threads: int = 5
    # The paths' statements go to the server in this many groups side by side, one per pool connection, each a
    # pipeline (one round trip, its statements run one after another), then its hits' records (retrieval.ask).
    path_pipelines: int = 3
    # The planner's names of a scope (entities, people) are kept this long per scope (retrieval.ask).
    plan_context_ttl_s: float = 5.0

    @classmethod
    def from_settings(cls) -> RetrievalConfig:
        j = settings.JEEVES
        return cls(
            path_weights=dict(j.path_weights),
            recency_half_life_days=j.recency_half_life_days,
            context_tokens=j.context_tokens,
            complexity_threshold=j.complexity_threshold,
            contradiction_threshold=j.contradiction_threshold,
        )
