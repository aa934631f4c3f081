"""Answer scoring on evalset conversations (evalset README, "Scoring"): ask every gold question in its
channel and check the first five cited records, or the exact no-record sentence; plus cross-channel probes.

Beside that top-5 figure, what a reader notices: whether the first cited record is an expected one
(top-1), the share of cited records that are expected (cited precision), and how long answers are.

Runs against whatever the database holds for the conversation's channel: a `jeeves replay`, or gold
records seeded by bench/retrieval_qa.py.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

from retrieval.answer import NO_RECORD
from retrieval.ask import AskResult, ask

TOP = 5


def asker(conv: dict[str, Any]) -> str:
    org = conv["channel"]["org"]
    human = next(m for m in conv["channel"]["members"] if m.get("handle") != "jeeves")
    return f"{human['id']}@{org}"


def evidence(conv: dict[str, Any]) -> dict[str, set[str]]:
    gold = conv["gold"]
    return {r["id"]: set(r.get("evidence") or []) for r in [*gold["decisions"], *gold["actions"]]}


def wanted(question: dict[str, Any], known: dict[str, set[str]]) -> set[str]:
    """The message ids an answer's record must overlap: the question's own evidence and its expected records'."""
    ids = set(question.get("evidence") or [])
    for gid in question["expected"]:
        ids |= known.get(gid, set())
    return ids


def record_ids(record: Any) -> set[str]:
    return set((record.source_ref or {}).get("wire_msg_ids") or [])


def score_conversation(conv: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per gold question: kind, whether it is a no-record question, whether the answer is right."""
    known = evidence(conv)
    user = asker(conv)
    rows = []
    for q in conv["gold"]["questions"]:
        result: AskResult = ask(conv["channel"]["id"], user, q["q"])
        wanted_ids = wanted(q, known)
        expected = [bool(record_ids(r) & wanted_ids) for r in result.records]
        if not q["expected"]:
            ok = result.answer == NO_RECORD
        else:
            ok = any(expected[:TOP])
        rows.append(
            {
                "conversation": conv["id"],
                "question": q["q"],
                "kind": q["kind"],
                "no_record": not q["expected"],
                "ok": ok,
                "top1": bool(expected[:1] and expected[0]),
                "cited": [r.id for r in result.records[:TOP]],
                "cited_expected": sum(expected),
                "cited_count": len(expected),
                "answer": result.answer,
                "words": words(result.answer),
                "timings_ms": result.timings_ms,
            }
        )
    return rows


def words(text: str) -> int:
    """An answer's length in words (ids and dates count as words)."""
    return len(re.findall(r"\S+", text))


def score_probes(probes: list[dict[str, Any]], convs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Cross-channel probes: asked in one channel, answered only elsewhere: the right answer is no record."""
    rows = []
    for probe in probes:
        conv = convs[probe["ask_in"]]
        result = ask(conv["channel"]["id"], asker(conv), probe["q"])
        foreign = {c.split(":")[0] for c in probe["must_not_reveal"]}
        leaked = [r.id for r in result.records if r.channel_id != conv["channel"]["id"]]
        rows.append(
            {
                "probe": probe["q"],
                "ok": result.answer == NO_RECORD and not leaked,
                "leaked": leaked,
                "from": sorted(foreign),
            }
        )
    return rows


def load_probes(path: Path, convs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The cross-channel probes next to the conversations at `path` whose channel is among `convs`."""
    probes_file = (path if path.is_dir() else path.parent) / "cross-channel.json"
    if not probes_file.exists():
        return []
    return [p for p in json.loads(probes_file.read_text(encoding="utf-8")) if p["ask_in"] in convs]


def summarise(rows: list[dict[str, Any]], probes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The two figures (answerable in the top five, no-record right), per kind, and the probes."""
    answerable = [r for r in rows if not r["no_record"]]
    none = [r for r in rows if r["no_record"]]
    by_kind: dict[str, dict[str, int]] = {}
    for r in rows:
        kind = by_kind.setdefault(
            r["kind"], {"answerable": 0, "answerable_top5": 0, "no_record": 0, "no_record_right": 0}
        )
        if r["no_record"]:
            kind["no_record"] += 1
            kind["no_record_right"] += r["ok"]
        else:
            kind["answerable"] += 1
            kind["answerable_top5"] += r["ok"]
    probes = probes or []
    cited = sum(r.get("cited_count", 0) for r in answerable)
    answered = [r["words"] for r in rows if "words" in r and r.get("answer") != NO_RECORD]
    return {
        "questions": len(rows),
        "answerable": len(answerable),
        "answerable_top5": sum(r["ok"] for r in answerable),
        "answerable_top5_rate": round(sum(r["ok"] for r in answerable) / max(1, len(answerable)), 3),
        "no_record": len(none),
        "no_record_right": sum(r["ok"] for r in none),
        "no_record_rate": round(sum(r["ok"] for r in none) / max(1, len(none)), 3),
        "answerable_top1": sum(r.get("top1", False) for r in answerable),
        "answerable_top1_rate": round(sum(r.get("top1", False) for r in answerable) / max(1, len(answerable)), 3),
        "cited": cited,
        "cited_expected": sum(r.get("cited_expected", 0) for r in answerable),
        "cited_precision": round(sum(r.get("cited_expected", 0) for r in answerable) / max(1, cited), 3),
        "median_answer_words": statistics.median(answered) if answered else 0,
        "by_kind": dict(sorted(by_kind.items())),
        "probes": len(probes),
        "probes_right": sum(p["ok"] for p in probes),
        "probes_leaked": sum(bool(p["leaked"]) for p in probes),
    }


def render(s: dict[str, Any], rows: list[dict[str, Any]] | None = None) -> list[str]:
    """The figures as text lines; with `rows`, every miss too."""
    lines = [
        f"answerable questions whose first cited record is expected (top-1): "
        f"{s['answerable_top1']}/{s['answerable']} = {s['answerable_top1_rate']:.1%}",
        f"answerable questions with an expected record in the top {TOP}: "
        f"{s['answerable_top5']}/{s['answerable']} = {s['answerable_top5_rate']:.1%}",
        f"cited precision (cited records that are expected, answerable questions): "
        f"{s['cited_expected']}/{s['cited']} = {s['cited_precision']:.1%}",
        f"no-record questions answered with the no-record sentence: "
        f"{s['no_record_right']}/{s['no_record']} = {s['no_record_rate']:.1%}",
    ]
    lines.append(f"median answer length (answers other than no-record): {s['median_answer_words']} words")
    if s["probes"]:
        lines.append(
            f"cross-channel probes answered 'no record' without a leak: {s['probes_right']}/{s['probes']}"
            f" (leaked: {s['probes_leaked']})"
        )
    lines.append(
        "by kind: "
        + ", ".join(
            f"{kind} {k['answerable_top5']}/{k['answerable']}"
            + (f" (+ no-record {k['no_record_right']}/{k['no_record']})" if k["no_record"] else "")
            for kind, k in s["by_kind"].items()
        )
    )
    for r in rows or []:
        if not r["ok"] or not (r["no_record"] or r.get("top1", True)):
            label = "MISS" if not r["ok"] else "NOT-FIRST"
            kind = r["kind"] + (", no-record" if r["no_record"] else "")
            lines.append(f"{label} {r['conversation']} [{kind}] {r['question']} -> {r['cited']}")
    return lines


def transcript(rows: list[dict[str, Any]]) -> list[str]:
    """Every question with the answer given, for reading them as the person who asked."""
    lines = []
    for r in rows:
        mark = "ok" if r["ok"] and (r["no_record"] or r.get("top1")) else ("top5" if r["ok"] else "MISS")
        lines += [f"[{mark}] {r['conversation']} {r['kind']}: {r['question']}", f"    {r.get('answer', '')}"]
    return lines
