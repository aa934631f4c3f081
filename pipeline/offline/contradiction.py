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

Which earlier decision a new one replaces, applied unasked, is the link head's (the end of this module): a
logistic scorer over those features and what the later decision's messages add, fitted on the engine's own
records of train (each conversation replayed by the fold engine that did not see it) and on the gold
decisions as records, its threshold by grouped cross-validation on train.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
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
    by: frozenset[str] = frozenset()  # who decided it


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
    texts: Sequence[str],
    whens: Sequence[datetime],
    vectors: Sequence[Sequence[float]] | None = None,
    by: Sequence[Sequence[str]] | None = None,
) -> list[Side]:
    """The decisions to judge: their texts, times and bundled MiniLM vectors (`vectors` when the caller has them,
    in that space; else embedded here), and who decided each (`by`)."""
    from pipeline import embedder

    if vectors is None:
        vectors = embedder.embed_local(list(texts)) if texts else []
    rows = np.asarray(vectors, dtype=np.float64) if texts else np.zeros((0, 384))
    deciders = [frozenset(b or ()) for b in by] if by is not None else [frozenset()] * len(texts)
    return [Side(t, w, v, by=b) for t, w, v, b in zip(texts, whens, rows, deciders, strict=True)]


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
    return _linked(newer, candidates, newer_messages, out)


def _linked(newer: Side, candidates: Sequence[Side], messages: Sequence[str], out: list[Judgement]) -> list[Judgement]:
    """With a link head in the artefact, it alone says which earlier candidate `newer` replaces unasked: the
    best-scoring one, when over its threshold and the change was stated (a replacement nobody stated is asked
    about); every other judgement stands, to be asked about, not applied. Without the later decision's messages
    at hand (they left the window) nothing is applied unasked."""
    links = link_model()
    if links is None:
        return out
    out = [replace(j, stated=False) for j in out]
    earlier = [s for s in candidates if s.when <= newer.when]
    stated = bool(messages) and replacement_stated([newer.text, *messages])
    if not earlier or not stated:
        return out
    later = later_of(messages)
    rows = np.vstack([link_features(s, newer, earlier, later) for s in earlier])
    p = links.probabilities(rows)
    best = int(np.argmax(p))
    if p[best] < links.threshold:
        return out
    k = next(i for i, s in enumerate(candidates) if s is earlier[best])
    older = candidates[k]
    out[k] = Judgement(
        verdict="supersedes",
        score=round(float(p[best]), 4),
        stated=True,
        reason=reason(older, newer, "supersedes", stated),
        cosine=float(older.vector @ newer.vector),
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
    # The link head: on train's records as fold engines store them (and the gold decisions as records).
    main = link_pairs(train, fold_records(train, seed), floor)
    links, link_cv = fit_links(main, link_pairs(train, [gold_records(c) for c in train], floor), seed)
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
    train_cv["links"] = link_cv
    dev_figures: dict[str, Any] = {}
    if dev:
        dev_rows, dev_labels, _, _ = labelled_pairs(dev)
        dev_figures = figures(fitted, dev_rows, dev_labels)
        if links is not None:
            from pipeline.offline import model as engine_model

            engine = engine_model.load()
            rows, labels, _, keys, with_records = link_pairs(dev, [engine_records(c, engine) for c in dev], floor)
            p = np.where(stated_rows(rows), links.probabilities(rows), 0.0)
            linked = best_links(p, keys, links.threshold)
            dev_figures["links"] = link_figures(linked, labels, with_records)
    link_arrays = {}
    if links is not None:
        link_arrays = {
            "link_coef": links.coef,
            "link_intercept": np.array([links.intercept]),
            "link_mean": links.mean,
            "link_scale": links.scale,
        }
    artefacts.save(
        NAME,
        {
            "conflict_coef": fitted.conflict_coef,
            "conflict_intercept": np.array([fitted.conflict_intercept]),
            "replace_coef": fitted.replace_coef,
            "replace_intercept": np.array([fitted.replace_intercept]),
            "mean": mean,
            "scale": scale,
            **link_arrays,
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
            "link_version": LINK_VERSION,
            "link_features": list(LINK_FEATURES),
            "link_threshold": links.threshold if links is not None else None,
            "train_cv": train_cv,
            "dev": dev_figures,
        },
    )
    model.cache_clear()
    link_model.cache_clear()
    return {"train_cv": train_cv, "dev": dev_figures}


# --------------------------------------------------------------------------- the link head
#
# Which earlier decision a new one replaces, applied unasked. Fitted on the engine's own records (what the check
# reads when running: restated texts, not the labelled summaries): each train conversation replayed by the fold
# engine that did not see it, each record against the earlier records the check would judge it with, labelled from
# gold `superseded_by` by evidence matching. A record is linked to its best-scoring candidate when that one scores
# over the threshold and the change was stated (a cue in its text or messages); a replacement nobody stated is
# asked about.

LINK_VERSION = "links-v1"
LINK_FEATURES = (
    *FEATURES,
    "messages_cosine",
    "messages_margin",
    "same_decider",
    "latest_earlier",
    "cue_in_messages",
    "log_hours_apart",
)
CANDIDATES = 10  # as pipeline/contradictions.py judges them


@dataclass(frozen=True)
class Later:
    """The later decision's messages as the check sees them (the window's, while it holds them)."""

    texts: tuple[str, ...] = ()
    vector: np.ndarray | None = None  # their MiniLM vectors' mean, normalised


def later_of(texts: Sequence[str]) -> Later:
    """`Later` of the messages' texts (embedded here with the bundled MiniLM)."""
    from pipeline import embedder

    texts = tuple(t for t in texts if t)
    vector = None
    if texts:
        mean = np.asarray(embedder.embed_local(list(texts)), dtype=np.float64).mean(axis=0)
        vector = mean / (np.linalg.norm(mean) or 1.0)
    return Later(texts, vector)


def link_features(older: Side, newer: Side, earlier: Sequence[Side], later: Later) -> np.ndarray:
    """`pair_features` and what the later decision's messages add: how near they are to the earlier decision
    (and by what margin over the other earlier ones), whether they say it replaces something; the same
    decider; whether the earlier is the latest decision before; hours apart."""
    base = pair_features(older, newer, earlier, later.texts)
    others = [s for s in earlier if s is not older]
    if later.vector is not None:
        near = float(older.vector @ later.vector)
        best_other = max((float(s.vector @ later.vector) for s in others), default=0.0)
    else:
        near = float(older.vector @ newer.vector)
        best_other = max((float(s.vector @ newer.vector) for s in others), default=0.0)
    hours = max(0.0, (newer.when - older.when).total_seconds() / 3600)
    extra = [
        near,
        near - best_other,
        float(bool(older.by & newer.by)),
        float(all(s.when <= older.when for s in others)),
        float(replacement_stated(later.texts)),
        math.log1p(hours),
    ]
    return np.concatenate([base, np.array(extra, dtype=np.float64)])


@dataclass(frozen=True)
class LinkModel:
    coef: np.ndarray
    intercept: float
    mean: np.ndarray
    scale: np.ndarray
    threshold: float

    def probabilities(self, rows: np.ndarray) -> np.ndarray:
        return _sigmoid(((rows - self.mean) / self.scale) @ self.coef + self.intercept)


@lru_cache(maxsize=1)
def link_model() -> LinkModel | None:
    """The committed link head, or None when the artefact has none (the judge's stated rule then applies)."""
    arrays, meta = artefacts.load(NAME)
    if meta.get("link_version") != LINK_VERSION or "link_coef" not in arrays:
        return None
    return LinkModel(
        coef=arrays["link_coef"].astype(np.float64),
        intercept=float(arrays["link_intercept"][0]),
        mean=arrays["link_mean"].astype(np.float64),
        scale=arrays["link_scale"].astype(np.float64),
        threshold=float(meta["link_threshold"]),
    )


def _record_sides(records: Sequence[dict]) -> list[Side]:
    return sides([r["text"] for r in records], [r["when"] for r in records], by=[r.get("by", ()) for r in records])


def record_pairs(
    conv: Any, records: Sequence[dict], floor: float
) -> tuple[list[np.ndarray], list[int], list[tuple[int, int]]]:
    """Rows, labels and (older, newer) record indices of each record against the earlier records (store order)
    the check would judge it with: within the candidate similarity, the nearest CANDIDATES. A row is a link
    when the two records carry a gold replacement's evidence (`replaces`)."""
    from pipeline.offline.replay import match

    if len(records) < 2:
        return [], [], []
    gold = conv.gold.get("decisions", [])
    matched = match([set(r["ids"]) for r in records], [set(d.get("evidence", [])) for d in gold])
    gold_of = {i: gold[j]["id"] for i, j in matched}
    replaced = {(d["id"], d["superseded_by"]) for d in gold if d.get("superseded_by")}
    by_id = {m.id: m for m in conv.messages}
    ss = _record_sides(records)
    replacements = gold_replacements(gold)
    rows, labels, index = [], [], []
    index_of = {g: i for i, g in gold_of.items()}
    for j, record in enumerate(records):
        # As the check finds them had the earlier replacements been linked: a record its gold replacement's
        # record (stored before this one) replaced is no longer active, so no candidate.
        gone = {i for i in range(j) if any(gold_of.get(i) == old and index_of.get(new, j) < j for old, new in replaced)}
        near = sorted(((float(ss[k].vector @ ss[j].vector), k) for k in range(j) if k not in gone), reverse=True)
        pool = [k for c, k in near if c >= floor][:CANDIDATES]
        if not pool:
            continue
        messages = [by_id[i] for i in record["ids"] if i in by_id]
        later = later_of([m.text for m in messages])
        for k in pool:
            if ss[k].when > ss[j].when:
                continue  # recorded late: judged the other way round, not a replacement of this record
            earlier = [ss[i] for i in pool if ss[i].when <= ss[j].when]
            rows.append(link_features(ss[k], ss[j], earlier, later))
            labels.append(int(replaces(records[k]["ids"], record["ids"], replacements)))
            index.append((k, j))
    return rows, labels, index


def gold_replacements(decisions: Sequence[dict]) -> list[tuple[set[str], set[str]]]:
    """(the replaced decision's evidence, its replacement's) of each replacement among gold `decisions`."""
    evidence = {d["id"]: set(d.get("evidence", [])) for d in decisions}
    return [(evidence[d["id"]], evidence[d["superseded_by"]]) for d in decisions if d.get("superseded_by") in evidence]


def replaces(older_ids: Sequence[str], newer_ids: Sequence[str], replacements: Sequence[tuple[set, set]]) -> bool:
    """Whether a record on `newer_ids` replacing one on `older_ids` is a gold replacement: the older record carries
    the replaced decision's evidence, the newer its replacement's and none of the replaced one's. By evidence
    overlap, not by the one-to-one matching that counts found decisions: when the engine joins or splits a
    decision's messages, the matching may pair a record with a neighbouring gold decision, and the link between
    the two records that hold the change is still the right one."""
    older, newer = set(older_ids), set(newer_ids)
    return any(older & old and newer & new and not newer & old for old, new in replacements)


def engine_records(conv: Any, engine: Any) -> list[dict]:
    """The decision records `engine` stores replaying `conv` (pipeline/offline/replay.py), in store order: text,
    message ids, time (its latest message's), confidence, deciders."""
    from pipeline.offline import replay

    return _decision_records(conv, replay.run(conv, engine, labels=False).result.decisions)


def _decision_records(conv: Any, decisions: Sequence[Any]) -> list[dict]:
    records = (
        _on_messages(conv, d.source_msg_ids, text=d.summary, confidence=d.confidence, by=d.decided_by)
        for d in decisions
    )
    return [r for r in records if r]


def _on_messages(conv: Any, ids: Sequence[str], **fields: Any) -> dict | None:
    """A record of `fields` on those of `ids` that are `conv`'s messages, timed at its latest one; None when none is."""
    by_id = {m.id: m for m in conv.messages}
    ids = [i for i in ids if i in by_id]
    return {**fields, "ids": ids, "when": max(by_id[i].ts for i in ids)} if ids else None


def replaced_with_records(conv: Any, records: Sequence[dict]) -> int:
    """Gold replacements of `conv` whose two decisions both have a record (matched by evidence)."""
    from pipeline.offline.replay import match

    gold = conv.gold.get("decisions", [])
    got = match([set(r["ids"]) for r in records], [set(d.get("evidence", [])) for d in gold])
    have = {gold[j]["id"] for _, j in got}
    return sum(1 for d in gold if d.get("superseded_by") and {d["id"], d["superseded_by"]} <= have)


def stated_rows(rows: np.ndarray) -> np.ndarray:
    """Rows whose later decision (its text or its messages) says it replaces something: only those are linked."""
    named = list(LINK_FEATURES)
    return (rows[:, named.index("cue_in_messages")] > 0) | (rows[:, named.index("replacement_stated")] > 0)


def best_links(p: np.ndarray, keys: Sequence[Any], threshold: float) -> np.ndarray:
    """Rows linked: of each later record's (`keys`) rows, the best-scoring one when at or over `threshold`."""
    best: dict[Any, int] = {}
    for r, key in enumerate(keys):
        if key not in best or p[r] > p[best[key]]:
            best[key] = r
    out = np.zeros(len(p), dtype=bool)
    for r in best.values():
        out[r] = p[r] >= threshold
    return out


def _link_f1(right: int, wrong: int, replacements: int) -> float:
    """F1 of `right` and `wrong` links against `replacements` that could be linked (both records there)."""
    precision = right / (right + wrong) if right + wrong else 0.0
    recall = right / replacements if replacements else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def link_figures(linked: np.ndarray, labels: np.ndarray, with_records: int) -> dict:
    right, wrong = int((linked & (labels == 1)).sum()), int((linked & (labels == 0)).sum())
    return {
        "linked": f"{right}/{with_records}",
        "wrongly_linked": wrong,
        "f1": round(_link_f1(right, wrong, with_records), 3),
    }


def link_pairs(conversations: Sequence[Any], records: Sequence[Sequence[dict]], floor: float) -> tuple:
    """(rows, labels, groups, keys, with_records) over conversations and their engine records."""
    rows, labels, groups, keys, with_records = [], [], [], [], 0
    for conv, recs in zip(conversations, records, strict=True):
        r, lab, index = record_pairs(conv, recs, floor)
        rows += r
        labels += lab
        groups += [conv.id] * len(r)
        keys += [(conv.id, j) for _, j in index]
        with_records += replaced_with_records(conv, recs)
    width = len(LINK_FEATURES)
    return np.vstack(rows) if rows else np.zeros((0, width)), np.array(labels), np.array(groups), keys, with_records


def gold_records(conv: Any) -> list[dict]:
    """The gold decisions of `conv` as records (their labelled summaries, on their evidence), in time order."""
    records = [
        _on_messages(conv, d.get("evidence", []), text=d["summary"], by=d.get("decided_by") or [])
        for d in conv.gold.get("decisions", [])
    ]
    return sorted((r for r in records if r), key=lambda r: r["when"])


LINK_REPEATS = 3  # grouped CV splits, the conversations shuffled differently each time: a choice not of one split


def fit_links(main: tuple, extra: tuple, seed: int) -> tuple[LinkModel | None, dict]:
    """The link head, fitted on `main` (`link_pairs` of the engine's records) and `extra` (of the gold
    decisions as records: clean labels, other wording); C and the threshold by 5-fold cross-validation grouped by
    conversation, repeated LINK_REPEATS times over differently shuffled folds and scored on `main` only: the best
    F1 of linked replacements (summed over the repeats) among the thresholds that keep wrongly linked ones at most
    MAX_WRONGLY_APPLIED of those linked (a link changes the record unasked).
    Returns (LinkModel or None when no threshold does, train-CV figures: per split, on average)."""
    from sklearn.linear_model import LogisticRegression

    rows, labels, groups, keys, with_records = main
    all_rows, all_labels = np.vstack([rows, extra[0]]), np.concatenate([labels, extra[1]])
    mean, scale = all_rows.mean(axis=0), all_rows.std(axis=0) + 1e-6
    grid = np.round(np.arange(0.3, 0.96, 0.02), 2)
    names = sorted(set(groups) | set(extra[2]))
    best: tuple | None = None
    for c in (0.03, 0.1, 0.3, 1.0):
        scored = []
        for repeat in range(LINK_REPEATS):
            order = np.random.default_rng(seed + repeat).permutation(len(names))
            fold_of = {names[k]: r % 5 for r, k in enumerate(order)}
            folds, extra_folds = np.array([fold_of[g] for g in groups]), np.array([fold_of[g] for g in extra[2]])
            p = np.zeros(len(labels))
            for fold in range(5):
                x = np.vstack([rows[folds != fold], extra[0][extra_folds != fold]])
                y = np.concatenate([labels[folds != fold], extra[1][extra_folds != fold]])
                head = LogisticRegression(C=c, max_iter=5000, random_state=seed).fit((x - mean) / scale, y)
                p[folds == fold] = head.predict_proba((rows[folds == fold] - mean) / scale)[:, 1]
            scored.append(np.where(stated_rows(rows), p, 0.0))
        for t in grid:
            linked = [best_links(p, keys, float(t)) for p in scored]
            right = sum(int((k & (labels == 1)).sum()) for k in linked)
            wrong = sum(int((k & (labels == 0)).sum()) for k in linked)
            if wrong > MAX_WRONGLY_APPLIED * (right + wrong):
                continue
            f1 = _link_f1(right, wrong, LINK_REPEATS * with_records)
            if best is None or f1 > best[0] + 1e-9:
                best = (f1, c, float(t), right, wrong)
    if best is None:
        return None, {"chosen": "none: no threshold keeps wrong links rare"}
    f1, c, threshold, right, wrong = best
    head = LogisticRegression(C=c, max_iter=5000, random_state=seed).fit((all_rows - mean) / scale, all_labels)
    fitted = LinkModel(head.coef_[0], float(head.intercept_[0]), mean, scale, threshold)
    return fitted, {
        "chosen": f"C={c}, link at {threshold} ({LINK_REPEATS} shuffled 5-fold splits by conversation)",
        "linked": f"{right / LINK_REPEATS:.1f}/{with_records}",
        "wrongly_linked": round(wrong / LINK_REPEATS, 1),
        "f1": round(f1, 3),
    }


def fold_records(train: Sequence[Any], seed: int) -> list[list[dict]]:
    """Each train conversation's records as the engine of the fold that did not see it stores them (the fold
    engines and joins fitted as `jeeves train` fits them for its cross-validation, with the committed engine's
    record-builder parameters): the texts the check reads on conversations the engine never saw."""
    from pipeline.offline import learn
    from pipeline.offline import model as engine_model

    runs = learn.cv_runs(list(train), seed)
    if runs is not None:  # `jeeves train` has just replayed them, with these fold engines
        return [_decision_records(run.conversation, run.result.decisions) for run in runs]
    _, meta = artefacts.load(engine_model.NAME)
    by_index = learn.replay_engines(list(train), meta, seed)
    return [engine_records(conv, by_index[k]) for k, conv in enumerate(train)]
