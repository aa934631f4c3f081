"""Measure the offline engine on labelled conversations without services: the pipeline simulated in
process (`pipeline.offline.replay`: the bridge's drops, Tier 1 per message, the 30-message window,
debounced bursts), scored as the evalsets' README says, with the restatement figures.

    .venv/bin/python bench/offline_eval.py [evalsets/dev] [--json] [--quick]

The engine is the committed artefact (fitted on evalsets/train by `python manage.py jeeves train`);
run it on `evalsets/train` to see the fitted (not cross-validated) figures, on dev to see held-out ones.
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

from pipeline.offline import corpus, model, replay  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(corpus.DEV))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="the first three conversations only (CI smoke)")
    args = parser.parse_args()
    convs = corpus.load_dir(Path(args.folder))
    if args.quick:
        convs = convs[:3]
    started = time.monotonic()
    engine = model.load()
    figures = replay.score([replay.run(c, engine) for c in convs])
    figures["seconds"] = round(time.monotonic() - started, 1)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    d, a = figures["decisions"], figures["actions"]
    print(f"{args.folder}: {figures['conversations']} conversations, {figures['messages']} messages")
    print(f"decisions  P {d['p']:.2f}  R {d['r']:.2f}  F1 {d['f1']:.2f}")
    print(f"actions    P {a['p']:.2f}  R {a['r']:.2f}  F1 {a['f1']:.2f}")
    print(
        f"owner {figures['owner_accuracy']:.2f}  deadline {figures['deadline_accuracy']:.2f}"
        f"  status {figures['status_accuracy']:.2f}"
    )
    print(f"categories macro F1 {figures['categories_macro_f1']}")
    print(
        f"signals/100 msgs {figures['signals_per_100_messages']}  kept share median {figures['kept_share_median']}"
        f"  >=0.9: {figures['kept_ge_0_9']}  10-word runs: {figures['ten_word_runs']}"
        f"  ignored evidence: {figures['ignored_evidence']}"
    )
    print(f"{figures['seconds']} s")


if __name__ == "__main__":
    main()
