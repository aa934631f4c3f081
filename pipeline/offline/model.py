"""The offline engine's learned heads at inference: numpy over the committed artefact `engine.npz`.

Two groups of logistic heads over `features.matrix` rows:
- Tier 1 (`CATEGORIES`): the eight message categories, from the message and the one before it;
- Tier 2 (`EXTRACT_HEADS`): is the message evidence of a decision / of an action (any of its
  messages), does it open an action (its first evidence), and for a message that names someone else,
  is the action's owner the author after all ("I'll ask Sam to…"), and does the message state a
  decision (`decision_anchor`: Tier 1's decision label, judged with the message after it too, where
  the reply shows whether a proposal was taken up); from the message, the one before and after. A
  decision record opens where Tier 1's `decision` head (or its reading of the message's likeliest sentence,
  `Scored.by_sentence`) and `decision_anchor`, weighed equally, say the message states one
  (`DEFAULT_PARAMS["decision_anchor_mix"]`; a head for a decision's first evidence
  was tried: record F1 0.638 train-CV, 0.571 dev); the messages close after it that belong to it are
  chosen by a small learned model over the pair (`Join`).
Each head has a threshold chosen by cross-validation on train (`pipeline.offline.learn`), and the
record builder has a few parameters tuned on train the same way. Fitted by `jeeves train`.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipeline.offline import artefacts, features, restate

NAME = "engine"
CATEGORIES = ("decision", "action", "question", "blocker", "update", "discussion", "reference", "routine")
EXTRACT_HEADS = ("decision_ev", "action_ev", "action_anchor", "owner_is_author", "decision_anchor")
# The learned evidence join (`Join`): what it reads of a decision record and a later message near it
# (`extract._join_row`), in this order.
JOIN_FEATURES = (
    "cosine_anchor",  # MiniLM cosine of the message and the record's first message
    "cosine_nearest",  # the largest cosine of the message and any of the record's messages
    "log_gap_anchor",  # messages since the record's first, since its last (log)
    "log_gap_last",
    "log_minutes_anchor",  # minutes since the record's first message (log)
    "same_author_anchor",
    "author_in_record",  # the message's author wrote one of the record's messages
    "decision_ev",  # the Tier 2 heads' probabilities of the message
    "decision_anchor",
    "decision",  # Tier 1's
    "question",
    "opening_score",  # the message's own opening score (`extract._opening`)
    "log_words",
    "question_mark",
    "quotes_record",  # it quotes (replies to) one of the record's messages
)
DEFAULT_PARAMS = {
    "join_gap": 3,  # messages between a record's last evidence and a message that may join it
    "join_cosine": 0.5,  # MiniLM cosine above which a message restates the record it follows
    "ack_words": 10,  # a reply this short joins the record it answers
    "done_cosine": 0.35,  # a later update by the owner this close to the action completes it
    "decision_anchor_scale": 1.0,  # the anchor heads' thresholds scaled for record-level F1
    # A decision opens on Tier 1's `decision` head and the reply-aware `decision_anchor` head, each as a share of
    # its threshold, weighed equally (`extract._states_decision`). Train-CV record F1 with the fold engines:
    # 0.717 Tier 1 alone, 0.755 the reply-aware head alone, 0.741 both at 0.5 (its scale 0.8), 0.762 at 0.7
    # (scale 0.9); on dev 0.722, 0.704, 0.724 and 0.719: the equal mix is the one that holds on dev.
    "decision_anchor_mix": 0.5,
    "action_anchor_scale": 1.0,
    # A message stating a decision this many messages or fewer after a decision record's last one joins it
    # (`extract._decisions`); chosen by `jeeves train` (`learn.MERGE_GAPS`), off for an engine fitted before it.
    "decision_merge_gap": 0,
    # A message of several sentences also opens a decision on its best sentence's Tier 1 `decision` score
    # (`Scored.by_sentence`): a decision said and then followed by a request or a question ("..., we go with X.
    # Can you book it?") reads as a question or a request as a whole. Decisions F1, train-CV (`jeeves train`, 120
    # conversations) 0.761 -> 0.767 (P 0.792 -> 0.789, R 0.732 -> 0.747), dev 0.750 -> 0.755. Each sentence
    # embedded on its own, or the reply-aware head read by sentence too, did no better (docs/measurements.md).
    "sentence_min_words": 3,
    # A message that lists decisions ("Agreed: (1) ... (2) ...", one per line under "1." or a bullet) gives a record
    # per item whose `decision_ev` score, had the message said it alone, is at least this share of the head's
    # threshold (`extract._stated_parts`; 0 splits none). Train-CV decisions F1 with the fold engines (120
    # conversations): 0.758 none, 0.757 / 0.759 / 0.761 / 0.760 at 0.01 / 0.25 / 0.5 / 1.0; every sentence of
    # a decision message rather than list items only, 0.691 at 1.0 (its sentences restate one decision).
    "decision_split": 0.5,
    # A record's confidence: its head's probability mapped to the chance that such a record is right,
    # sigmoid(a * logit(p) + b), fitted on train's cross-validated records (identity until fitted).
    "decision_cal_a": 1.0,
    "decision_cal_b": 0.0,
    "action_cal_a": 1.0,
    "action_cal_b": 0.0,
}


def logit(p: float) -> float:
    """log(p / (1 - p)), with `p` kept within [0.01, 0.99] (a head's probability is never certain)."""
    p = min(0.99, max(0.01, p))
    return math.log(p / (1 - p))


def calibrated(params: dict[str, float], kind: str, p: float) -> float:
    """The confidence of a `kind` ("decision"/"action") record whose head gave probability `p`."""
    z = params.get(f"{kind}_cal_a", 1.0) * logit(p) + params.get(f"{kind}_cal_b", 0.0)
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


def expected_meta() -> dict[str, Any]:
    """What the artefact must have been fitted for (a mismatch is a stale artefact)."""
    return {
        "feature_version": features.FEATURE_VERSION,
        "embedder": features.EMBEDDER,
        "categories": list(CATEGORIES),
        "extract_heads": list(EXTRACT_HEADS),
        "join_features": list(JOIN_FEATURES),
        "scalars": list(features.SCALARS) + list(features.NEXT_SCALARS),
        "cues": list(features.CUES),
    }


@dataclass
class Heads:
    """Logistic heads sharing one feature space: weights (heads x features), biases, thresholds."""

    names: tuple[str, ...]
    weights: np.ndarray
    bias: np.ndarray
    thresholds: np.ndarray

    def probs(self, rows) -> np.ndarray:
        logits = np.asarray(rows @ self.weights.T, dtype=np.float64) + self.bias
        return 1.0 / (1.0 + np.exp(-np.clip(logits, -30, 30)))

    def threshold(self, name: str) -> float:
        return float(self.thresholds[self.names.index(name)])


@dataclass
class Join:
    """The learned evidence join: does a message close after a decision record belong to it (an agreement, an
    amendment, its evidence), or not (it opens a record of its own, or nothing)? A logistic model over
    `JOIN_FEATURES`, fitted by `jeeves train` on train's conversations as the fold engines score them; a
    message joins when its probability reaches `threshold`."""

    weights: np.ndarray
    bias: float
    threshold: float

    def prob(self, row: Sequence[float]) -> float:
        z = float(np.dot(self.weights, np.asarray(row, dtype=np.float64))) + self.bias
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


@dataclass
class Scored:
    """One window scored: probabilities per head (rows follow the messages), and their embeddings."""

    tier1: np.ndarray
    tier2: np.ndarray
    vectors: np.ndarray
    engine: Engine
    # Per message of several sentences, Tier 1's `decision` probability of its likeliest sentence (0 for one of
    # a single sentence), worked out from `msgs` when `by_sentence` first asks: `Engine.score` with Tier 2 keeps
    # the messages, as extraction scores a window; a window scored only for a Tier 2 head never pays for it.
    sentence_decision: np.ndarray | None = None
    msgs: Sequence[features.Msg] = ()

    def by_sentence(self, i: int) -> float:
        """The `decision` probability of message `i`'s likeliest sentence, read alone (0 when it has one)."""
        if self.sentence_decision is None and self.msgs:
            self.sentence_decision = self.engine.sentence_decision(self.msgs, self.vectors)
        return 0.0 if self.sentence_decision is None else float(self.sentence_decision[i])

    def likeliest_sentence(self, head: str, i: int) -> str | None:
        """Message `i`'s sentence that Tier 1's `head` finds likeliest, read alone (`Engine.sentence_probs`); None
        for a message of one sentence."""
        _, texts, probs = self.engine.sentence_probs(self.msgs, self.vectors, head, only=i)
        return texts[int(np.argmax(probs))] if texts else None

    def p(self, head: str, i: int) -> float:
        if head in CATEGORIES:
            return float(self.tier1[i, CATEGORIES.index(head)])
        return float(self.tier2[i, EXTRACT_HEADS.index(head)])

    def confidence(self, kind: str, p: float) -> float:
        """A record's calibrated confidence (`calibrated` with this engine's parameters), to two places."""
        return round(calibrated(self.engine.params, kind, p), 2)

    def over(self, head: str, i: int, scale: str | None = None) -> bool:
        """Is message `i` over `head`'s threshold (scaled by the parameter `scale`, default `<head>_scale`)?"""
        factor = self.engine.params.get(scale or f"{head}_scale", 1.0)
        return self.p(head, i) >= self.engine.threshold(head) * factor


@dataclass
class Engine:
    tier1: Heads
    tier2: Heads
    params: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_PARAMS))
    join: Join | None = None  # None: the rules of `extract._decisions` join (cosine, decision evidence)

    def threshold(self, head: str) -> float:
        return self.tier1.threshold(head) if head in CATEGORIES else self.tier2.threshold(head)

    def score(self, msgs: Sequence[features.Msg], vectors: np.ndarray | None = None, *, tier2: bool = True) -> Scored:
        if vectors is None:
            vectors = features.embed([features.normalise(m.text) for m in msgs])
        if not msgs:
            empty = np.zeros((0, 1))
            return Scored(empty, empty, vectors, self)
        t1 = self.tier1.probs(features.matrix(msgs, vectors, with_next=False))
        if not tier2:
            return Scored(t1, np.zeros((len(msgs), len(EXTRACT_HEADS))), vectors, self)
        t2 = self.tier2.probs(features.matrix(msgs, vectors, with_next=True))
        return Scored(t1, t2, vectors, self, msgs=msgs)

    def sentence_decision(self, msgs: Sequence[features.Msg], vectors: np.ndarray) -> np.ndarray:
        """`Scored.sentence_decision`: each sentence of `params["sentence_min_words"]` words or more of a message
        that has two or more, scored by Tier 1's `decision` head as if it were the message (after the same message
        before it, with the message's own vector: no sentence is embedded), all in one matrix."""
        best = np.zeros(len(msgs))
        owners, _, probs = self.sentence_probs(msgs, vectors, "decision")
        if owners:
            np.maximum.at(best, owners, probs)
        return best

    def sentence_probs(
        self, msgs: Sequence[features.Msg], vectors: np.ndarray, head: str, only: int | None = None
    ) -> tuple[list[int], list[str], np.ndarray]:
        """(message index, sentence, Tier 1 `head` probability) of each sentence of `params["sentence_min_words"]`
        words or more of every message that has two or more (of message `only`, when given), each read as if it
        were the message, as `sentence_decision` reads them."""
        least = int(self.params.get("sentence_min_words", 0))
        groups, vecs, owners, texts = [], [], [], []
        for i, m in enumerate(msgs if least > 0 else ()):
            if only is not None and i != only:
                continue
            parts = [s for s in restate.sentences(m.text) if len(s.split()) >= least]
            if len(parts) < 2:
                continue
            start = max(0, i - 1)
            for part in parts:
                groups.append([*msgs[start:i], dataclasses.replace(m, text=part)])
                vecs.append(vectors[start : i + 1])
                owners.append(i)
                texts.append(part)
        if not groups:
            return [], [], np.zeros(0)
        return owners, texts, self.tier1.probs(features.last_rows(groups, vecs))[:, CATEGORIES.index(head)]

    def arrays(self) -> dict[str, np.ndarray]:
        # Weights in half precision keep the committed file small; inference is in float32.
        out = {}
        for prefix, heads in (("tier1", self.tier1), ("tier2", self.tier2)):
            out[f"{prefix}_w"] = heads.weights.astype(np.float16)
            out[f"{prefix}_b"] = heads.bias
            out[f"{prefix}_t"] = heads.thresholds
        if self.join is not None:
            out["join_w"] = self.join.weights.astype(np.float32)
            out["join_b"] = np.array([self.join.bias])
            out["join_t"] = np.array([self.join.threshold])
        return out


_lock = threading.Lock()
_loaded: Engine | None = None


def from_arrays(arrays: dict[str, np.ndarray], params: dict[str, float]) -> Engine:
    def heads(prefix: str, names: tuple[str, ...]) -> Heads:
        return Heads(
            names,
            arrays[f"{prefix}_w"].astype(np.float32),
            arrays[f"{prefix}_b"].astype(np.float64),
            arrays[f"{prefix}_t"].astype(np.float64),
        )

    join = (
        Join(arrays["join_w"].astype(np.float64), float(arrays["join_b"][0]), float(arrays["join_t"][0]))
        if "join_w" in arrays
        else None
    )
    return Engine(heads("tier1", CATEGORIES), heads("tier2", EXTRACT_HEADS), {**DEFAULT_PARAMS, **params}, join)


def load() -> Engine:
    """The committed engine (cached per process); raises ArtefactError when missing or stale."""
    global _loaded
    if _loaded is None:
        with _lock:
            if _loaded is None:
                arrays, meta = artefacts.load(NAME, expected_meta())
                _loaded = from_arrays(arrays, meta.get("params", {}))
    return _loaded
