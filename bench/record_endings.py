"""Records that end badly: of the replayed records' texts (decision summaries, action descriptions, signal
summaries), those a cut broke (`restate.cut_fault`, the words after the record's last one in the sentence it restates
taken as what was cut; not where the message ends so too): the last word needs a word after it (a preposition, a
determiner or a possessive, a conjunction, an auxiliary, an adjective whose noun was cut), a figure was parted
from its unit or its noun, or the clause it ends in lost its verb; and those with no verb although the
sentence they restate (of the messages they rest on, the one sharing most words) has one (`restate.has_verb`):
the kind of cut that leaves "the office on new." or "Alpha only, Beta and below." of a sentence saying what was
decided.

    .venv/bin/python bench/record_endings.py [evalsets/train] [--examples N] [--quick]

The committed engine replays the folder (`pipeline.offline.replay`). `--examples N` prints N of the bad records
(read train's, never quote dev or holdout text in docs). `--quick` (CI smoke): the first three conversations.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jeeves.settings")
os.environ.setdefault("JEEVES_EMBEDDED", "1")

import django

django.setup()

from knowledge.verbatim import words  # noqa: E402
from pipeline.offline import corpus, model, replay, restate  # noqa: E402


def _source_sentence(text: str, sources: list[str]) -> str:
    """The sentence of the messages a record rests on that shares most words with it: what it restates."""
    mine = set(words(text))
    parts = [p for s in sources for p in restate.sentences(s)]
    return max(parts, key=lambda p: len(mine & set(words(p))), default="")


def _after(tokens: list[str], said: str) -> list[str]:
    """The words of the sentence `said` from the last word of the record `tokens` on, as said there (with the
    separator after it): the record's last word and what a cut took."""
    last = words(tokens[-1])[-1:] if tokens else []
    theirs = said.split()
    at = next((k for k in range(len(theirs) - 1, -1, -1) if words(theirs[k])[-1:] == last), None)
    return [] if at is None or not last else theirs[at:]


def faults(runs: list[replay.Replayed]) -> tuple[int, list[tuple[str, str, str]]]:
    """The number of records and, of the bad ones, (kind of record, fault, text)."""
    total, bad = 0, []
    for run in runs:
        texts = {m.id: m.text for m in run.conversation.messages}
        res = run.result
        for kind, records, field in (
            ("decision", res.decisions, "summary"),
            ("action", res.actions, "description"),
            ("signal", res.signals, "summary"),
        ):
            for record in records:
                text = getattr(record, field)
                total += 1
                tokens = text.split()
                if tokens:
                    tokens[-1] = tokens[-1].rstrip(".")  # the record's full stop, which `restate.sentence` adds
                sources = [texts[i] for i in record.source_msg_ids if i in texts]
                said = _source_sentence(text, sources)
                fault = restate.cut_fault(tokens, [*tokens[:-1], *(_after(tokens, said) or tokens[-1:])])
                if fault and words(said)[-2:] == words(text)[-2:]:
                    fault = ""  # the message ends so too: no cut made it
                if not fault and not restate.has_verb(tokens) and restate.has_verb(said.split()):
                    fault = "no verb"
                if fault:
                    bad.append((kind, fault, text))
    return total, bad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(corpus.TRAIN))
    parser.add_argument("--examples", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="the first three conversations only (CI smoke)")
    args = parser.parse_args()
    convs = corpus.load_dir(Path(args.folder))[: 3 if args.quick else None]
    engine = model.load()
    total, bad = faults([replay.run(c, engine) for c in convs])
    by_fault = Counter(fault for _, fault, _ in bad)
    by_kind = Counter(kind for kind, _, _ in bad)
    print(f"{args.folder}: {len(bad)} of {total} records end badly")
    print("  by fault: " + ", ".join(f"{k} {n}" for k, n in by_fault.most_common()))
    print("  by record: " + ", ".join(f"{k} {n}" for k, n in by_kind.most_common()))
    for kind, fault, text in bad[: args.examples]:
        print(f"  [{kind}, {fault}] {text}")


if __name__ == "__main__":
    main()
