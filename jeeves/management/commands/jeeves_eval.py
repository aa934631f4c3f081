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

from django.core.management.base import BaseCommand

from jeeves.management.commands import jeeves_replay


class Command(BaseCommand):
    help = "Replay evalset conversations (or read a replay --json output) and report extraction P/R/F1 per type."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        jeeves_replay.add_conversation_arguments(parser)
        parser.add_argument("--from", dest="from_file", help="score this `jeeves replay --json` output instead")
        parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the pipeline per file")
        parser.add_argument("--json", action="store_true", help="print the scores as one JSON object")
        parser.add_argument("--verbose", action="store_true", help="list missed and spurious records per conversation")
        parser.add_argument(
            "--answers",
            action="store_true",
            help="also ask every gold question (and the cross-channel probes) and score the answers",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        files = jeeves_replay.conversation_files(Path(options["path"]))
        convs = {c["id"]: c for c in (json.loads(f.read_text(encoding="utf-8")) for f in files)}
        if options["from_file"]:
            predicted = json.loads(Path(options["from_file"]).read_text(encoding="utf-8"))["channels"]
        else:
            from django.conf import settings

            cfg = settings.JEEVES
            replayer = jeeves_replay.Replayer(
                options["url"], cfg.wire_secret, cfg.wire_app_id, options["timeout"], quiet=True
            )
            from django.utils import timezone

            predicted = []
            for conv in convs.values():
                jeeves_replay._reset(conv["channel"]["id"])
                since = timezone.now()
                stats = replayer.replay(conv)
                predicted.append(jeeves_replay.collect(conv["channel"]["id"], conv["id"], stats, since))
        by_conv = {p["conversation"]: p for p in predicted}
        report = score({cid: (conv, by_conv.get(cid)) for cid, conv in convs.items()})
        rows: list[dict[str, Any]] = []
        if options["answers"]:
            rows, probes, report["answers"] = answers(Path(options["path"]), convs)
            report["answers"]["per_question"] = rows
            report["questions"] = questions(rows)
            report["cross_channel"] = cross_channel(probes)
        if options["json"]:
            self.stdout.write(json.dumps(report, ensure_ascii=False))
            return
        self.stdout.write(render(report, verbose=options["verbose"]))
        if options["answers"]:
            from retrieval import evaluation

            lines = evaluation.render(report["answers"], rows if options["verbose"] else None)
            self.stdout.write("answers (offline engine unless a respond model is configured):\n")
            self.stdout.write("".join(f"  {line}\n" for line in lines))


def answers(path: Path, convs: dict[str, dict]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Ask every gold question of every conversation, and the probes, in the configured database."""
    from retrieval import evaluation

    rows = [row for conv in convs.values() for row in evaluation.score_conversation(conv)]
    probes = evaluation.score_probes(evaluation.load_probes(path, convs), convs)
    return rows, probes, evaluation.summarise(rows, probes)


# --------------------------------------------------------------------------- scoring


def _ids(record: dict) -> set[str]:
    return set((record.get("source_ref") or {}).get("wire_msg_ids") or [])


def match(predicted: list[dict], gold: list[dict]) -> list[tuple[int, int]]:
    """Greedy matching by evidence overlap, each side used at most once: the rule of the in-process
    figures (`pipeline.offline.replay.match`), so both score the same records against the same gold."""
    from pipeline.offline.replay import match as match_evidence

    return match_evidence([_ids(p) for p in predicted], [set(g["evidence"]) for g in gold])


def _bare(user_id: str | None) -> str | None:
    return user_id.partition("@")[0] if user_id else None


def _norm(name: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", name.casefold().replace("_", " ")).split())


def _local_date(iso: str | None, tz: str) -> str | None:
    if not iso:
        return None
    return datetime.fromisoformat(iso).astimezone(ZoneInfo(tz)).date().isoformat()


_NOTHING: dict[str, Any] = {"decisions": [], "actions": [], "entities": [], "signals": []}


def score(pairs: dict[str, tuple[dict, dict | None]]) -> dict[str, Any]:
    """The report's sections that need no questions asked: each section is its own function.
    (`questions` and `cross_channel` are added by `run` when `--answers` asks them.)"""
    report = extraction(pairs)
    report["categories"] = categories(pairs)
    report["ignored_evidence"] = ignored_evidence(report["per_conversation"])
    report["contradictions"] = contradictions(pairs)
    report["cost"] = cost(pairs)
    report["questions"] = None
    report["cross_channel"] = None
    return report


def extraction(pairs: dict[str, tuple[dict, dict | None]]) -> dict[str, Any]:
    """Decisions and actions (P/R/F1, owner and deadline accuracy), entities, per conversation."""
    totals: Counter = Counter()
    per_conv: dict[str, Any] = {}
    for cid, (conv, got) in sorted(pairs.items()):
        got = got or _NOTHING
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
                totals["status_ok"] += sum(
                    got[kind][i].get("status") == gold[kind][j].get("status", "open") for i, j in matched
                )
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
            "status_accuracy": round(totals["status_ok"] / matched_actions, 3) if matched_actions else 0.0,
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


def _prf(tp: int, fp: int, fn: int) -> dict[str, float]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return {"precision": round(p, 3), "recall": round(r, 3), "f1": round(2 * p * r / (p + r), 3) if p + r else 0.0}


def categories(pairs: dict[str, tuple[dict, dict | None]]) -> dict[str, Any]:
    """Tier 1 against `gold.categories`, over the messages Tier 1 classified (multi-label: per category
    P/R/F1 and their macro F1). Commands and paused/secure messages never reach Tier 1; `classified`
    says how many of the labelled messages did."""
    counts: dict[str, Counter] = {}
    labelled = classified = exact = 0
    for conv, got in pairs.values():
        gold = conv["gold"].get("categories", {})
        predicted = (got or {}).get("categories") or {}
        labelled += len(gold)
        for msg_id, wanted in gold.items():
            if msg_id not in predicted:
                continue
            classified += 1
            want, have = set(wanted), set(predicted[msg_id])
            exact += want == have
            for cat in want | have:
                c = counts.setdefault(cat, Counter())
                c["tp"] += cat in want and cat in have
                c["fp"] += cat in have and cat not in want
                c["fn"] += cat in want and cat not in have
    per = {cat: {**_prf(c["tp"], c["fp"], c["fn"]), "support": c["tp"] + c["fn"]} for cat, c in sorted(counts.items())}
    scored = [v["f1"] for v in per.values() if v["support"]]
    return {
        "macro_f1": round(sum(scored) / len(scored), 3) if scored else 0.0,
        "exact_match": round(exact / classified, 3) if classified else 0.0,
        "labelled": labelled,
        "classified": classified,
        "per_category": per,
    }


def ignored_evidence(per_conv: dict[str, Any]) -> dict[str, Any]:
    """Messages of `gold.ignored` (sent while paused or secure) that any stored record rests on: must be none."""
    leaks = {cid: row["ignored_leaks"] for cid, row in per_conv.items() if row["ignored_leaks"]}
    return {"leaks": sum(len(v) for v in leaks.values()), "by_conversation": leaks}


def contradictions(pairs: dict[str, tuple[dict, dict | None]]) -> dict[str, Any]:
    """The contradiction duty against the gold labels. A replay lists `contradictions`, the pairs of decision
    ids flagged to be asked, and `supersessions`, the (older, newer) pairs Jeeves applied unasked. A flagged
    pair is right when its two decisions match the two of a gold contradiction pair; one matching a gold
    replacement (`superseded_by`) is a replacement asked about instead of applied; any other is a false flag.
    An applied replacement is right when its older decision carries the evidence of a gold decision superseded
    (or reversed) and its newer one the replacement's (`pipeline.offline.contradiction.replaces`, the rule the
    link head is trained by). `both_extracted`: gold pairs whose two decisions were extracted."""
    from pipeline.offline.contradiction import gold_replacements, replaces

    gold_n = flagged_n = right = false_flags = both = 0
    replacements: Counter = Counter()
    for conv, got in pairs.values():
        got = got or _NOTHING
        gold_decisions = conv["gold"]["decisions"]
        decisions = got["decisions"]
        gold_of = {decisions[i]["id"]: gold_decisions[j]["id"] for i, j in match(decisions, gold_decisions)}
        wanted = {frozenset(pair) for pair in conv["gold"].get("contradictions", [])}
        replaced = {(d["id"], d["superseded_by"]) for d in gold_decisions if d.get("superseded_by")}
        gold_n += len(wanted)
        both += sum(pair <= set(gold_of.values()) for pair in wanted)
        replacements["gold"] += len(replaced)
        found = set()
        for pair in got.get("contradictions") or []:
            flagged_n += 1
            mapped = frozenset(gold_of.get(d) for d in pair)
            if mapped in wanted:
                found.add(mapped)
            elif mapped in {frozenset(r) for r in replaced}:
                replacements["asked"] += 1
            else:
                false_flags += 1
        right += len(found)
        evidence = {d["id"]: _ids(d) for d in decisions}
        changes = gold_replacements(gold_decisions)
        for older, newer in got.get("supersessions") or []:
            replacements["applied"] += 1
            replacements["right"] += replaces(evidence.get(older, ()), evidence.get(newer, ()), changes)
    replacements["wrong"] = replacements["applied"] - replacements["right"]
    return {
        "gold": gold_n,
        "flagged": flagged_n,
        "right": right,
        "false_flags": false_flags,
        "both_extracted": both,
        "replacements": {k: replacements[k] for k in ("gold", "applied", "right", "wrong", "asked")},
    }


def cost(pairs: dict[str, tuple[dict, dict | None]]) -> dict[str, Any]:
    """Model calls and tokens per 100 messages, per slot, over the replays (`llm_calls`; `local` is free)."""
    messages = sum(len(conv["messages"]) for conv, _ in pairs.values())
    slots: dict[str, Counter] = {}
    for _conv, got in pairs.values():
        for slot, usage in ((got or {}).get("llm_calls") or {}).items():
            slots.setdefault(slot, Counter()).update(usage)
    per_100 = 100 / messages if messages else 0.0
    return {
        "messages": messages,
        "per_100_messages": {
            slot: {key: round(value * per_100, 2) for key, value in sorted(c.items())}
            for slot, c in sorted(slots.items())
        },
        "tokens_per_100_messages": round(
            sum(c["prompt_tokens"] + c["completion_tokens"] for c in slots.values()) * per_100, 1
        ),
    }


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))], 1) if ordered else 0.0


def questions(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Answerable questions with an expected record in the top 5, no-record questions answered so, answer time."""
    answerable = [r for r in rows if not r["no_record"]]
    none = [r for r in rows if r["no_record"]]
    ms = [sum(r["timings_ms"].values()) for r in rows]
    return {
        "asked": len(rows),
        "top5_recall": round(sum(r["ok"] for r in answerable) / len(answerable), 3) if answerable else 0.0,
        "no_record_accuracy": round(sum(r["ok"] for r in none) / len(none), 3) if none else 0.0,
        "answer_ms_p50": _pct(ms, 50),
        "answer_ms_p95": _pct(ms, 95),
    }


def cross_channel(probes: list[dict[str, Any]]) -> dict[str, Any]:
    """Questions asked in one channel about another's knowledge: any cited record of another channel leaks."""
    return {
        "probes": len(probes),
        "answered_no_record": sum(p["ok"] for p in probes),
        "leaks": sum(len(p["leaked"]) for p in probes),
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
        f"action owner accuracy {a['owner_accuracy']:.2f}, deadline accuracy {a['deadline_accuracy']:.2f}, "
        f"status (open/done) accuracy {a['status_accuracy']:.2f} (of matched actions); "
        f"ignored-message leaks: {report['ignored_leaks']}",
    ]
    cats = report["categories"]
    lines.append(
        f"Tier 1 categories: macro F1 {cats['macro_f1']:.2f} over {cats['classified']}/{cats['labelled']} labelled "
        "messages classified; " + ", ".join(f"{k} {v['f1']:.2f}" for k, v in cats["per_category"].items())
    )
    c, r = report["contradictions"], report["contradictions"]["replacements"]
    lines.append(
        f"contradictions: {c['right']}/{c['gold']} gold pairs flagged ({c['both_extracted']} with both decisions "
        f"extracted), {c['false_flags']} false flags; replacements applied unasked {r['right']}/{r['gold']} gold "
        f"({r['wrong']} wrong), {r['asked']} more asked about"
    )
    cost = report["cost"]
    lines.append(
        "model calls per 100 messages: "
        + (", ".join(f"{slot} {u['calls']:g}" for slot, u in cost["per_100_messages"].items()) or "none")
        + f"; tokens per 100 messages {cost['tokens_per_100_messages']:g}"
    )
    if verbose:
        for cid, row in report["per_conversation"].items():
            lines.append(
                f"{cid}: decisions {row['decisions']['matched']}/{row['decisions']['gold']} "
                f"(missed {row['decisions']['missed']}, spurious {row['decisions']['spurious']}); "
                f"actions {row['actions']['matched']}/{row['actions']['gold']} "
                f"(missed {row['actions']['missed']}, spurious {row['actions']['spurious']})"
            )
    return "\n".join(lines) + "\n"
