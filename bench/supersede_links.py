"""Replacements linked to the decision they replace, on the engine's own records: for each conversation replayed
in process, the contradiction duty's check as `pipeline/contradictions.py` runs it after each new record
(candidates: the channel's earlier active records within the candidate similarity, nearest ten; a replacement
the judge finds stated is applied to the one it most surely replaces), scored against gold `superseded_by`.

    .venv/bin/python bench/supersede_links.py [evalsets/train] [--folds CACHE] [--records FILE] [--quick]

On train, each conversation is replayed by the fold engine that did not see it (`--folds CACHE`, the `.npz`
`bench/decision_misses.py --cache` writes); elsewhere by the committed engine. `--records FILE` keeps the
replayed records (texts, message ids, times; as JSON) for the next run. Per gold replacement (an earlier gold
decision `superseded_by` a later one) whose two decisions both have a record: `linked` (applied unasked,
right), `wrong` (the later record applied to another record), `asked` (flagged to be asked), `missed`; and
`false links`, replacements applied between records of no gold replacement. Read train to change the judge;
dev is for the figure only. `--quick` (CI smoke): the first three dev conversations.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jeeves.settings")
os.environ.setdefault("JEEVES_EMBEDDED", "1")


def replay_records(folder: Path, folds: str | None, limit: int | None) -> list[dict]:
    """Each conversation's decision records in store order: text, message ids, time, confidence, deciders."""
    from pipeline.offline import contradiction as offline
    from pipeline.offline import corpus, model

    convs = corpus.load_dir(folder)[:limit]
    engines: dict = {}
    if folds:
        from bench._common import load_fold_engines

        engines = load_fold_engines(Path(folds))
    committed = None
    out = []
    for conv in convs:
        engine = engines.get(conv.id)
        if engine is None:
            committed = committed or model.load()
            engine = committed
        records = offline.engine_records(conv, engine)
        out.append({"id": conv.id, "records": [{**r, "when": r["when"].isoformat()} for r in records]})
    return out


def gold_links(conv, records: list[dict]) -> tuple[dict[int, str], set[tuple[str, str]], set[frozenset]]:
    """(record index → the gold decision it matches, gold replacements (older, newer), gold contradiction pairs)."""
    from pipeline.offline.replay import match

    gold = conv.gold.get("decisions", [])
    pairs = match([set(r["ids"]) for r in records], [set(d.get("evidence", [])) for d in gold])
    gold_of = {i: gold[j]["id"] for i, j in pairs}
    replaced = {(d["id"], d["superseded_by"]) for d in gold if d.get("superseded_by")}
    return gold_of, replaced, {frozenset(p) for p in conv.gold.get("contradictions", [])}


def check_all(conv, records: list[dict], judge=None) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The duty's check after each record in store order: (applied (older, newer) pairs, flagged pairs)."""
    from django.conf import settings

    from pipeline.offline import contradiction as offline

    judge = judge or offline.judge
    if not records:
        return [], []
    by_id = {m.id: m for m in conv.messages}
    whens = [datetime.fromisoformat(r["when"]) for r in records]
    sides = offline.sides([r["text"] for r in records], whens, by=[r["by"] for r in records])
    floor = offline.model().candidate_cosine
    active = [True] * len(records)
    applied: list[tuple[int, int]] = []
    flagged: list[tuple[int, int]] = []
    judged: set[frozenset] = set()
    for j, newer in enumerate(records):
        if not active[j]:
            continue
        pool = [
            (k, float(sides[k].vector @ sides[j].vector))
            for k in range(j)
            if active[k] and frozenset((k, j)) not in judged
        ]
        pool = sorted((p for p in pool if p[1] >= floor), key=lambda p: -p[1])[:10]
        if not pool:
            continue
        messages = [by_id[i].text for i in newer["ids"] if i in by_id]
        verdicts = judge(sides[j], [sides[k] for k, _ in pool], messages)
        stated = []
        for (k, _), v in zip(pool, verdicts, strict=True):
            judged.add(frozenset((k, j)))
            older, later = (k, j) if sides[k].when <= sides[j].when else (j, k)
            if v.verdict == "compatible":
                continue
            # As the duty: a pair with a record under the confidence floor is never asked about.
            low = min(records[k]["confidence"], newer["confidence"]) < settings.JEEVES.extract_confidence_min
            if v.stated and later == j:
                stated.append((v.score, older, later))
            elif not low:
                flagged.append((older, later))
        if stated:
            _, older, later = max(stated)
            applied.append((older, later))
            active[older] = False
    return applied, flagged


def tally(conv, records, applied, flagged) -> Counter:
    """Per gold replacement with both records: linked when an applied link joins records that carry its two
    decisions' evidence (`replaces`, as the link head is trained), wrong when a link touches either side
    otherwise; applied links that carry no gold replacement are false links."""
    from pipeline.offline.contradiction import gold_replacements, replaces

    gold_of, replaced, contradicts = gold_links(conv, records)
    evidence = {d["id"]: set(d.get("evidence", [])) for d in conv.gold.get("decisions", [])}
    ids = [r["ids"] for r in records]
    c: Counter = Counter()
    have = set(gold_of.values())
    both = {p for p in replaced if set(p) <= have}
    c["gold"] += len(replaced)
    c["both"] += len(both)
    asked = {(gold_of.get(a), gold_of.get(b)) for a, b in flagged}
    for older, newer in both:
        pair = [(evidence[older], evidence[newer])]
        if any(replaces(ids[a], ids[b], pair) for a, b in applied):
            c["linked"] += 1
        elif any(set(ids[b]) & evidence[newer] or set(ids[a]) & evidence[older] for a, b in applied):
            c["wrong"] += 1
        elif (older, newer) in asked:
            c["asked"] += 1
        else:
            c["missed"] += 1
    every = gold_replacements(conv.gold.get("decisions", []))
    c["applied"] += len(applied)
    c["false_links"] += sum(not replaces(ids[a], ids[b], every) for a, b in applied)
    c["false_flags"] += sum(p not in replaced and frozenset(p) not in contradicts for p in asked)
    return c


def render(c: Counter) -> str:
    p = c["applied"] - c["false_links"]
    prec = p / c["applied"] if c["applied"] else 0.0
    rec = c["linked"] / c["both"] if c["both"] else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return (
        f"gold replacements {c['gold']}, both records {c['both']}: linked {c['linked']}, wrong {c['wrong']},"
        f" asked {c['asked']}, missed {c['missed']}; applied {c['applied']}, false links {c['false_links']};"
        f" false flags {c['false_flags']}; link P {prec:.3f} R {rec:.3f} F1 {f1:.3f} (of pairs with both records)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", nargs="?", default="evalsets/dev")
    parser.add_argument("--folds", metavar="CACHE", help="fold engines (bench/decision_misses.py --cache)")
    parser.add_argument("--records", metavar="FILE", help="keep / read the replayed records here (JSON)")
    parser.add_argument("--quick", action="store_true", help="CI smoke: the first three dev conversations")
    args = parser.parse_args()
    import django

    django.setup()
    from pipeline.offline import corpus

    folder = Path("evalsets/dev" if args.quick else args.folder)
    limit = 3 if args.quick else None
    path = Path(args.records) if args.records else None
    if path is not None and path.exists():
        replayed = json.loads(path.read_text())
    else:
        replayed = replay_records(folder, args.folds, limit)
        if path is not None:
            path.write_text(json.dumps(replayed))
    convs = {c.id: c for c in corpus.load_dir(folder)[:limit]}
    total: Counter = Counter()
    for row in replayed:
        conv = convs[row["id"]]
        applied, flagged = check_all(conv, row["records"])
        total += tally(conv, row["records"], applied, flagged)
    print(f"{folder}: {render(total)}")


if __name__ == "__main__":
    main()
