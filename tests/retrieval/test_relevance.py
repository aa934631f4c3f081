"""Relevance rules (pure): what may be cited, the relevance score, re-ranking, and the no-record gate."""

from __future__ import annotations

from datetime import UTC, datetime

from retrieval.fusion import Fused
from retrieval.plan import QueryPlan
from retrieval.records import Record
from retrieval.relevance import citable, is_filter, relevance, rerank, settled

AT = datetime(2026, 5, 1, tzinfo=UTC)


def rec(kind="decision", rid="1", status="active", similarity=None, coverage=None) -> Record:
    return Record(
        type=kind, id=rid, friendly_id=None, channel_id="c", channel_name="c", occurred_at=AT, confidence=0.8,
        text="t", status=status, source_ref={}, similarity=similarity, coverage=coverage,
    )  # fmt: skip


def test_questions_and_idle_talk_are_never_cited():
    assert citable(rec("decision")) and citable(rec("action")) and citable(rec("summary", status="daily"))
    assert citable(rec("signal", status="blocker")) and citable(rec("signal", status="update"))
    assert not citable(rec("signal", status="question"))
    assert not citable(rec("signal", status="discussion"))
    assert not citable(rec("entity", status="tool"))


def test_relevance_is_similarity_plus_weighted_coverage():
    assert relevance(rec(similarity=0.4, coverage=0.5), 1.0) == 0.9
    assert relevance(rec(similarity=0.4, coverage=0.5), 0.5) == 0.65
    assert relevance(rec(), 1.0) == 0.0  # hydrated without a question: nothing to go on


def test_rerank_puts_the_relevant_record_first_and_uses_fusion_to_break_ties():
    a, b, c = rec(rid="a", similarity=0.2), rec(rid="b", similarity=0.7, coverage=0.5), rec(rid="c", similarity=0.2)
    records = {r.key: r for r in (a, b, c)}
    fused = [Fused(a.key, 0.03, ("structured",)), Fused(c.key, 0.02, ("semantic",)), Fused(b.key, 0.01, ("fulltext",))]
    order = [f.key for f in rerank(fused, records, lexical_weight=1.0, fusion_weight=0.1)]
    assert order == [b.key, a.key, c.key]
    # Fusion alone decides when it outweighs relevance.
    order = [f.key for f in rerank(fused, records, lexical_weight=1.0, fusion_weight=10.0)]
    assert order[0] == a.key


def test_the_gate_answers_only_when_the_best_citable_record_is_relevant():
    plan = QueryPlan(keywords=["psp"])
    weak = [rec(rid="a", similarity=0.3, coverage=0.0), rec("signal", "q", status="question", similarity=0.9)]
    assert settled(plan, weak, lexical_weight=1.0, min_relevance=0.5) == []
    strong = [rec(rid="a", similarity=0.3, coverage=0.0), rec(rid="b", similarity=0.4, coverage=0.34)]
    assert [r.id for r in settled(plan, strong, lexical_weight=1.0, min_relevance=0.5)] == ["a", "b"]
    assert settled(plan, [rec("entity", similarity=1.0)], lexical_weight=1.0, min_relevance=0.5) == []


def test_a_filter_question_is_answered_by_its_hits():
    plan = QueryPlan(record_types=["action"], statuses=["open"])
    assert is_filter(plan) and not is_filter(QueryPlan(keywords=["launch"]))
    hits = [rec("action", similarity=0.1, coverage=0.0)]
    assert settled(plan, hits, lexical_weight=1.0, min_relevance=0.5) == hits
    assert is_filter(QueryPlan(friendly_ids=["DEC-0001"]))
