"""`jeeves eval PATH`: replay evalset conversations through the running system and score what was
extracted against the gold labels (scoring rules of the evalset README).

A predicted decision/action matches a gold one when its source_ref ids overlap the gold evidence
(greedy, largest overlap first, each gold record at most once). `--from FILE` scores the output
of an earlier `jeeves replay --json` instead of replaying.

`--answers` then asks every gold question in its channel (and the cross-channel probes) through
`retrieval.ask.ask` against the configured database, and scores the answers (retrieval/evaluation.py).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

help = "Replay evalset conversations (or read a replay --json output) and report extraction P/R/F1 per type."


def add_arguments(parser: Any) -> None:
    parser.add_argument("path", help="a conversation file in the evalset format, or a folder of them")
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the Jeeves web server (default: %(default)s)")
    parser.add_argument("--from", dest="from_file", help="score this `jeeves replay --json` output instead")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the pipeline per file")
    parser.add_argument("--json", action="store_true", help="print the scores as one JSON object")
    parser.add_argument("--verbose", action="store_true", help="list missed and spurious records per conversation")
    parser.add_argument(
        "--answers",
        action="store_true",
        help="also ask every gold question (and the cross-channel probes) and score the answers",
    )


def run(options: dict[str, Any], command: Any) -> None:
    from jeeves.cli import replay

    files = replay.conversation_files(Path(options["path"]))
    convs = {c["id"]: c for c in (json.loads(f.read_text(encoding="utf-8")) for f in files)}
    if options["from_file"]:
        predicted = json.loads(Path(options["from_file"]).read_text(encoding="utf-8"))["channels"]
    else:
        from django.conf import settings

        cfg = settings.JEEVES
        replayer = replay.Replayer(options["url"], cfg.wire_secret, cfg.wire_app_id, options["timeout"], quiet=True)
        predicted = []
        for conv in convs.values():
            replay._reset(conv["channel"]["id"])
            stats = replayer.replay(conv)
            predicted.append(replay.collect(conv["channel"]["id"], conv["id"], stats))
    by_conv = {p["conversation"]: p for p in predicted}
    report = score({cid: (conv, by_conv.get(cid)) for cid, conv in convs.items()})
    rows: list[dict[str, Any]] = []
    if options["answers"]:
        rows, report["answers"] = answers(Path(options["path"]), convs)
        report["answers"]["per_question"] = rows
    if options["json"]:
        command.stdout.write(json.dumps(report, ensure_ascii=False))
        return
    command.stdout.write(render(report, verbose=options["verbose"]))
    if options["answers"]:
        from retrieval import evaluation

        lines = evaluation.render(report["answers"], rows if options["verbose"] else None)
        command.stdout.write("answers (offline engine unless a respond model is configured):\n")
        command.stdout.write("".join(f"  {line}\n" for line in lines))


def answers(path: Path, convs: dict[str, dict]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Ask every gold question of every conversation, and the probes, in the configured database."""
    from retrieval import evaluation

    rows = [row for conv in convs.values() for row in evaluation.score_conversation(conv)]
    probes = evaluation.score_probes(evaluation.load_probes(path, convs), convs)
    return rows, evaluation.summarise(rows, probes)


# --------------------------------------------------------------------------- scoring


def _ids(record: dict) -> set[str]:
    return set((record.get("source_ref") or {}).get("wire_msg_ids") or [])


def match(predicted: list[dict], gold: list[dict]) -> list[tuple[int, int]]:
    """Greedy matching, largest evidence overlap first; each side used at most once."""
    pairs = []
    for i, p in enumerate(predicted):
        for j, g in enumerate(gold):
            overlap = len(_ids(p) & set(g["evidence"]))
            if overlap:
                pairs.append((overlap, i, j))
    used_p: set[int] = set()
    used_g: set[int] = set()
    matched = []
    for _, i, j in sorted(pairs, key=lambda t: (-t[0], t[1], t[2])):
        if i not in used_p and j not in used_g:
            used_p.add(i)
            used_g.add(j)
            matched.append((i, j))
    return matched


def _bare(user_id: str | None) -> str | None:
    return user_id.partition("@")[0] if user_id else None


def _norm(name: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", name.casefold().replace("_", " ")).split())


def _local_date(iso: str | None, tz: str) -> str | None:
    if not iso:
        return None
    return datetime.fromisoformat(iso).astimezone(ZoneInfo(tz)).date().isoformat()


def score(pairs: dict[str, tuple[dict, dict | None]]) -> dict[str, Any]:
    totals: Counter = Counter()
    per_conv: dict[str, Any] = {}
    for cid, (conv, got) in sorted(pairs.items()):
        got = got or {"decisions": [], "actions": [], "entities": [], "signals": []}
        gold = conv["gold"]
        tz = conv["channel"].get("timezone", "UTC")
        row: dict[str, Any] = {}
        for kind in ("decisions", "actions"):
            matched = match(got[kind], gold[kind])
            totals[f"{kind}_predicted"] += len(got[kind])
            totals[f"{kind}_gold"] += len(gold[kind])
            totals[f"{kind}_matched"] += len(matched)
            row[kind] = {
                "predicted": len(got[kind]),
                "gold": len(gold[kind]),
                "matched": len(matched),
                "missed": [gold[kind][j]["id"] for j in range(len(gold[kind])) if j not in {g for _, g in matched}],
                "spurious": [got[kind][i]["id"] for i in range(len(got[kind])) if i not in {p for p, _ in matched}],
            }
            if kind == "actions":
                owners = sum(_bare(got[kind][i]["owner_id"]) == gold[kind][j]["owner"] for i, j in matched)
                deadlines = sum(
                    _local_date(got[kind][i]["deadline"], tz) == gold[kind][j]["deadline"] for i, j in matched
                )
                totals["owner_ok"] += owners
                totals["deadline_ok"] += deadlines
        gold_forms = [{_norm(e["name"]), *(_norm(a) for a in e.get("aliases", []))} for e in gold["entities"]]
        got_forms = [{_norm(e["name"]), *(_norm(a) for a in e.get("aliases", []))} for e in got["entities"]]
        totals["entities_gold"] += len(gold_forms)
        totals["entities_predicted"] += len(got_forms)
        totals["entities_found"] += sum(any(g & p for p in got_forms) for g in gold_forms)
        totals["entities_right"] += sum(any(g & p for g in gold_forms) for p in got_forms)
        ignored = set(gold.get("ignored", []))
        leaks = sorted(
            {i for kind in ("decisions", "actions", "signals") for r in got.get(kind, []) for i in _ids(r) & ignored}
        )
        totals["ignored_leaks"] += len(leaks)
        row["ignored_leaks"] = leaks
        per_conv[cid] = row

    def prf(kind: str) -> dict[str, float]:
        p = totals[f"{kind}_matched"] / totals[f"{kind}_predicted"] if totals[f"{kind}_predicted"] else 0.0
        r = totals[f"{kind}_matched"] / totals[f"{kind}_gold"] if totals[f"{kind}_gold"] else 0.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        return {"precision": round(p, 3), "recall": round(r, 3), "f1": round(f1, 3)}

    ent_p = totals["entities_right"] / totals["entities_predicted"] if totals["entities_predicted"] else 0.0
    ent_r = totals["entities_found"] / totals["entities_gold"] if totals["entities_gold"] else 0.0
    matched_actions = totals["actions_matched"]
    return {
        "conversations": len(pairs),
        "decisions": prf("decisions"),
        "actions": {
            **prf("actions"),
            "owner_accuracy": round(totals["owner_ok"] / matched_actions, 3) if matched_actions else 0.0,
            "deadline_accuracy": round(totals["deadline_ok"] / matched_actions, 3) if matched_actions else 0.0,
        },
        "entities": {
            "precision": round(ent_p, 3),
            "recall": round(ent_r, 3),
            "f1": round(2 * ent_p * ent_r / (ent_p + ent_r), 3) if ent_p + ent_r else 0.0,
        },
        "ignored_leaks": totals["ignored_leaks"],
        "counts": dict(totals),
        "per_conversation": per_conv,
    }


def render(report: dict[str, Any], *, verbose: bool) -> str:
    d, a, e = report["decisions"], report["actions"], report["entities"]
    lines = [
        f"conversations: {report['conversations']}",
        "| type | precision | recall | F1 |",
        "|---|---:|---:|---:|",
        f"| decisions | {d['precision']:.2f} | {d['recall']:.2f} | {d['f1']:.2f} |",
        f"| actions | {a['precision']:.2f} | {a['recall']:.2f} | {a['f1']:.2f} |",
        f"| entities | {e['precision']:.2f} | {e['recall']:.2f} | {e['f1']:.2f} |",
        f"action owner accuracy {a['owner_accuracy']:.2f}, deadline accuracy {a['deadline_accuracy']:.2f} "
        f"(of matched actions); ignored-message leaks: {report['ignored_leaks']}",
    ]
    if verbose:
        for cid, row in report["per_conversation"].items():
            lines.append(
                f"{cid}: decisions {row['decisions']['matched']}/{row['decisions']['gold']} "
                f"(missed {row['decisions']['missed']}, spurious {row['decisions']['spurious']}); "
                f"actions {row['actions']['matched']}/{row['actions']['gold']} "
                f"(missed {row['actions']['missed']}, spurious {row['actions']['spurious']})"
            )
    return "\n".join(lines) + "\n"
