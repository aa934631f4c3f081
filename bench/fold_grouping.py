"""The offline engine's train cross-validation with folds grouped by conversation or by organisation.

    .venv/bin/python bench/fold_grouping.py [--by conversation organisation] [--heads decision decision_ev]
        [--block decision:words=1.5 ...] [--c decision_ev=30 ...] [--emb decision=0.5 ...] [--replay] [--quick]

Each head's out-of-fold F1 at its best threshold (`learn._best_threshold`; owner accuracy for `owner_is_author`),
fitted as `jeeves train` fits it, with `learn.BLOCK_WEIGHT` / `HEAD_C` / `EMBEDDING_WEIGHT` overridden as given
(`--block HEAD:BLOCK=W` scales one of `features.column_blocks`; `words,chars` in BLOCK sets several). `--replay`
also runs `learn.cross_validate` (the fold engines' replay of train that chooses the record builder's parameters),
as `jeeves train` reports it. Train only; nothing is saved.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jeeves.settings")
os.environ.setdefault("JEEVES_EMBEDDED", "1")

import django

django.setup()

import numpy as np  # noqa: E402

from pipeline.offline import corpus, learn, model  # noqa: E402


def out_of_fold(data: learn.Data, head: str, seed: int = 0) -> float:
    tier1 = head in model.CATEGORIES
    x, y = (data.x1, data.y1) if tier1 else (data.x2, data.y2)
    k = (model.CATEGORIES if tier1 else model.EXTRACT_HEADS).index(head)
    p = np.zeros(len(y))
    for fit_rows, test_rows in data.folds():
        rows = fit_rows[data.owner_rows[fit_rows]] if head == "owner_is_author" else fit_rows
        w, b = learn._fit_heads(
            x, y[:, [k]], [rows], seed, [learn.block_weights(head)], [learn.HEAD_C.get(head, learn.C)]
        )
        z = np.asarray(x[test_rows] @ w[0]).ravel() + b[0]
        p[test_rows] = 1 / (1 + np.exp(-np.clip(z, -30, 30)))
    if head == "owner_is_author":
        return learn._owner_threshold(y[data.owner_rows, k], p[data.owner_rows])[1]
    return learn._best_threshold(y[:, k], p)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--by", nargs="+", default=["conversation", "organisation"])
    parser.add_argument("--heads", nargs="+", default=[*model.CATEGORIES, *model.EXTRACT_HEADS])
    parser.add_argument("--block", nargs="*", default=[], help="HEAD:BLOCK[,BLOCK]=WEIGHT")
    parser.add_argument("--c", nargs="*", default=[], help="HEAD=C")
    parser.add_argument("--emb", nargs="*", default=[], help="HEAD=WEIGHT")
    parser.add_argument("--replay", action="store_true")
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run (CI): two conversations of each organisation, one head"
    )
    args = parser.parse_args()
    for item in args.block:
        head, rest = item.split(":", 1)
        blocks, weight = rest.split("=")
        learn.BLOCK_WEIGHT.setdefault(head, {}).update({b: float(weight) for b in blocks.split(",")})
    learn.HEAD_C.update({h: float(v) for h, v in (i.split("=") for i in args.c)})
    learn.EMBEDDING_WEIGHT.update({h: float(v) for h, v in (i.split("=") for i in args.emb)})
    train = corpus.load_dir(corpus.TRAIN)
    if args.quick:
        per_org: dict[str, list] = {}
        for conv in train:
            per_org.setdefault(conv.ctx.organisation_id, []).append(conv)
        train = [conv for convs in per_org.values() for conv in convs[:2]]
        args.heads, args.replay = ["decision"], False
    data = learn.Data(train)
    for by in args.by:
        learn.FOLD_BY = by
        started = time.monotonic()
        figures: dict = {"folds": by, "heads_oof_f1": {h: out_of_fold(data, h) for h in args.heads}}
        if args.replay:
            cv = learn.cross_validate(train, data, 0)
            keys = ("decisions", "actions", "actions_exact", "owner_accuracy", "deadline_accuracy")
            figures["train_cv"] = {k: cv["train_cv"][k] for k in keys}
            figures["join_threshold"] = cv["join_threshold"]
            figures["decision_anchor_scale"] = cv["params"]["decision_anchor_scale"]
        figures["seconds"] = round(time.monotonic() - started)
        print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
