"""Fusion of the paths' rankings: weighted reciprocal rank fusion, multi-path boost, recency, confidence.

Pure functions over plain data (no database, no Django), so every rule is unit-tested:
score = sum over paths of w_path / (k + rank), * boost (>= 2 paths), * 0.5^(age / half-life), * confidence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

RecordKey = tuple[str, str]  # (record type, record id)


class RecordMeta(Protocol):
    """What fusion reads of a hydrated record (retrieval.records.Record): when it occurred, how sure its
    extractor was."""

    occurred_at: datetime
    confidence: float


@dataclass(frozen=True)
class Fused:
    key: RecordKey
    score: float
    paths: tuple[str, ...]


def recency_factor(occurred_at: datetime, now: datetime, half_life_days: float) -> float:
    age_days = max(0.0, (now - occurred_at).total_seconds() / 86400.0)
    return math.pow(0.5, age_days / half_life_days)


def confidence_factor(confidence: float) -> float:
    # A record the extractor was unsure of still counts, but a confident one outranks it.
    return min(1.0, max(0.1, confidence))


def fuse(
    rankings: Mapping[str, Sequence[RecordKey]],
    meta: Mapping[RecordKey, RecordMeta],
    *,
    weights: Mapping[str, float],
    now: datetime,
    half_life_days: float,
    rrf_k: int = 60,
    multi_path_boost: float = 1.5,
) -> list[Fused]:
    """Fuse ranked lists (best first) into one list of distinct records, best first.

    A record without `meta` (it vanished or fell out of scope between path and hydration) is dropped.
    """
    rrf: dict[RecordKey, float] = {}
    found_by: dict[RecordKey, list[str]] = {}
    for path, ranked in rankings.items():
        weight = weights.get(path, 0.0)
        seen: set[RecordKey] = set()
        for rank, key in enumerate(ranked, start=1):
            if key in seen:  # a path listing a record twice counts it once, at its best rank
                continue
            seen.add(key)
            rrf[key] = rrf.get(key, 0.0) + weight / (rrf_k + rank)
            found_by.setdefault(key, []).append(path)
    fused: list[Fused] = []
    for key, base in rrf.items():
        info = meta.get(key)
        if info is None:
            continue
        paths = tuple(found_by[key])
        score = base * (multi_path_boost if len(paths) >= 2 else 1.0)
        score *= recency_factor(info.occurred_at, now, half_life_days)
        score *= confidence_factor(info.confidence)
        fused.append(Fused(key=key, score=score, paths=paths))
    fused.sort(key=lambda f: (-f.score, f.key))
    return fused
