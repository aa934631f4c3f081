"""Relevance: does a found record speak to the question, and does anything found settle it?

The paths cast a wide net and fusion orders what they caught by agreement, rank and age; neither says
whether a record is about the question. Each candidate is hydrated with its cosine similarity to the
question and the share of the question's terms its text matches; relevance is their weighted sum.
The answer cites the most relevant records, and says "no record" when even the best of them falls
short of `answer_min_relevance` (unless the question is a filter — an id, "my open actions" — whose
hits answer it by definition). Pure functions over hydrated records, unit-tested without a database.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retrieval.fusion import Fused, RecordKey
from retrieval.plan import QueryPlan
from retrieval.records import Record

CITABLE = frozenset({"decision", "action", "signal", "summary"})
# A question someone asked, or talk that settled nothing, is context, never an answer.
UNSETTLED_SIGNALS = frozenset({"question", "discussion"})


def citable(record: Record) -> bool:
    """Whether an answer may rest on `record`."""
    if record.type not in CITABLE:
        return False
    return not (record.type == "signal" and record.status in UNSETTLED_SIGNALS)


def relevance(record: Record, lexical_weight: float) -> float:
    """Cosine similarity to the question plus `lexical_weight` x the share of its terms matched."""
    return (record.similarity or 0.0) + lexical_weight * (record.coverage or 0.0)


def is_filter(plan: QueryPlan) -> bool:
    """A question that names ids, a record type, a status or the asker's own records: its hits answer it."""
    return bool(plan.friendly_ids or plan.record_types or plan.statuses)


def rerank(
    fused: Sequence[Fused], records: Mapping[RecordKey, Record], *, lexical_weight: float, fusion_weight: float
) -> list[Fused]:
    """`fused` reordered by relevance, with the fused score (scaled to 0..1) as a lesser term."""
    top = max((f.score for f in fused), default=0.0) or 1.0

    def score(f: Fused) -> float:
        return relevance(records[f.key], lexical_weight) + fusion_weight * f.score / top

    return sorted(fused, key=lambda f: (-score(f), f.key))


def settled(plan: QueryPlan, ranked: Sequence[Record], *, lexical_weight: float, min_relevance: float) -> list[Record]:
    """The citable records, best first, if the best of them is relevant enough; else nothing."""
    candidates = [r for r in ranked if citable(r)]
    if not candidates:
        return []
    if is_filter(plan):
        return candidates
    if max(relevance(r, lexical_weight) for r in candidates) < min_relevance:
        return []
    return candidates
