"""Relevance: does a found record answer the question, and does anything found settle it?

The paths cast a wide net and fusion orders what they caught by agreement, rank and age; neither says
whether a record is about the question. A small logistic model, fitted on the train split's questions
(`python bench/retrieval_qa.py --offline evalsets/train --fit`, retrieval.learn), scores each candidate
from what retrieval knows about it: its cosine similarity to the question and the share of the question's
terms it matches (each also against the best candidate's), its fused rank and the paths that found it, its
kind and status crossed with the question's intent, and whether it names what the question names. The
answer cites the most probable records, and says "no record" when even the most on-topic candidate falls
short of the gate fitted with the model (unless the question is a filter — an id, "my open actions" — whose hits
answer it by definition). The weights are data (retrieval/artefacts/relevance.json, no pickle); the
functions here are pure and unit-tested without a database.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pipeline.offline.artefacts import ArtefactError
from retrieval.fusion import Fused, RecordKey
from retrieval.plan import QueryPlan
from retrieval.records import Record

CITABLE = frozenset({"decision", "action", "signal", "summary"})
# A question someone asked, or talk that settled nothing, is context, never an answer.
UNSETTLED_SIGNALS = frozenset({"question", "discussion"})

ARTEFACT = Path(__file__).resolve().parent / "artefacts" / "relevance.json"
FEATURE_VERSION = "rel-v1"

_TYPES = ("decision", "action", "signal", "summary")
_INTENTS = ("factual_recall", "temporal_context", "accountability", "dependency", "institutional")
_PATHS = ("structured", "semantic", "fulltext", "graph", "summary")
_STATES = ("superseded", "reversed", "open", "done", "blocker", "concern", "update")

FEATURES: tuple[str, ...] = (
    "similarity",
    "coverage",
    "similarity_x_coverage",
    "similarity_below_best",
    "coverage_below_best",
    "fused_share",
    "inverse_rank",
    "paths",
    *(f"path_{p}" for p in _PATHS),
    *(f"type_{t}" for t in _TYPES),
    *(f"state_{s}" for s in _STATES),
    *(f"{i}_x_{t}" for i in _INTENTS for t in _TYPES),
    "confidence",
    "log_words",
    "names_entity",
    "owned_by_named",
    "has_deadline",
)


def citable(record: Record) -> bool:
    """Whether an answer may rest on `record`."""
    if record.type not in CITABLE:
        return False
    return not (record.type == "signal" and record.status in UNSETTLED_SIGNALS)


def is_filter(plan: QueryPlan) -> bool:
    """A question that names ids, a record type, a status or the asker's own records: its hits answer it."""
    return bool(plan.friendly_ids or plan.record_types or plan.statuses)


_VERIFICATION = re.compile(
    r"^\W*(?:so|and|but|ok|okay)?[\s,]*(?:did|do|does|have|has|had|is|are|was|were|will|would|can|could|should|shall)"
    r"(?:n't)?\b",
    re.IGNORECASE,
)


def is_verification(question: str) -> bool:
    """A yes/no question ("did we agree to …?", "is there a …?"): it asks whether one particular thing is on
    record, so a record only about the same subject does not answer it. Such questions get their own gate."""
    return bool(_VERIFICATION.match(question or ""))


def _words(text: str) -> int:
    return len(re.findall(r"\w+", text))


def featurise(
    plan: QueryPlan, fused: Sequence[Fused], records: Mapping[RecordKey, Record]
) -> dict[RecordKey, list[float]]:
    """One feature vector (in FEATURES order) per fused candidate; `fused` is in fusion's order, best first."""
    present = [f for f in fused if f.key in records]
    best_sim = max((records[f.key].similarity or 0.0 for f in present), default=0.0)
    best_cov = max((records[f.key].coverage or 0.0 for f in present), default=0.0)
    top = max((f.score for f in present), default=0.0) or 1.0
    entities = [e.lower() for e in plan.entities if e.strip()]
    owners = set(plan.owner_ids)
    out: dict[RecordKey, list[float]] = {}
    for rank, f in enumerate(present, start=1):
        r = records[f.key]
        sim, cov = r.similarity or 0.0, r.coverage or 0.0
        text = r.text.lower()
        state = r.status or ""
        if r.type == "decision" and r.detail.get("superseded_by"):
            state = "superseded"
        row = [
            sim,
            cov,
            sim * cov,
            best_sim - sim,
            best_cov - cov,
            f.score / top,
            1.0 / rank,
            len(f.paths) / len(_PATHS),
            *(float(p in f.paths) for p in _PATHS),
            *(float(r.type == t) for t in _TYPES),
            *(float(state == s) for s in _STATES),
            *(float(plan.intent == i and r.type == t) for i in _INTENTS for t in _TYPES),
            min(1.0, max(0.0, r.confidence)),
            math.log1p(_words(r.text)),
            float(any(e in text for e in entities)),
            float(bool(owners) and r.detail.get("owner_id") in owners),
            float(bool(r.detail.get("deadline"))),
        ]
        out[f.key] = row
    return out


_SIM, _COV = FEATURES.index("similarity"), FEATURES.index("coverage")


def topicality(record: Record) -> float:
    """How much a record is about the question at all: cosine similarity plus the share of its terms matched."""
    return (record.similarity or 0.0) + (record.coverage or 0.0)


def topicality_of(row: Sequence[float]) -> float:
    """`topicality` from a feature row."""
    return row[_SIM] + row[_COV]


@dataclass(frozen=True)
class Scorer:
    """The fitted model: P(record answers question) = sigmoid(weights . features + bias). `gate`: the least
    topicality of the most on-topic candidate for an answer (`verify_gate` for a yes/no question); `margin`:
    how far below the best record's probability a cited record's may be."""

    weights: tuple[float, ...]
    bias: float
    gate: float
    margin: float
    verify_gate: float | None = None  # the gate of a yes/no question (`is_verification`); None: `gate`
    # The least probability of the record an answer rests on: under it even an on-topic record is too doubtful
    # to answer with, and the answer is "no record" (fitted with the gates).
    answer_floor: float = 0.0
    # Under this probability the record an answer rests on was more often wrong than right (train CV): the
    # answer says it is only the nearest record.
    hedge_below: float = 0.0
    # A yes/no question whose most probable record reaches this probability is answered by it even when no record
    # reaches the yes/no gate: the question asks in other words than the record says it in ("is the ferry still
    # running on Sundays?" of "Sunday sailings stop from May"). None: the gate alone.
    verify_sure: float | None = None
    version: str = FEATURE_VERSION

    def gate_for(self, question: str) -> float:
        """The no-record gate for `question`: a yes/no question has its own, fitted with the other."""
        if self.verify_gate is not None and is_verification(question):
            return self.verify_gate
        return self.gate

    def sure_for(self, question: str) -> float | None:
        """The probability past which `question`'s most probable record answers it whatever the gate (a yes/no
        question's `verify_sure`); None for any other question."""
        return self.verify_sure if is_verification(question) else None

    def probability(self, row: Sequence[float]) -> float:
        z = self.bias + sum(w * x for w, x in zip(self.weights, row, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def to_json(self, **about: object) -> dict[str, object]:
        return {
            "version": self.version,
            "features": list(FEATURES),
            "weights": [round(w, 6) for w in self.weights],
            "bias": round(self.bias, 6),
            "gate": self.gate,
            "verify_gate": self.verify_gate,
            "answer_floor": self.answer_floor,
            "hedge_below": self.hedge_below,
            "verify_sure": self.verify_sure,
            "margin": self.margin,
            **about,
        }


class StaleScorer(ArtefactError):
    """The relevance artefact is missing or was fitted on other features."""


def from_json(data: Mapping[str, object]) -> Scorer:
    if data.get("version") != FEATURE_VERSION or list(data.get("features") or []) != list(FEATURES):
        raise StaleScorer(
            f"{ARTEFACT.name} was fitted on features {data.get('version')!r}, this code computes {FEATURE_VERSION!r}:"
            " refit it (python bench/retrieval_qa.py --offline evalsets/train --fit)"
        )
    return Scorer(
        weights=tuple(float(w) for w in data["weights"]),  # type: ignore[union-attr]
        bias=float(data["bias"]),  # type: ignore[arg-type]
        gate=float(data["gate"]),  # type: ignore[arg-type]
        margin=float(data["margin"]),  # type: ignore[arg-type]
        verify_gate=None if data.get("verify_gate") is None else float(data["verify_gate"]),  # type: ignore[arg-type]
        hedge_below=float(data.get("hedge_below") or 0.0),  # type: ignore[arg-type]
        answer_floor=float(data.get("answer_floor") or 0.0),  # type: ignore[arg-type]
        verify_sure=None if data.get("verify_sure") is None else float(data["verify_sure"]),  # type: ignore[arg-type]
    )


@cache
def load(path: Path = ARTEFACT) -> Scorer:
    """The committed scorer; fails loudly when it is missing or stale (checked at start-up too)."""
    if not path.exists():
        raise StaleScorer(f"{path} is missing: fit it (python bench/retrieval_qa.py --offline evalsets/train --fit)")
    return from_json(json.loads(path.read_text(encoding="utf-8")))


def score(
    plan: QueryPlan, fused: Sequence[Fused], records: Mapping[RecordKey, Record], scorer: Scorer
) -> dict[RecordKey, float]:
    """Each candidate's probability of answering the question."""
    return {key: scorer.probability(row) for key, row in featurise(plan, fused, records).items()}


def rerank(fused: Sequence[Fused], scores: Mapping[RecordKey, float]) -> list[Fused]:
    """`fused` reordered by probability, best first (fusion's order breaks ties)."""
    order = {f.key: i for i, f in enumerate(fused)}
    return sorted(fused, key=lambda f: (-scores.get(f.key, 0.0), order[f.key]))


def settled(
    plan: QueryPlan,
    ranked: Sequence[Record],
    *,
    gate: float,
    scores: Mapping[RecordKey, float] | None = None,
    floor: float = 0.0,
    sure: float | None = None,
) -> list[Record]:
    """The citable records in `ranked`'s order (best first) if the most on-topic of them reaches `gate` (or the
    first, with a vector, reaches the probability `sure`) and the first reaches the probability `floor` (by
    `scores`; when it has a vector); else nothing.

    Two judgements: whether anything found is about the question (topicality, which separates the questions
    with no record a little better than the model's probability does, on train), and whether the record that
    would answer is likely enough to (the probability, which also orders them)."""
    candidates = [r for r in ranked if citable(r)]
    if not candidates:
        return []
    if is_filter(plan):
        return candidates
    best = candidates[0]
    certain = (
        sure is not None and scores is not None and best.similarity is not None and scores.get(best.key, 0.0) >= sure
    )
    if max(topicality(r) for r in candidates) < gate and not certain:
        return []
    # The model was fitted on records with vectors; one not embedded yet (Tier 3 is behind, or the embed slot is
    # down) has no similarity, its probability means little, and topicality alone judges it.
    if scores is not None and best.similarity is not None and scores.get(best.key, 1.0) < floor:
        return []
    return candidates
