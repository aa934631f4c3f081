"""The contradiction judge's link head: which earlier decision a new one replaces, on sentences written for these
tests; how its training pairs are labelled from gold by evidence; one link per later decision at most."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import numpy as np
import pytest

from pipeline.offline import artefacts
from pipeline.offline import contradiction as judge

T = datetime(2025, 6, 2, 10, 0, tzinfo=UTC)
ROOM = "The design review meets on Wednesday afternoons in the small meeting room."
ROOM_NOW = "The design review meets on Friday mornings over video."
ROOM_SAID = "change of plan for the design review: Friday mornings over video instead of the Wednesday room"
LUNCH = "The team lunch budget is capped at twenty pounds a head."


def test_link_features_have_one_value_per_named_feature_and_read_the_later_messages():
    sides = judge.sides([ROOM, LUNCH, ROOM_NOW], [T, T + timedelta(hours=1), T + timedelta(days=3)])
    said = judge.later_of([ROOM_SAID])
    row = judge.link_features(sides[0], sides[2], sides[:2], said)
    quiet = judge.link_features(sides[0], sides[2], sides[:2], judge.Later())
    names = list(judge.LINK_FEATURES)

    assert row.shape == (len(names),)
    assert row[names.index("cue_in_messages")] == 1.0 and quiet[names.index("cue_in_messages")] == 0.0
    assert row[names.index("messages_margin")] > 0  # the messages are nearer the room than the lunch budget
    assert row[names.index("log_hours_apart")] == pytest.approx(np.log1p(72))


def test_only_the_best_candidate_of_each_later_decision_is_linked_and_only_over_the_threshold():
    p = np.array([0.9, 0.7, 0.4, 0.3])
    keys = [("c", 5), ("c", 5), ("c", 6), ("d", 5)]

    assert judge.best_links(p, keys, 0.5).tolist() == [True, False, False, False]
    assert judge.best_links(p, keys, 0.2).tolist() == [True, False, True, True]
    figures = judge.link_figures(np.array([True, False, True]), np.array([1, 1, 0]), with_records=4)
    assert figures == {"linked": "1/4", "wrongly_linked": 1, "f1": round(2 * 0.5 * 0.25 / 0.75, 3)}


def _message(mid: str, at: datetime, text: str) -> SimpleNamespace:
    return SimpleNamespace(id=mid, ts=at, text=text)


def test_record_pairs_are_labelled_from_gold_by_evidence_and_a_replaced_record_is_no_longer_a_candidate():
    times = [T, T + timedelta(days=1), T + timedelta(days=2)]
    messages = [
        _message("a", times[0], "design review on wednesday afternoons, small room"),
        _message("b", times[1], "change of plan: design review friday mornings, video"),
        _message("c", times[2], "and now the review moves again, to thursday lunchtime"),
    ]
    gold = [
        {"id": "first", "summary": ROOM, "evidence": ["a"], "superseded_by": "second"},
        {"id": "second", "summary": ROOM_NOW, "evidence": ["b"], "superseded_by": "third"},
        {"id": "third", "summary": "The design review meets at Thursday lunchtime.", "evidence": ["c"]},
    ]
    conv = SimpleNamespace(id="c1", messages=messages, gold={"decisions": gold})
    records = [{"text": d["summary"], "ids": d["evidence"], "when": t, "by": []} for d, t in zip(gold, times)]

    rows, labels, index = judge.record_pairs(conv, records, floor=-1.0)

    # The first is no candidate of the third: the second, stored before it, had replaced it.
    assert index == [(0, 1), (1, 2)] and labels == [1, 1]
    assert all(r.shape == (len(judge.LINK_FEATURES),) for r in rows)
    assert judge.replaced_with_records(conv, records) == 2
    assert judge.replaced_with_records(conv, records[1:]) == 1


def test_a_link_is_right_when_the_two_records_carry_the_replacement_and_the_replaced_decision():
    replacements = [({"a"}, {"b", "c"})]

    assert judge.replaces(["a"], ["c"], replacements)  # the newer record holds part of the replacement
    assert judge.replaces(["a", "x"], ["b"], replacements)
    assert not judge.replaces(["a"], ["a", "b"], replacements)  # the newer still holds the replaced decision
    assert not judge.replaces(["b"], ["a"], replacements)  # the wrong way round
    assert not judge.replaces(["x"], ["b"], replacements)


def test_a_record_that_joins_the_replacement_with_a_neighbouring_decision_is_labelled_a_link():
    times = [T, T + timedelta(days=1), T + timedelta(days=1, minutes=5)]
    messages = [
        _message("a", times[0], "parking permits renew every january"),
        _message("b", times[1], "update: permits now renew in april, with the insurance"),
        _message("c", times[2], "and the visitor bays go to the far end of the lot"),
    ]
    gold = [
        {"id": "renewal", "summary": "Parking permits renew in January.", "evidence": ["a"], "superseded_by": "april"},
        {"id": "april", "summary": "Parking permits renew in April.", "evidence": ["b"]},
        {"id": "bays", "summary": "Visitor bays move to the far end.", "evidence": ["b", "c"]},
    ]
    conv = SimpleNamespace(id="c2", messages=messages, gold={"decisions": gold})
    # The engine joined the change with the next decision: the one-to-one matching pairs that record with
    # the visitor bays, and the link between the two records is still the change the team made.
    records = [
        {"text": gold[0]["summary"], "ids": ["a"], "when": times[0], "by": []},
        {"text": "Permits renew in April; visitor bays at the far end.", "ids": ["b", "c"], "when": times[2], "by": []},
    ]

    _, labels, index = judge.record_pairs(conv, records, floor=-1.0)

    assert index == [(0, 1)] and labels == [1]


def test_the_link_head_applies_a_replacement_only_with_the_later_messages_at_hand(monkeypatch):
    head = judge.link_model()
    if head is None:
        pytest.skip("the committed artefact has no link head")
    # At any threshold: the one train-CV chose keeps wrong links rare on the fit committed and moves with the
    # training data (0.38 on the first 40 train conversations, 0.9 on all 80); the head's best candidate is the
    # decision the later one replaces, and without the later messages nothing is applied.
    monkeypatch.setattr(judge, "link_model", lambda: dataclasses.replace(head, threshold=0.0))
    sides = judge.sides([ROOM_NOW, ROOM, LUNCH], [T + timedelta(days=3), T, T + timedelta(hours=1)])

    with_messages = judge.judge(sides[0], sides[1:], [ROOM_SAID])
    without = judge.judge(sides[0], sides[1:], [])

    assert [j.stated for j in with_messages] == [True, False]
    assert with_messages[0].verdict == "supersedes"
    assert not any(j.stated for j in without)


def test_the_artefact_records_the_link_head_and_how_it_was_chosen():
    _, meta = artefacts.load(judge.NAME)
    assert meta["link_version"] == judge.LINK_VERSION
    assert meta["link_features"] == list(judge.LINK_FEATURES)
    assert "links" in meta["train_cv"]
