"""`jeeves reembed [--batch N] [--limit N] [--dry-run] [--json]`: recompute records' vectors after a model change.

A record needs a vector when it has none or its vector was made by another model than the configured embed
slot's (`embeddings.model`). Records are taken in batches (one model call per batch); each batch's new
vectors replace the old in one transaction, so an interrupted run leaves every record with a vector and the
next run goes on where it stopped (resumable by construction: what is done is no longer to do). A progress
bar on a terminal; `--json` prints one object. Raw-message vectors (`JEEVES_EMBED_MESSAGES=1`) cannot be
recomputed — their text is not kept — and are counted, not touched.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

KINDS = ("decision", "action", "signal", "entity", "summary")


def _pending(kind: str, model_name: str):
    from knowledge.models import Embedding
    from pipeline.embed import _MODELS

    current = Embedding.objects.filter(source_type=kind, model=model_name).values("source_id")
    return _MODELS[kind].objects.exclude(pk__in=current).order_by("pk")


def pending_counts(model_name: str) -> dict[str, int]:
    return {kind: _pending(kind, model_name).count() for kind in KINDS}


def _replace(kind: str, records: list, found: list[list[float]], model_name: str) -> int:
    from django.db import transaction

    from knowledge.models import Embedding
    from pipeline.embed import write_vector

    with transaction.atomic():
        Embedding.objects.filter(source_type=kind, source_id__in=[r.pk for r in records]).delete()
        return sum(
            write_vector(kind, record, vector, model_name) for record, vector in zip(records, found, strict=True)
        )


class Command(BaseCommand):
    help = "Recompute records' vectors made by another model (or missing): batched, resumable, --json."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--batch", type=int, default=64, help="records per model call and transaction (64)")
        parser.add_argument("--limit", type=int, default=0, help="stop after this many records (0: all)")
        parser.add_argument("--dry-run", action="store_true", help="count what would be recomputed, change nothing")
        parser.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        from django.conf import settings

        from knowledge.models import Embedding
        from pipeline import embed
        from pipeline.embed import _record_text_and_meta

        model_name = settings.JEEVES.slot("embed").model
        batch = max(1, options["batch"])
        limit = options["limit"]
        started = time.monotonic()
        todo = pending_counts(model_name)
        total = sum(todo.values())
        if limit:
            total = min(total, limit)
        report: dict[str, Any] = {
            "model": model_name,
            "to_do": todo,
            "embedded": 0,
            "batches": 0,
            "messages_not_recomputable": Embedding.objects.filter(source_type="message")
            .exclude(model=model_name)
            .count(),
        }
        if not options["dry_run"] and total:
            if not embed.ready():
                raise CommandError(
                    "the embed slot failed its probe (unreachable, or its dimensions differ from JEEVES_EMBED_DIMS): "
                    "nothing recomputed; see `jeeves doctor`"
                )
            progress = None
            if not options["json"] and sys.stderr.isatty():
                from tqdm import tqdm

                progress = tqdm(total=total, unit="record", desc="reembed", file=sys.stderr)
            done = 0
            for kind in KINDS:
                last = None
                while done < total:
                    query = _pending(kind, model_name)
                    if last is not None:
                        query = query.filter(pk__gt=last)
                    records = list(query[: min(batch, total - done)])
                    if not records:
                        break
                    last = records[-1].pk
                    found = embed.vectors([_record_text_and_meta(kind, r)[0] for r in records])
                    if found is None:
                        raise CommandError(
                            f"the embed slot failed after {report['embedded']} records; run again to resume"
                        )
                    report["embedded"] += _replace(kind, records, found, model_name)
                    report["batches"] += 1
                    done += len(records)
                    if progress is not None:
                        progress.update(len(records))
            if progress is not None:
                progress.close()
        report["remaining"] = sum(pending_counts(model_name).values()) if not options["dry_run"] else total
        report["seconds"] = round(time.monotonic() - started, 2)
        if options["json"]:
            self.stdout.write(json.dumps(report))
            return
        verb = "would recompute" if options["dry_run"] else "recomputed"
        self.stdout.write(
            f"{verb} {report['embedded'] if not options['dry_run'] else total} vector(s) with {model_name}"
            f" in {report['batches']} batch(es), {report['seconds']} s; {report['remaining']} still to do"
            + (
                f"; {report['messages_not_recomputable']} raw-message vector(s) of another model cannot be recomputed"
                if report["messages_not_recomputable"]
                else ""
            )
        )
