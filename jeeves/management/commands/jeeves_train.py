"""`jeeves train`: fit the offline engine's learned parts on evalsets/train, report on evalsets/dev."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand

from pipeline.offline import corpus, training


class Command(BaseCommand):
    help = "Fit the offline engine's learned artefacts on the train split (fixed seed) and report dev figures."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--only", action="append", help="train only this artefact (repeatable)")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--train", default=str(corpus.TRAIN), help="folder of training conversations")
        parser.add_argument("--dev", default=str(corpus.DEV), help="folder of dev conversations (measured, not fitted)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        started = time.monotonic()
        results = training.run(options["only"], options["seed"], Path(options["train"]), Path(options["dev"]))
        if options["json"]:
            self.stdout.write(json.dumps(results, indent=2, default=str))
            return
        for name, figures in results.items():
            self.stdout.write(f"{name}: {json.dumps(figures, default=str)}")
        self.stdout.write(f"trained {len(results)} artefact(s) in {time.monotonic() - started:.0f}s")
