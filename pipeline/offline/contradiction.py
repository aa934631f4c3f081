"""The offline engine's contradiction judge: does a later decision contradict an earlier one, replace it,
or neither (compatible)?

A learned pair scorer: multinomial logistic regression over general features of the two decisions,
fitted by `jeeves train` on the labelled pairs of `evalsets/train` (contradiction pairs, decisions
superseded or reversed by a later one, every other pair of a conversation as compatible); inference
is numpy over the committed artefact. Features, none of them a phrase of the evalset:

- MiniLM similarity of the two texts, and whether the earlier is the later's nearest earlier
  decision (a replacement usually targets the closest earlier choice), by what margin;
- the same subject: content words they share;
- a different value or polarity: figures that differ, one negated where the other is not;
- time apart;
- whether the later decision's messages say it replaces something (general cues such as
  "instead", "scrap that", "changing the plan"): the team said so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np

from ground.wording import joined
from pipeline.offline import artefacts

NAME = "contradiction"
FEATURE_VERSION = "pairs-v1"
EMBEDDER = "all-MiniLM-L6-v2"
FEATURES = (
    "cosine",
    "nearest_earlier",
    "inverse_rank",
    "margin_over_next",
    "shared_words_jaccard",
    "shared_words",
    "figures_differ",
    "new_figures",
    "polarity_differs",
    "replacement_stated",
    "log_days_apart",
    "cosine_x_stated",
    "cosine_x_figures",
)

_STOP = frozenset(
    """a an the and or but if then of to in on at for with by from is are was were be been being it its this that
    these those we our us you your they their them he she his her i me my as so not no do does did done will would
    can could should shall may might must have has had all any each per only also just than too very into over under
    up down out about after before again same other such own more most some get gets got let lets let's one two
    team agreed decided decision settled going""".split()
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_FIGURE = re.compile(r"\d+(?:[.,:]\d+)?")
_NEGATION = re.compile(
    r"\b(?:no|not|never|none|nobody|nothing|without|stop|stops|stopped|off|drop|dropped|remove|removed|cancel"
    r"|cancelled|canceled|\w+n't)\b"
)
# General ways of saying that a new choice replaces an earlier one.
_REPLACEMENT = re.compile(
    r"\b(?:instead|rather than|in place of|scrap(?:ped)?|change of plan|chang(?:e|ed|ing) the plan|new plan"
    r"|plan(?:'s| has| is)? changed|switch(?:ed|ing)? (?:to|over|back)|no longer|not any ?more|revert(?:ed|ing)?"
    r"|revers(?:e|ed|ing)|undo|undone|roll(?:ed|ing)? (?:it |that )?back|go(?:ing)? back to|after all"
    r"|on second thoughts?|actually|mov(?:e|ed|es|ing) (?:it |that )?to|pushed (?:back|out|to)|postpone[sd]?"
    r"|brought forward|replac(?:e|es|ed|ing)|overrid(?:e|es|ing)|supersed(?:e|es|ed|ing)|lift(?:ed|ing)?"
    r"|reinstat(?:e|ed|ing)|restor(?:e|ed|ing)|forget (?:the|that|what)|correction)\b"
)


@dataclass(frozen=True)
class Side:
    """One decision as the judge sees it: its stored text, when it was decided, its MiniLM vector."""

    text: str
    when: datetime
    vector: np.ndarray


@dataclass(frozen=True)
class Judgement:
    verdict: str  # one of LABELS
    score: float  # probability of the verdict (for compatible: of no conflict)
    stated: bool
    reason: str
    cosine: float


def content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.casefold()) if w not in _STOP and len(w) > 2]


def _stems(text: str) -> set[str]:
    # A five-letter prefix joins the forms of a word (deploy/deploys/deployment) without a stemmer.
    return {w[:5] for w in content_words(text)}


def replacement_stated(texts: Sequence[str]) -> bool:
    """The messages say that a choice replaces an earlier one ("instead", "scrap that", "changing the plan")."""
    return any(_REPLACEMENT.search(t.casefold()) for t in texts if t)


def _negated(text: str) -> bool:
    return bool(_NEGATION.search(text.casefold()))


def pair_features(older: Side, newer: Side, earlier: Sequence[Side], newer_messages: Sequence[str]) -> np.ndarray:
    """The feature row of (older, newer). `earlier`: every decision known before `newer` (older included)."""
    cosine = float(older.vector @ newer.vector)
    others = sorted((float(s.vector @ newer.vector) for s in earlier if s is not older), reverse=True)
    rank = sum(1 for c in others if c > cosine)
    margin = cosine - (others[0] if others else 0.0)
    a, b = _stems(older.text), _stems(newer.text)
    shared = len(a & b)
    fig_a, fig_b = set(_FIGURE.findall(older.text)), set(_FIGURE.findall(newer.text))
    figures_differ = float(bool(fig_a) and bool(fig_b) and fig_a != fig_b)
    stated = float(replacement_stated([newer.text, *newer_messages]))
    days = max(0.0, (newer.when - older.when).total_seconds() / 86400)
    return np.array(
        [
            cosine,
            float(rank == 0),
            1.0 / (1 + rank),
            margin,
            shared / max(1, len(a | b)),
            min(shared, 5) / 5,
            figures_differ,
            float(bool(fig_a) and bool(fig_b - fig_a)),
            float(_negated(older.text) != _negated(newer.text)),
            stated,
            math.log1p(days),
            cosine * stated,
            cosine * figures_differ,
        ],
        dtype=np.float64,
    )


def reason(older: Side, newer: Side, verdict: str, stated: bool) -> str:
    """One synthesised line saying why the pair was flagged (shared subject, differing figures, polarity)."""
    mine = set(content_words(older.text))
    shared = list(dict.fromkeys(w for w in content_words(newer.text) if w in mine))[:3]
    parts = []
    if shared:
        parts.append(f"both concern {joined(shared)}")
    fig_a, fig_b = _FIGURE.findall(older.text), _FIGURE.findall(newer.text)
    if fig_a and fig_b and set(fig_a) != set(fig_b):
        parts.append(f"the figures differ ({', '.join(fig_a[:3])} against {', '.join(fig_b[:3])})")
    elif _negated(older.text) != _negated(newer.text):
        parts.append("one rules out what the other allows")
    if verdict == "supersedes":
        parts.append("the later was put as a change of course" if stated else "the later appears to replace it")
    if not parts:
        return "The two appear to settle the same matter differently."
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


# --------------------------------------------------------------------------- inference


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


@dataclass(frozen=True)
class Model:
    """Two logistic heads over standardised features: does the pair conflict at all, and if it does, does
    the later replace the earlier (rather than merely contradict it)."""

    conflict_coef: np.ndarray
    conflict_intercept: float
    replace_coef: np.ndarray
    replace_intercept: float
    mean: np.ndarray
    scale: np.ndarray
    threshold: float  # P(conflict) at which a pair is flagged
    apply_threshold: float  # P(conflict) at which a stated replacement is applied without asking
    candidate_cosine: float  # MiniLM similarity below which a pair is not worth judging

    def probabilities(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(P(conflict), P(replaces | conflict)) of each row."""
        x = (rows - self.mean) / self.scale
        return _sigmoid(x @ self.conflict_coef + self.conflict_intercept), _sigmoid(
            x @ self.replace_coef + self.replace_intercept
        )

    def decide(self, conflict: float, replaces: float, cue: bool) -> tuple[str, float, bool]:
        """(verdict, score, stated): compatible below the threshold, else supersedes or contradicts; a
        replacement counts as stated when the messages say so and the judge is sure enough to act on it."""
        if conflict < self.threshold:
            return "compatible", 1.0 - conflict, False
        if replaces >= 0.5:
            return "supersedes", conflict, cue and conflict >= self.apply_threshold
        return "contradicts", conflict, False


@lru_cache(maxsize=1)
def model() -> Model:
    """The committed artefact (ArtefactError when missing or fitted for other features)."""
    arrays, meta = artefacts.load(NAME, expect={"feature_version": FEATURE_VERSION, "embedder": EMBEDDER})
    return Model(
        conflict_coef=arrays["conflict_coef"].astype(np.float64),
        conflict_intercept=float(arrays["conflict_intercept"][0]),
        replace_coef=arrays["replace_coef"].astype(np.float64),
        replace_intercept=float(arrays["replace_intercept"][0]),
        mean=arrays["mean"].astype(np.float64),
        scale=arrays["scale"].astype(np.float64),
        threshold=float(meta["threshold"]),
        apply_threshold=float(meta["apply_threshold"]),
        candidate_cosine=float(meta["candidate_cosine"]),
    )


def sides(
    texts: Sequence[str], whens: Sequence[datetime], vectors: Sequence[Sequence[float]] | None = None
) -> list[Side]:
    """The decisions to judge: their texts, times and bundled MiniLM vectors (`vectors` when the caller has them,
    in that space; else embedded here)."""
    from pipeline import embedder

    if vectors is None:
        vectors = embedder.embed_local(list(texts)) if texts else []
    rows = np.asarray(vectors, dtype=np.float64) if texts else np.zeros((0, 384))
    return [Side(t, w, v) for t, w, v in zip(texts, whens, rows, strict=True)]


def judge(newer: Side, candidates: Sequence[Side], newer_messages: Sequence[str]) -> list[Judgement]:
    """A judgement of each candidate against `newer` (a decision just recorded). A candidate decided after
    `newer` (recorded late) is judged the other way round: it is then the newer of the pair."""
    m = model()
    everyone = [newer, *candidates]
    rows, meta = [], []
    for cand in candidates:
        older, later = (cand, newer) if cand.when <= newer.when else (newer, cand)
        messages = newer_messages if later is newer else ()
        earlier = [s for s in everyone if s is not later and s.when <= later.when]
        rows.append(pair_features(older, later, earlier, messages))
        meta.append((older, later, replacement_stated([later.text, *messages])))
    if not rows:
        return []
    out = []
    for conflict, replaces, (older, later, cue) in zip(*m.probabilities(np.vstack(rows)), meta, strict=True):
        verdict, score, stated = m.decide(float(conflict), float(replaces), cue)
        out.append(
            Judgement(
                verdict=verdict,
                score=round(score, 4),
                stated=stated,
                reason=reason(older, later, verdict, cue),
                cosine=float(older.vector @ later.vector),
            )
        )
    return out


# --------------------------------------------------------------------------- training (jeeves train)


@dataclass
class _Pairs:
    rows: list[np.ndarray]
    labels: list[int]
    groups: list[str]
    clean: list[bool]  # the row uses the labelled summaries (not the raw evidence variant)


def _decisions(conv: Any) -> list[tuple[dict, datetime, str]]:
    by_id = {m.id: m for m in conv.messages}
    out = []
    for d in conv.gold.get("decisions", []):
        evidence = [by_id[i] for i in d.get("evidence", []) if i in by_id]
        if evidence:
            out.append((d, max(m.ts for m in evidence), " ".join(m.text for m in evidence)))
    return out


def _conversation_pairs(conv: Any, pairs: _Pairs, *, raw_variant: bool) -> None:
    found = _decisions(conv)
    if len(found) < 2:
        return
    gold = {tuple(p) for p in conv.gold.get("contradictions", [])}
    replaced = {(d["id"], d["superseded_by"]) for d, _, _ in found if d.get("superseded_by")}
    by_id = {m.id: m for m in conv.messages}
    variants = [(True, [d["summary"] for d, _, _ in found])]
    if raw_variant:  # restated records sit between a labelled summary and the raw message: fit on both
        variants.append((False, [text for _, _, text in found]))
    for clean, texts in variants:
        ss = sides(texts, [when for _, when, _ in found])
        order = sorted(range(len(found)), key=lambda k: (found[k][1], k))
        position = {k: r for r, k in enumerate(order)}
        for j in range(len(found)):
            later = found[j][0]
            messages = [by_id[i].text for i in later.get("evidence", []) if i in by_id]
            earlier_ids = [k for k in range(len(found)) if position[k] < position[j]]
            for i in earlier_ids:
                a = found[i][0]["id"]
                label = 2 if (a, later["id"]) in replaced else 1 if {(a, later["id"]), (later["id"], a)} & gold else 0
                pairs.rows.append(pair_features(ss[i], ss[j], [ss[k] for k in earlier_ids], messages))
                pairs.labels.append(label)
                pairs.groups.append(conv.id)
                pairs.clean.append(clean)


def labelled_pairs(conversations: Sequence[Any], *, raw_variant: bool = False) -> tuple[np.ndarray, ...]:
    """(rows, labels, groups, clean) of every ordered pair of gold decisions in each conversation."""
    pairs = _Pairs([], [], [], [])
    for conv in conversations:
        _conversation_pairs(conv, pairs, raw_variant=raw_variant)
    return (
        np.vstack(pairs.rows),
        np.array(pairs.labels),
        np.array(pairs.groups),
        np.array(pairs.clean),
    )


def figures(
    model: Model, rows: np.ndarray, labels: np.ndarray, scored: tuple[np.ndarray, np.ndarray] | None = None
) -> dict:
    """How the judge does on labelled pairs: gold pairs flagged, false flags, replacements applied unasked.
    `scored`: the rows' (P(conflict), P(replaces)) when not the model's own (cross-validation)."""
    cue = rows[:, FEATURES.index("replacement_stated")] > 0
    verdicts = [
        model.decide(float(c), float(r), bool(s)) if row[0] >= model.candidate_cosine else ("compatible", 0.0, False)
        for c, r, s, row in zip(*(scored or model.probabilities(rows)), cue, rows, strict=True)
    ]
    flagged = np.array([v[0] != "compatible" for v in verdicts])
    applied = np.array([v[0] == "supersedes" and v[2] for v in verdicts])
    return {
        "pairs": len(labels),
        "contradictions_flagged": f"{int((flagged & (labels == 1)).sum())}/{int((labels == 1).sum())}",
        "replacements_flagged": f"{int((flagged & (labels == 2)).sum())}/{int((labels == 2).sum())}",
        "false_flags": int((flagged & (labels == 0)).sum()),
        "replacements_applied_unasked": f"{int((applied & (labels == 2)).sum())}/{int((labels == 2).sum())}",
        "wrongly_applied": int((applied & (labels != 2)).sum()),
    }


def _f1(flagged: np.ndarray, truth: np.ndarray) -> float:
    tp = float((flagged & truth).sum())
    precision = tp / flagged.sum() if flagged.sum() else 0.0
    recall = tp / truth.sum() if truth.sum() else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


# An applied replacement changes the record unasked: at most this share of them may be wrong (train CV).
MAX_WRONGLY_APPLIED = 0.15


def _fit(x: np.ndarray, labels: np.ndarray, c: float, seed: int) -> tuple[Any, Any]:
    from sklearn.linear_model import LogisticRegression

    conflict = LogisticRegression(C=c, max_iter=5000, random_state=seed).fit(x, labels > 0)
    pairs = labels > 0
    replace = LogisticRegression(C=c, max_iter=5000, random_state=seed).fit(x[pairs], labels[pairs] == 2)
    return conflict, replace


def train(train: Sequence[Any], dev: Sequence[Any], seed: int) -> dict:
    """Fit both heads on train's pairs (C, the flag threshold and the apply threshold by 5-fold
    cross-validation grouped by conversation), measure on dev's gold decisions, save the artefact."""
    from sklearn.model_selection import GroupKFold

    from pipeline.offline import training

    rows, labels, groups, clean = labelled_pairs(train, raw_variant=True)
    mean, scale = rows.mean(axis=0), rows.std(axis=0) + 1e-6
    x = (rows - mean) / scale
    cue = rows[:, FEATURES.index("replacement_stated")] > 0
    grid = np.round(np.arange(0.2, 0.85, 0.05), 2)
    best: tuple[float, float, float, np.ndarray, np.ndarray] | None = None
    for c in (0.1, 0.3, 1.0, 3.0):
        conflict, replaces = np.zeros(len(labels)), np.zeros(len(labels))
        for fit, test in GroupKFold(n_splits=5).split(x, labels, groups):
            heads = _fit(x[fit], labels[fit], c, seed)
            conflict[test] = heads[0].predict_proba(x[test])[:, 1]
            replaces[test] = heads[1].predict_proba(x[test])[:, 1]
        for t in grid:
            # Chosen on the labelled summaries' rows (the raw-message variant only widens the fit).
            score = _f1(conflict[clean] >= t, labels[clean] > 0)
            if best is None or score > best[0] + 1e-9:
                best = (score, c, float(t), conflict, replaces)
    assert best is not None
    f1, c, threshold, conflict, replaces = best
    apply_threshold = 1.01  # never, unless some threshold keeps wrongly applied replacements rare
    for t in grid[grid >= threshold]:
        applied = (conflict >= t) & (replaces >= 0.5) & cue & clean
        if applied.sum() and (applied & (labels != 2)).sum() <= MAX_WRONGLY_APPLIED * applied.sum():
            apply_threshold = float(t)
            break
    positives = rows[labels > 0, FEATURES.index("cosine")]
    # Recall first: a pair below this similarity is never judged; 95 % of train's conflicting pairs lie above.
    floor = math.floor(float(np.percentile(positives, 5)) * 20) / 20
    heads = _fit(x, labels, c, seed)
    fitted = Model(
        heads[0].coef_[0], float(heads[0].intercept_[0]), heads[1].coef_[0], float(heads[1].intercept_[0]),
        mean, scale, threshold, apply_threshold, floor,
    )  # fmt: skip
    train_cv = {
        "chosen": f"C={c}, flag at {threshold}, apply a stated replacement at {apply_threshold},"
        f" candidate cosine {floor}",
        "f1": round(f1, 3),
        **figures(fitted, rows[clean], labels[clean], scored=(conflict[clean], replaces[clean])),
    }
    dev_figures: dict[str, Any] = {}
    if dev:
        dev_rows, dev_labels, _, _ = labelled_pairs(dev)
        dev_figures = figures(fitted, dev_rows, dev_labels)
    artefacts.save(
        NAME,
        {
            "conflict_coef": fitted.conflict_coef,
            "conflict_intercept": np.array([fitted.conflict_intercept]),
            "replace_coef": fitted.replace_coef,
            "replace_intercept": np.array([fitted.replace_intercept]),
            "mean": mean,
            "scale": scale,
        },
        {
            **training.common_meta(train, seed),
            "purpose": "contradiction / supersede judge over pairs of decisions (labelled pairs of gold decisions;"
            " dev figures on dev's gold decisions)",
            "embedder": EMBEDDER,
            "feature_version": FEATURE_VERSION,
            "features": list(FEATURES),
            "threshold": threshold,
            "apply_threshold": apply_threshold,
            "candidate_cosine": floor,
            "train_cv": train_cv,
            "dev": dev_figures,
        },
    )
    model.cache_clear()
    return {"train_cv": train_cv, "dev": dev_figures}
