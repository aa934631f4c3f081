"""Every deadline miss of the offline engine's matched actions: expected against got, with the messages
of both evidence lists, each with its local date and what `deadlines.resolve` reads in it; with `--status`,
every status miss instead (open or done against the gold's, and whether the owner is right).

    .venv/bin/python bench/deadline_misses.py [evalsets/train] [--quiet] [--quick] [--status]

On train the figures are cross-validated, as `jeeves train` reports them: each conversation replayed by
the engine of the fold that did not see it (the five fold engines are fitted here, about 4 minutes, with
the committed engine's parameters; `--cache FILE` reads them from `bench/decision_misses.py --cache FILE` instead,
about 2 minutes). On any other folder the committed engine replays it. Read train's
misses to find what a rule gets wrong in general; dev is for the figure only. `--quick` (CI smoke): the
committed engine over the first three dev conversations.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jeeves.settings")
os.environ.setdefault("JEEVES_EMBEDDED", "1")

import django

django.setup()

from pipeline.offline import artefacts, corpus, deadlines, learn, model, replay  # noqa: E402


def _engines(convs: list[corpus.Conversation], folder: Path, cache: Path | None = None):
    """conversation id → the engine that replays it (on train, read from `cache` when it exists)."""
    if folder.resolve() != corpus.TRAIN.resolve():
        engine = model.load()
        return {c.id: engine for c in convs}
    if cache is not None and cache.exists():
        from bench._common import load_fold_engines

        return load_fold_engines(cache)
    _, meta = artefacts.load(model.NAME)
    by_index = learn.replay_engines(convs, meta, meta.get("seed", 0))  # as `jeeves train` fits each fold
    return {convs[k].id: engine for k, engine in by_index.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(corpus.TRAIN))
    parser.add_argument("--quiet", action="store_true", help="the figures only")
    parser.add_argument("--quick", action="store_true", help="a smoke run (CI): three dev conversations")
    parser.add_argument("--status", action="store_true", help="list status misses (open / done) instead")
    parser.add_argument(
        "--cache", metavar="FILE", help="on train: the fold engines from `bench/decision_misses.py --cache FILE`"
    )
    args = parser.parse_args()
    folder = corpus.DEV if args.quick else Path(args.folder)
    convs = corpus.load_dir(folder)[: 3 if args.quick else None]
    engines = _engines(convs, folder, Path(args.cache) if args.cache else None)
    runs = [replay.run(c, engines[c.id], labels=False) for c in convs]
    right = total = 0
    for run in runs:
        conv, actions = run.conversation, run.result.actions
        by_id = {m.id: m for m in conv.messages}
        gold = conv.gold["actions"]
        for i, j in replay.match([set(a.source_msg_ids) for a in actions], [set(g["evidence"]) for g in gold]):
            expected, got = gold[j]["deadline"], actions[i].deadline.isoformat() if actions[i].deadline else None
            if args.status:
                expected, got = gold[j].get("status", "open"), actions[i].status
            total += 1
            right += got == expected
            if got == expected or args.quiet:
                continue
            head = f"{conv.id} {gold[j]['id']} expected {expected} got {got} ({conv.ctx.timezone})"
            if args.status:
                head += " owner " + ("right" if actions[i].owner_id == conv.member(gold[j]["owner"]) else "wrong")
            print(f"\n{head}: {gold[j]['description']}")
            for mid in sorted(set(gold[j]["evidence"]) | set(actions[i].source_msg_ids)):
                m = by_id[mid]
                day = deadlines.local_date(m.ts, conv.ctx.timezone)
                tag = ("G" if mid in gold[j]["evidence"] else " ") + ("P" if mid in actions[i].source_msg_ids else " ")
                print(f"  {tag} {mid} {day:%a %d %b} -> {deadlines.resolve(m.text, day)}: {m.text[:240]!r}")
    figures = replay.score(runs)
    print(
        f"\n{folder}: {'status' if args.status else 'deadlines'} right {right}/{total}"
        f" (deadline {figures['deadline_accuracy']:.3f}, status {figures['status_accuracy']:.3f}); actions F1"
        f" {figures['actions']['f1']:.3f}, owner {figures['owner_accuracy']:.3f}, decisions F1"
        f" {figures['decisions']['f1']:.3f}, signals per 100 messages {figures['signals_per_100_messages']}"
        "  (G: gold evidence, P: the engine's)"
    )


if __name__ == "__main__":
    main()
