"""Fusion rules: weighted RRF, the multi-path boost, recency decay, confidence weight, dedup."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from retrieval.fusion import fuse, recency_factor

NOW = datetime(2026, 5, 1, tzinfo=UTC)
W = {"structured": 1.0, "semantic": 1.0, "fulltext": 0.8, "graph": 0.6, "summary": 0.5}


@dataclass(frozen=True)
class Meta:  # what fusion reads of a record (retrieval.fusion.RecordMeta)
    occurred_at: datetime
    confidence: float


def meta(days_ago: float = 0, confidence: float = 1.0) -> Meta:
    return Meta(occurred_at=NOW - timedelta(days=days_ago), confidence=confidence)


def run(rankings, metas, **kw):
    return fuse(rankings, metas, weights=kw.pop("weights", W), now=NOW, half_life_days=30, **kw)


A, B, C = ("decision", "a"), ("action", "b"), ("signal", "c")


def test_weighted_rrf_with_k_60():
    fused = run({"semantic": [A, B]}, {A: meta(), B: meta()}, multi_path_boost=1.0)
    assert fused[0].score == pytest.approx(1.0 / 61)
    assert fused[1].score == pytest.approx(1.0 / 62)
    fused = run({"summary": [A]}, {A: meta()})
    assert fused[0].score == pytest.approx(0.5 / 61)


def test_multi_path_boost_of_one_and_a_half():
    fused = run({"semantic": [A, B], "fulltext": [B]}, {A: meta(), B: meta()})
    by_key = {f.key: f for f in fused}
    assert by_key[B].score == pytest.approx((1.0 / 62 + 0.8 / 61) * 1.5)
    assert by_key[B].paths == ("semantic", "fulltext")
    assert fused[0].key == B  # found twice beats ranked first once


def test_recency_decay_halves_per_half_life():
    assert recency_factor(NOW - timedelta(days=30), NOW, 30) == pytest.approx(0.5)
    assert recency_factor(NOW - timedelta(days=60), NOW, 30) == pytest.approx(0.25)
    assert recency_factor(NOW + timedelta(days=1), NOW, 30) == 1.0  # the future is not rewarded
    fused = run({"semantic": [A, B]}, {A: meta(days_ago=60), B: meta(days_ago=0)})
    assert [f.key for f in fused] == [B, A]
    assert fused[1].score == pytest.approx(1.0 / 61 * 0.25)


def test_confidence_weight():
    fused = run({"semantic": [A, B]}, {A: meta(confidence=0.3), B: meta(confidence=0.9)})
    assert [f.key for f in fused] == [B, A]
    assert fused[1].score == pytest.approx(1.0 / 61 * 0.3)


def test_dedup_one_entry_per_record_and_best_rank_within_a_path():
    fused = run({"semantic": [A, A, B], "graph": [A]}, {A: meta(), B: meta()})
    assert [f.key for f in fused].count(A) == 1
    a = next(f for f in fused if f.key == A)
    assert a.score == pytest.approx((1.0 / 61 + 0.6 / 61) * 1.5)
    b = next(f for f in fused if f.key == B)
    assert b.score == pytest.approx(1.0 / 63)  # its rank is still its position in the path's list


def test_records_without_meta_are_dropped_and_unknown_paths_weigh_nothing():
    fused = run({"semantic": [A, C], "mystery": [B]}, {A: meta(), B: meta()})
    assert [f.key for f in fused] == [A, B]
    assert fused[1].score == 0.0
