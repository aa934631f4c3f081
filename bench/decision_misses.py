"""Every decision the offline engine misses and every decision record it gets wrong, with the messages around
them and what the heads say of each, grouped by cause.

    .venv/bin/python bench/decision_misses.py [evalsets/train] [--quiet] [--cache FILE] [--quick]

On train the figures are cross-validated, as `jeeves train` reports them: each conversation replayed by the
engine of the fold that did not see it (the five fold engines and their joins fitted as
`bench/deadline_misses.py` fits them, about 4 minutes; `--cache FILE` keeps them in an `.npz` for the next run).
On any other folder the committed engine replays it. Read train's misses to find what the engine gets wrong in
general; dev is for the figure only. `--quick` (CI smoke): the committed engine over the first three dev
conversations.

Per message: `open` is its opening score (`extract._opening`, as a share: a record opens at the decision anchor
scale), `t1` Tier 1's `decision` probability / its threshold, `anc` `decision_anchor`'s, `ev` `decision_ev`'s;
`G` marks a gold evidence message, `P` one of the engine's record, `*` a gold decision's evidence elsewhere.
Causes of a miss: `absorbed` (a message of it is in a record matched to another gold decision), `opened
elsewhere` (in a record that matched none: the matching chose otherwise), `near` (its best opening score is at
least 0.6 of the scale), `unseen` (under 0.6: the heads do not see it); of these, `short reply` when its best
message has `SHORT` words or fewer and answers another member. Causes of a wrong record: the gold categories of
its first message (discussion, action, update, ...), `repeat` when it shares a message with a matched gold
decision.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jeeves.settings")
os.environ.setdefault("JEEVES_EMBEDDED", "1")

import django

django.setup()

from bench._common import load_fold_engines  # noqa: E402
from bench.deadline_misses import _engines  # noqa: E402
from pipeline.offline import corpus, model, replay  # noqa: E402

_extract = importlib.import_module("pipeline.offline.extract")  # the module (the package's `extract` is its function)

CONTEXT = 2  # messages shown before a gold decision's first evidence and after its last
SHORT = 8  # a reply of this many words or fewer is short (a terse verdict: "Both.", "Slide it.", "Approved.")


def cached_engines(convs: list[corpus.Conversation], folder: Path, cache: Path | None) -> dict[str, model.Engine]:
    """`_engines`, kept in (and read back from) `cache` when one is given."""
    if cache is not None and cache.exists():
        return load_fold_engines(cache)
    engines = _engines(convs, folder)
    if cache is not None:
        out: dict[str, np.ndarray] = {}
        for fold, engine in enumerate({id(e): e for e in engines.values()}.values()):
            arrays = engine.arrays()
            arrays["tier1_w"], arrays["tier2_w"] = engine.tier1.weights, engine.tier2.weights
            out.update({f"fold{fold}/{k}": v for k, v in arrays.items()})
            out[f"convs{fold}"] = np.array(",".join(c for c, e in engines.items() if e is engine))
        np.savez(cache, **out)
    return engines


def _window(conv: corpus.Conversation, engine: model.Engine) -> _extract._Window:
    msgs = conv.heard
    view = _extract.view(msgs, conv.ctx)
    return _extract._Window(msgs=msgs, ctx=conv.ctx, scored=engine.score(view), pending=[True] * len(msgs))


def _line(w: _extract._Window, k: int, tag: str) -> str:
    s, m = w.scored, w.msgs[k]
    figures = (
        f"open {_extract._opening(w, k):4.2f} t1 {s.p('decision', k) / s.engine.threshold('decision'):4.2f}"
        f" anc {s.p('decision_anchor', k) / s.engine.threshold('decision_anchor'):4.2f}"
        f" ev {s.p('decision_ev', k) / s.engine.threshold('decision_ev'):4.2f}"
    )
    return f"  {tag} {m.id:>10} {w.name(m.author_id):>9} | {figures} | {m.text[:200]!r}"


def _show(w: _extract._Window, ks: set[int], marks: set[str], gold_ids: set[str], predicted: set[str]) -> list[str]:
    """The messages `ks` with `CONTEXT` before and after, each tagged (`marks`: this item's gold evidence)."""
    lo, hi = max(0, min(ks) - CONTEXT), min(len(w.msgs), max(ks) + CONTEXT + 1)
    lines = []
    for k in range(lo, hi):
        mid = w.msgs[k].id
        tag = ("G" if mid in marks else "*" if mid in gold_ids else " ") + ("P" if mid in predicted else " ")
        lines.append(_line(w, k, tag))
    return lines


def _short_reply(w: _extract._Window, k: int) -> bool:
    """Is message `k` a short reply (`SHORT` words or fewer) to a message of another member?"""
    return k > 0 and w.words(k) <= SHORT and w.msgs[k - 1].author_id != w.msgs[k].author_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(corpus.TRAIN))
    parser.add_argument("--quiet", action="store_true", help="the counts only")
    parser.add_argument("--cache", type=Path, help="keep the fold engines in this .npz (train only)")
    parser.add_argument("--quick", action="store_true", help="a smoke run (CI): three dev conversations")
    args = parser.parse_args()
    folder = corpus.DEV if args.quick else Path(args.folder)
    convs = corpus.load_dir(folder)[: 3 if args.quick else None]
    engines = cached_engines(convs, folder, args.cache if folder.resolve() == corpus.TRAIN.resolve() else None)
    runs = [replay.run(c, engines[c.id], labels=False) for c in convs]
    misses: Counter[str] = Counter()
    wrong: Counter[str] = Counter()
    for run in runs:
        conv, found = run.conversation, run.result.decisions
        gold = conv.gold["decisions"]
        w = _window(conv, engines[conv.id])
        index = {m.id: k for k, m in enumerate(w.msgs)}
        pairs = replay.match([set(d.source_msg_ids) for d in found], [set(g["evidence"]) for g in gold])
        record_of = dict(pairs)
        gold_of = {j: i for i, j in pairs}
        gold_ids = {i for g in gold for i in g["evidence"]}
        predicted = {i for d in found for i in d.source_msg_ids}
        scale = w.scored.engine.params.get("decision_anchor_scale", 1.0)

        for j, g in enumerate(gold):
            if j in gold_of:
                continue
            ks = {index[i] for i in g["evidence"] if i in index}
            if not ks:
                misses["not heard"] += 1
                continue
            inside = [i for i, d in enumerate(found) if set(d.source_msg_ids) & set(g["evidence"])]
            best = max(ks, key=lambda k: _extract._opening(w, k))
            share = _extract._opening(w, best) / scale
            if any(i in record_of for i in inside):
                cause = "absorbed"
            elif inside:
                cause = "opened elsewhere"
            else:
                cause = "near" if share >= 0.6 else "unseen"
            if cause in ("near", "unseen") and _short_reply(w, best):
                cause += ", short reply"
            misses[cause] += 1
            if not args.quiet:
                print(f"\nMISS {conv.id} {g['id']} [{cause}] best {share:.2f}: {g['summary'][:160]}")
                print("\n".join(_show(w, ks, set(g["evidence"]), gold_ids, predicted)))
        for i, d in enumerate(found):
            if i in record_of:
                continue
            ks = {index[m] for m in d.source_msg_ids if m in index}
            first = w.msgs[min(ks)]
            if set(d.source_msg_ids) & gold_ids:
                cause = "repeat"
            else:
                cats = conv.gold["categories"].get(first.id, [])
                cause = "/".join(sorted(cats)) or "none"
                if _short_reply(w, min(ks)):
                    cause += ", short reply"
            wrong[cause] += 1
            if not args.quiet:
                print(f"\nWRONG {conv.id} [{cause}]: {d.summary[:160]}")
                print("\n".join(_show(w, ks, set(), gold_ids, predicted)))
    figures = replay.score(runs)["decisions"]
    print(f"\n{folder}: decisions P {figures['p']:.3f} R {figures['r']:.3f} F1 {figures['f1']:.3f}")
    print("misses by cause:", ", ".join(f"{k} {v}" for k, v in misses.most_common()))
    print("wrong records by cause:", ", ".join(f"{k} {v}" for k, v in wrong.most_common()))


if __name__ == "__main__":
    main()
