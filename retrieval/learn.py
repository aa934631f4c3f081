"""Fitting the relevance model (retrieval.relevance) on a labelled split's questions.

`collect` asks every question of a conversation whose records are in the database (retrieval only, no
answer) and keeps, per question, each candidate's features and whether it is an expected record (its
source overlaps the evidence of a gold record the question expects, or the question's own evidence, as
the evalsets README scores answers). `fit` fits a logistic regression on those rows, chooses its
regularisation by grouped cross-validation (folds by conversation: the best top-1 + top-5 with every
question answered), then replays the answer step on the out-of-fold probabilities to choose the no-record
gates (over the best candidate's topicality, one for yes/no questions and one for the rest, and a floor
under the probability of the record an answer rests on: the harmonic mean of answerable questions with an
expected record cited and no-record questions declined, both goals at once), the widest citing margin
whose extra citations still find expected records, the gates again at that margin, and the probability
under which an answer says it rests only on the nearest record, and the probability past which a yes/no
question's most probable record answers it whatever the yes/no gate (`choose_sure`; `tune_sure` chooses it for
a fitted scorer on questions it was not fitted on). Run on train only (`python bench/retrieval_qa.py --offline
evalsets/train --fit`, `--tune-sure FIRST`); dev is for reporting.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval import relevance
from retrieval.answer import MAX_CITED
from retrieval.config import RetrievalConfig
from retrieval.relevance import FEATURES, Scorer

SEED = 7
CANDIDATES = 20  # per question: more than are ever cited, so the model learns to tell the near misses apart
GATES = tuple(round(0.05 * i, 2) for i in range(6, 31))  # over topicality: cosine + term coverage, 0..2
MARGINS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)
FLOORS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)  # over the probability of the record an answer would rest on


@dataclass
class Question:
    conversation: str
    no_record: bool
    is_filter: bool
    rows: list[list[float]]  # one per candidate, fusion's order
    citable: list[bool]
    expected: list[bool]
    texts: list[str] = dataclasses.field(default_factory=list)  # the candidates' kind and text, for study only
    question: str = ""


def collect(conv: dict[str, Any]) -> list[Question]:
    """Ask each of `conv`'s questions in its channel (the records must be in the database), keep the candidates."""
    from retrieval import evaluation
    from retrieval.ask import retrieve
    from retrieval.scope import RetrievalScope

    cfg = dataclasses.replace(RetrievalConfig.from_settings(), top_n=CANDIDATES)
    neutral = Scorer(weights=(0.0,) * len(FEATURES), bias=0.0, gate=0.0, margin=0.0)
    scope = RetrievalScope.for_asker(conv["channel"]["id"], evaluation.asker(conv))
    evidence = evaluation.evidence(conv)
    out = []
    for q in conv["gold"]["questions"]:
        found = retrieve(q["q"], scope, cfg, scorer=neutral)
        wanted = evaluation.wanted(q, evidence)
        keys = [f.key for f in found.fused if f.key in found.features]
        records = [found.records[k] for k in keys]
        out.append(
            Question(
                conversation=conv["id"],
                no_record=not q["expected"],
                is_filter=relevance.is_filter(found.plan),
                rows=[found.features[k] for k in keys],
                citable=[relevance.citable(r) for r in records],
                expected=[bool(evaluation.record_ids(r) & wanted) for r in records],
                texts=[f"{r.type}/{r.status}: {r.text}" for r in records],
                question=q["q"],
            )
        )
    return out


def _fit_lr(x: np.ndarray, y: np.ndarray, c: float) -> tuple[np.ndarray, float]:
    """Logistic regression on standardised features, returned as weights and bias on the raw features."""
    from sklearn.linear_model import LogisticRegression

    mean, std = x.mean(axis=0), x.std(axis=0)
    std[std == 0] = 1.0
    model = LogisticRegression(C=c, class_weight="balanced", max_iter=2000, random_state=SEED)
    model.fit((x - mean) / std, y)
    w = model.coef_[0] / std
    return w, float(model.intercept_[0] - (w * mean).sum())


def _probabilities(w: np.ndarray, b: float, rows: Sequence[Sequence[float]]) -> list[float]:
    if len(rows) == 0:
        return []
    z = np.clip(np.asarray(rows, dtype=float) @ w + b, -30, 30)
    return list(1.0 / (1.0 + np.exp(-z)))


def replay(
    questions: Sequence[Question],
    probs: Sequence[Sequence[float]],
    gate: float,
    margin: float,
    verify_gate: float | None = None,
    floor: float = 0.0,
    verify_sure: float | None = None,
) -> dict:
    """The answer step on given probabilities: no record unless the most on-topic citable candidate reaches
    `gate` (`verify_gate` for a yes/no question, when given; or, for a yes/no question, the most probable one
    `verify_sure`) and the most probable one `floor`, or the question is a filter; else the most probable, and
    those within `margin` of it. Returns top-5 (answerable, an expected record cited), top-1, cited precision,
    no-record right."""
    answerable = right_none = none = top5 = top1 = cited = cited_ok = 0
    for q, p in zip(questions, probs, strict=True):
        order = sorted((i for i in range(len(p)) if q.citable[i]), key=lambda i: -p[i])
        answers = bool(order) and (q.is_filter or _answers(q, p, order, gate, verify_gate, floor, verify_sure))
        chosen = []
        if answers:
            chosen = [i for i in order if p[i] >= p[order[0]] - margin][:MAX_CITED]
        if q.no_record:
            none += 1
            right_none += not chosen
            continue
        answerable += 1
        hits = [q.expected[i] for i in chosen]
        top5 += any(hits)
        top1 += bool(hits and hits[0])
        cited += len(hits)
        cited_ok += sum(hits)
    return {
        "top5": top5 / max(1, answerable),
        "top1": top1 / max(1, answerable),
        "cited_precision": cited_ok / max(1, cited),
        "no_record": right_none / max(1, none),
        "answerable": answerable,
        "no_record_questions": none,
    }


def _answers(
    q: Question,
    p: Sequence[float],
    order: list[int],
    gate: float,
    verify_gate: float | None,
    floor: float,
    verify_sure: float | None = None,
) -> bool:
    """Whether a question that is not a filter gets an answer (`relevance.settled`'s two judgements)."""
    asks_whether = relevance.is_verification(q.question)
    bar = verify_gate if verify_gate is not None and asks_whether else gate
    on_topic = max(relevance.topicality_of(q.rows[i]) for i in order) >= bar
    sure = verify_sure is not None and asks_whether and p[order[0]] >= verify_sure
    return (on_topic or sure) and p[order[0]] >= floor


HEDGES = (0.5, 0.6, 0.7, 0.8, 0.9)


def hedge_threshold(
    questions: Sequence[Question],
    probs: Sequence[Sequence[float]],
    gate: float,
    verify_gate: float | None,
    floor: float = 0.0,
    verify_sure: float | None = None,
) -> float:
    """Where the record an answer rests on (the most probable citable one of an answered question) was right
    less than half the time: the top of the lowest bands of probability (under 0.5, 0.5-0.6, 0.6-0.7, …)
    each of which was more often wrong than right. Answers there say it is the nearest record. 0.0 when the
    lowest band is right more often than not. `probs` are out-of-fold: what unseen questions should see."""
    leads: list[tuple[float, bool]] = []
    for q, p in zip(questions, probs, strict=True):
        order = sorted((i for i in range(len(p)) if q.citable[i]), key=lambda i: -p[i])
        if order and not q.is_filter and _answers(q, p, order, gate, verify_gate, floor, verify_sure):
            leads.append((p[order[0]], not q.no_record and q.expected[order[0]]))
    best, low = 0.0, 0.0
    for h in HEDGES:
        band = [right for prob, right in leads if low <= prob < h]
        if band and sum(band) / len(band) >= 0.5:
            break
        if band:  # an empty band says nothing either way
            best = h
        low = h
    return best


# Where a yes/no question's most probable record answers it whatever the yes/no gate (`Scorer.verify_sure`); None
# (the gate alone) is tried too.
SURE = (0.8, 0.85, 0.88, 0.9, 0.92, 0.94, 0.96, 0.98)


def choose_sure(
    questions: Sequence[Question],
    probs: Sequence[Sequence[float]],
    gate: float,
    margin: float,
    verify_gate: float | None,
    floor: float,
) -> float | None:
    """The `verify_sure` (or None) under which the answer step does best by `both` on `probs`, which must be
    probabilities the scorer did not see the questions of (out-of-fold, or held out); on a tie the gate alone,
    then the highest (answer the fewest on probability alone)."""
    options: list[float | None] = [None, *sorted(SURE, reverse=True)]
    scores = [both(replay(questions, probs, gate, margin, verify_gate, floor, s)) for s in options]
    return options[scores.index(max(scores))]  # the first of the best: the order above breaks ties


def tune_sure(questions: Sequence[Question], scorer: Scorer) -> tuple[Scorer, dict[str, Any]]:
    """`scorer` with `verify_sure` chosen (`choose_sure`) on `questions` the scorer was not fitted on, and the
    answer step's figures on them before and after."""
    qs = [q for q in questions if q.rows]
    probs = [_probabilities(np.asarray(scorer.weights), scorer.bias, q.rows) for q in qs]
    at = (scorer.gate, scorer.margin, scorer.verify_gate, scorer.answer_floor)
    sure = choose_sure(qs, probs, *at)
    tuned = dataclasses.replace(scorer, verify_sure=sure)

    def figures(s: float | None) -> dict[str, Any]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in replay(qs, probs, *at, s).items()}

    return tuned, {"questions": len(qs), "verify_sure": sure, "before": figures(None), "after": figures(sure)}


def both(r: dict) -> float:
    """Answerable questions answered (an expected record cited) and no-record ones declined, as a harmonic
    mean: both goals at once. (Their plain mean is flat where one is traded for the other, and its optimum
    jumped to a gate that declined four answerable questions in five.)"""
    a, b = r["top5"], r["no_record"]
    return 2 * a * b / (a + b) if a + b else 0.0


def fit(questions: Sequence[Question], *, folds: int = 5) -> tuple[Scorer, dict[str, Any]]:
    """The scorer fitted on all `questions`, with gate and margin chosen on out-of-fold probabilities."""
    from sklearn.model_selection import GroupKFold

    qs = [q for q in questions if q.rows]
    x = np.asarray([row for q in qs for row in q.rows], dtype=float)
    y = np.asarray([e for q in qs for e in q.expected], dtype=int)
    groups = np.asarray([q.conversation for q in qs for _ in q.rows])
    owner = np.asarray([n for n, q in enumerate(qs) for _ in q.rows])
    splitter = GroupKFold(n_splits=folds)

    def oof(c: float) -> list[list[float]]:
        p = np.zeros(len(y))
        for tr, te in splitter.split(x, y, groups):
            w, b = _fit_lr(x[tr], y[tr], c)
            p[te] = _probabilities(w, b, x[te])
        return [list(p[owner == n]) for n in range(len(qs))]

    ranked: tuple[float, float, list] | None = None  # (top-1 + top-5 with the gate open, C, probabilities)
    for c in (0.03, 0.1, 0.3, 1.0, 3.0):
        probs = oof(c)
        r = replay(qs, probs, gate=-1.0, margin=0.0)
        if ranked is None or r["top1"] + r["top5"] > ranked[0] + 1e-9:
            ranked = (r["top1"] + r["top5"], c, probs)
    assert ranked is not None
    _, c, probs = ranked

    # Two gates and a floor, chosen together: a gate for yes/no questions ("did we agree to …?", which ask
    # about one thing and are answered "no record" far more often), one for the rest, and the least
    # probability of the record an answer rests on (lowest first on ties: answer when in doubt).
    def gates(margin: float) -> tuple[float, float, float]:
        return max(
            ((g, v, f) for g in GATES for v in GATES for f in FLOORS),
            key=lambda t: (both(replay(qs, probs, t[0], margin, t[1], t[2])), -t[0], -t[1], -t[2]),
        )

    gate, verify_gate, floor = gates(0.0)
    top5_at_gate = replay(qs, probs, gate, 0.0, verify_gate, floor)["top5"]
    margin = 0.0
    for m in MARGINS:  # the widest margin whose extra citations still find expected records
        r = replay(qs, probs, gate, m, verify_gate, floor)
        if r["top5"] > top5_at_gate + 0.005 and r["cited_precision"] >= 0.5:
            margin, top5_at_gate = m, r["top5"]
    gate, verify_gate, floor = gates(margin)  # chosen again for the answer step as it will run, margin and all
    sure = choose_sure(qs, probs, gate, margin, verify_gate, floor)
    w, b = _fit_lr(x, y, c)
    scorer = Scorer(
        weights=tuple(float(v) for v in w),
        bias=b,
        gate=gate,
        margin=margin,
        verify_gate=verify_gate,
        answer_floor=floor,
        hedge_below=hedge_threshold(qs, probs, gate, verify_gate, floor, sure),
        verify_sure=sure,
    )
    report = {
        "questions": len(qs),
        "candidates": len(y),
        "expected_candidates": int(y.sum()),
        "C": c,
        "hedge_below": scorer.hedge_below,
        "cross_validation": {
            k: round(v, 3) if isinstance(v, float) else v
            for k, v in replay(qs, probs, gate, margin, verify_gate, floor, sure).items()
        },
        "expected_among_candidates": round(statistics.mean(any(q.expected) for q in qs if not q.no_record), 3),
    }
    return scorer, report
