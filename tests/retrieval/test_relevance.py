"""Relevance rules (pure): what may be cited, the learned score's features, re-ranking, the no-record gate,
and the artefact that holds the fitted model."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from retrieval import relevance
from retrieval.fusion import Fused
from retrieval.plan import QueryPlan
from retrieval.records import Record
from retrieval.relevance import FEATURES, Scorer, citable, featurise, is_filter, rerank, settled, topicality

AT = datetime(2026, 5, 1, tzinfo=UTC)


def rec(kind="decision", rid="1", status="active", similarity=None, coverage=None, text="t", **detail) -> Record:
    return Record(
        type=kind, id=rid, friendly_id=None, channel_id="c", channel_name="c", occurred_at=AT, confidence=0.8,
        text=text, status=status, source_ref={}, similarity=similarity, coverage=coverage, detail=detail,
    )  # fmt: skip


def test_questions_and_idle_talk_are_never_cited():
    assert citable(rec("decision")) and citable(rec("action")) and citable(rec("summary", status="daily"))
    assert citable(rec("signal", status="blocker")) and citable(rec("signal", status="update"))
    assert not citable(rec("signal", status="question"))
    assert not citable(rec("signal", status="discussion"))
    assert not citable(rec("entity", status="tool"))


def test_topicality_is_similarity_plus_coverage():
    assert topicality(rec(similarity=0.4, coverage=0.5)) == 0.9
    assert topicality(rec()) == 0.0  # hydrated without a question: nothing to go on


def test_features_describe_each_candidate_in_fusion_order():
    plan = QueryPlan(intent="accountability", entities=["Kestrel"], owner_ids=["u1@o"])
    a = rec("action", "a", status="open", similarity=0.6, coverage=0.5, text="Ana to ship the Kestrel build",
            owner_id="u1@o", deadline=AT)  # fmt: skip
    d = rec("decision", "d", similarity=0.2, coverage=0.0, superseded_by="DEC-0002")
    fused = [Fused(d.key, 0.04, ("semantic", "graph")), Fused(a.key, 0.02, ("fulltext",))]
    rows = featurise(plan, fused, {r.key: r for r in (a, d)})
    assert all(len(row) == len(FEATURES) for row in rows.values())
    f = {key: dict(zip(FEATURES, row, strict=True)) for key, row in rows.items()}
    assert f[d.key]["inverse_rank"] == 1.0 and f[a.key]["inverse_rank"] == 0.5
    assert f[d.key]["paths"] > f[a.key]["paths"] and f[a.key]["path_fulltext"] == 1.0
    assert f[a.key]["similarity_below_best"] == 0.0 and f[d.key]["similarity_below_best"] == pytest.approx(0.4)
    assert f[a.key]["accountability_x_action"] == 1.0 and f[d.key]["accountability_x_action"] == 0.0
    assert f[a.key]["names_entity"] == 1.0 and f[a.key]["owned_by_named"] == 1.0 and f[a.key]["has_deadline"] == 1.0
    assert f[d.key]["state_superseded"] == 1.0 and f[d.key]["names_entity"] == 0.0


def test_rerank_orders_by_probability_and_keeps_fusion_order_on_ties():
    a, b, c = (Fused(("decision", x), 0.01, ("semantic",)) for x in "abc")
    order = [f.key for f in rerank([a, b, c], {a.key: 0.2, b.key: 0.9, c.key: 0.2})]
    assert order == [b.key, a.key, c.key]


def test_the_gate_answers_only_when_a_citable_record_is_on_topic():
    plan = QueryPlan(keywords=["psp"])
    weak = [rec(rid="a", similarity=0.3, coverage=0.0), rec("signal", "q", status="question", similarity=0.9)]
    assert settled(plan, weak, gate=0.5) == []
    strong = [rec(rid="a", similarity=0.3, coverage=0.0), rec(rid="b", similarity=0.4, coverage=0.34)]
    assert [r.id for r in settled(plan, strong, gate=0.5)] == ["a", "b"]  # the order given (by probability)
    assert settled(plan, [rec("entity", similarity=1.0)], gate=0.5) == []


def test_an_on_topic_record_too_unlikely_to_answer_is_no_answer():
    plan = QueryPlan(keywords=["ferry"])
    near = [rec(rid="a", similarity=0.6, coverage=0.5), rec(rid="b", similarity=0.7, coverage=0.5)]
    doubtful = {near[0].key: 0.3, near[1].key: 0.2}  # on topic, but the best is unlikely to answer
    assert settled(plan, near, gate=0.5, scores=doubtful, floor=0.4) == []
    assert [r.id for r in settled(plan, near, gate=0.5, scores=doubtful, floor=0.3)] == ["a", "b"]
    assert settled(plan, near, gate=0.5) == near  # no floor: topicality alone
    filtered = QueryPlan(statuses=["open"])
    assert settled(filtered, near, gate=0.5, scores=doubtful, floor=0.9) == near  # a filter's hits answer it
    unembedded = [rec(rid="c", similarity=None, coverage=1.0)]  # no vector yet: topicality alone judges it
    assert settled(plan, unembedded, gate=0.5, scores={unembedded[0].key: 0.05}, floor=0.4) == unembedded


def test_a_filter_question_is_answered_by_its_hits():
    plan = QueryPlan(record_types=["action"], statuses=["open"])
    assert is_filter(plan) and not is_filter(QueryPlan(keywords=["launch"]))
    hits = [rec("action", similarity=0.1, coverage=0.0)]
    assert settled(plan, hits, gate=0.5) == hits
    assert is_filter(QueryPlan(friendly_ids=["DEC-0001"]))


def test_a_yes_no_question_has_its_own_gate():
    asks_whether = ["Did the kiosk team settle on a paint supplier?", "so have we booked the barge?",
                    "Is there a cap on taxi fares?", "Weren't the badges reprinted?",
                    "Can interns use the van?"]  # fmt: skip
    asks_what = ["What did the kiosk team settle on?", "Who booked the barge?", "When do badges arrive?",
                 "Why is there a cap on taxi fares?", "Tell me about the van."]  # fmt: skip
    assert all(relevance.is_verification(q) for q in asks_whether)
    assert not any(relevance.is_verification(q) for q in asks_what)
    scorer = Scorer(weights=(0.0,) * len(FEATURES), bias=0.0, gate=0.6, margin=0.1, verify_gate=0.9)
    assert scorer.gate_for(asks_whether[0]) == 0.9 and scorer.gate_for(asks_what[0]) == 0.6
    assert Scorer(weights=(0.0,) * len(FEATURES), bias=0.0, gate=0.6, margin=0.1).gate_for(asks_whether[0]) == 0.6


def test_a_yes_no_question_is_answered_by_a_record_the_model_is_sure_of_even_under_its_gate():
    # "Is the ferry still running on Sundays?" asked of "Sunday sailings stop from May": few words in common (the
    # gate's topicality is low), but the model is sure the record answers it.
    plan = QueryPlan(keywords=["ferry", "sundays"])
    ferry = [rec(rid="a", similarity=0.45, coverage=0.0), rec(rid="b", similarity=0.3, coverage=0.0)]
    sure = {ferry[0].key: 0.93, ferry[1].key: 0.4}
    assert settled(plan, ferry, gate=1.0, scores=sure, floor=0.4) == []  # the gate alone
    assert [r.id for r in settled(plan, ferry, gate=1.0, scores=sure, floor=0.4, sure=0.92)] == ["a", "b"]
    assert settled(plan, ferry, gate=1.0, scores=sure, floor=0.4, sure=0.95) == []  # not sure enough
    unembedded = [rec(rid="c", similarity=None, coverage=0.0)]  # no vector: its probability means little
    assert settled(plan, unembedded, gate=1.0, scores={unembedded[0].key: 0.99}, sure=0.9) == []
    scorer = Scorer(weights=(0.0,) * len(FEATURES), bias=0.0, gate=0.6, margin=0.1, verify_gate=1.0, verify_sure=0.92)
    assert scorer.sure_for("Is the ferry still running on Sundays?") == 0.92
    assert scorer.sure_for("When does the ferry stop running on Sundays?") is None


def test_the_yes_no_answer_probability_is_chosen_on_questions_the_model_did_not_see():
    from retrieval.learn import Question, choose_sure, replay

    def q(text: str, no_record: bool, prob: float, topical: float) -> tuple[Question, list[float]]:
        row = [topical if name == "similarity" else 0.0 for name in FEATURES]
        question = Question("c", no_record=no_record, is_filter=False, rows=[row], citable=[True],
                            expected=[not no_record], question=text)  # fmt: skip
        return question, [prob]

    asked = [
        q("Is the ferry still running on Sundays?", False, 0.97, 0.4),  # answerable, under the gate, sure
        q("Did we drop the Sunday sailing?", False, 0.95, 0.5),
        q("Did we book a coach for the crew?", True, 0.9, 0.5),  # no record, a near-topic record, less sure
        q("Is the barge insured?", True, 0.6, 0.3),
        q("What did we pick for the barge?", False, 0.8, 1.2),  # not yes/no: the gate alone
    ]
    questions, probs = [x for x, _ in asked], [p for _, p in asked]
    plain = replay(questions, probs, 1.0, 0.0, 1.0, 0.4)
    assert plain["top5"] == pytest.approx(1 / 3) and plain["no_record"] == 1.0
    chosen = choose_sure(questions, probs, 1.0, 0.0, 1.0, 0.4)
    assert chosen is not None and 0.9 < chosen <= 0.95  # answers both sure ones, not the near-topic one
    tuned = replay(questions, probs, 1.0, 0.0, 1.0, 0.4, chosen)
    assert tuned["top5"] == 1.0 and tuned["no_record"] == 1.0
    assert choose_sure(questions[2:], probs[2:], 1.0, 0.0, 1.0, 0.4) is None  # nothing to gain: the gate alone


def test_the_hedge_covers_the_low_bands_where_the_first_record_was_mostly_wrong():
    from retrieval.learn import Question, hedge_threshold

    def q(prob: float, right: bool) -> tuple[Question, list[float]]:
        row = [1.0 if name in ("similarity", "coverage") else 0.0 for name in FEATURES]
        question = Question("c", no_record=False, is_filter=False, rows=[row], citable=[True], expected=[right],
                            question="What did the barge crew pick?")  # fmt: skip
        return question, [prob]

    leads = [q(0.45, False), q(0.55, False), q(0.56, True), q(0.58, False), q(0.65, True), q(0.66, False),
             q(0.68, False), q(0.75, True), q(0.76, False), q(0.77, True), q(0.95, True)]  # fmt: skip
    questions, probs = [x for x, _ in leads], [p for _, p in leads]
    assert hedge_threshold(questions, probs, gate=0.5, verify_gate=None) == 0.7  # 0.7-0.8 was mostly right
    assert hedge_threshold(questions[-1:], probs[-1:], gate=0.5, verify_gate=None) == 0.0


def test_the_scorer_is_a_logistic_model_stored_as_json(tmp_path):
    weights = tuple(1.0 if name == "similarity" else 0.0 for name in FEATURES)
    scorer = Scorer(
        weights=weights, bias=-0.5, gate=0.6, margin=0.1, verify_gate=0.75, hedge_below=0.7, answer_floor=0.4,
        verify_sure=0.9,
    )  # fmt: skip
    row = [0.5 if name == "similarity" else 0.0 for name in FEATURES]
    assert scorer.probability(row) == pytest.approx(0.5)
    path = tmp_path / "relevance.json"
    path.write_text(json.dumps(scorer.to_json(fitted_on="train")))
    assert relevance.load.__wrapped__(path) == scorer


def test_a_missing_or_stale_model_fails_loudly(tmp_path):
    with pytest.raises(relevance.StaleScorer, match="missing"):
        relevance.load.__wrapped__(tmp_path / "absent.json")
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps({"version": "rel-v0", "features": ["similarity"], "weights": [1.0], "bias": 0}))
    with pytest.raises(relevance.StaleScorer, match="refit"):
        relevance.load.__wrapped__(stale)


def test_the_committed_model_loads_and_prefers_the_on_topic_record():
    scorer = relevance.load()
    plan = QueryPlan(intent="factual_recall", keywords=["invoice", "credit"])
    on = rec("decision", "on", similarity=0.7, coverage=1.0, text="Decided: a credit on the next invoice")
    off = rec("decision", "off", similarity=0.1, coverage=0.0, text="Decided: lunch moves to Friday")
    fused = [Fused(off.key, 0.03, ("semantic",)), Fused(on.key, 0.02, ("semantic", "fulltext"))]
    scores = relevance.score(plan, fused, {r.key: r for r in (on, off)}, scorer)
    assert scores[on.key] > scores[off.key]
    assert 0.0 < scorer.gate < 2.0 and 0.0 <= scorer.margin <= 1.0
