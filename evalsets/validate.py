"""Check labelled conversations against the format and labelling rules of `evalsets/README.md`.

    python evalsets/validate.py evalsets/train/conv-141.json …   # named files
    python evalsets/validate.py --runs evalsets/train/conv-141.json  # and their five-word runs

Prints one line per fault (file: what is wrong) and exits 1 if there is any. With `--runs` it also
lists every five-word run a named file's messages share with another split's conversations (talk to
Jeeves aside): a conversation added to train must be written in its own words, never dev's or the
holdout's. `tests/test_evalsets.py` runs the file rules over train and the holdout (dev's files
predate the uuid5 member ids and are left as they were given).
"""

from __future__ import annotations

import json
import re
import sys
import uuid
from collections import defaultdict
from datetime import datetime
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent
SPLITS = ("train", "dev", "holdout")
CATEGORIES = {"decision", "action", "blocker", "update", "discussion", "reference", "routine", "question"}
KINDS = {"factual_recall", "accountability", "temporal_context", "dependency", "institutional"}
ENTITY_TYPES = {"person", "service", "project", "team", "tool", "concept"}
RELATIONSHIPS = {"owns", "depends_on", "works_on", "blocks", "reports_to"}
_HANDLE = re.compile(r"(?<![\w.])@([a-z][a-z0-9_.-]*[a-z0-9]|[a-z])", re.IGNORECASE)
_UUID5 = r"[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}"
_WORD = re.compile(r"[a-z0-9']+")
# the commands that open and close a stretch Jeeves does not hear (README: Ignored messages)
_CLOSES = {"pause": "resume", "ears off": "ears on", "secure mode": "secure mode off"}
_COMMAND = re.compile(r"@jeeves\s+(pause|resume|ears off|ears on|secure mode off|secure mode)\b", re.IGNORECASE)


def member_id(org: str, handle: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{org}/{handle}"))


def faults(raw: dict, name: str) -> list[str]:
    out: list[str] = []

    def fault(text: str) -> None:
        out.append(f"{name}: {text}")

    if raw.get("id") != name:
        fault(f"id {raw.get('id')!r} is not the file's name")
    channel = raw["channel"]
    org = channel["org"]
    if not re.fullmatch(rf"{_UUID5}@{re.escape(org)}", channel["id"]):
        fault("channel id is not <uuid5>@<org>")
    try:
        from zoneinfo import ZoneInfo

        ZoneInfo(channel["timezone"])
    except Exception:  # any failure means the name is not a timezone
        fault(f"unknown timezone {channel.get('timezone')!r}")
    handles = {}
    for m in channel["members"]:
        if m["id"] != member_id(org, m["handle"]):
            fault(f"member {m['handle']} id is not uuid5(NAMESPACE_URL, '<org>/<handle>')")
        handles[m["handle"].lower()] = m["id"]
    bot = handles.get("jeeves")
    if bot is None:
        fault("no jeeves member")
    people = {m["id"] for m in channel["members"]} - {bot}

    messages = raw["messages"]
    ids = [m["id"] for m in messages]
    if ids != [f"m{i:03d}" for i in range(1, len(ids) + 1)]:
        fault("message ids are not m001, m002, … in order")
    ids_set = set(ids)
    last = None
    for m in messages:
        ts = m["ts"]
        if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", ts):
            fault(f"{m['id']} ts {ts!r} is not UTC ISO with Z")
            continue
        when = datetime.fromisoformat(ts.replace("Z", "+00:00"))
        if last and when <= last:
            fault(f"{m['id']} ts is not after the message before")
        last = when
        if m["author"] not in people:
            fault(f"{m['id']} author is not a member (or is the bot)")
        wanted = []
        for hit in _HANDLE.finditer(m["text"]):
            uid = handles.get(hit.group(1).lower())
            if uid is not None:
                wanted.append({"user": uid, "offset": hit.start(), "length": len(hit.group(0))})
        got = sorted(m.get("mentions", []), key=lambda x: x["offset"])
        if got != wanted:
            fault(f"{m['id']} mentions {got} do not match the text's @handles {wanted}")
        if any(ord(ch) > 0xFFFF for ch in m["text"][: max((w["offset"] for w in wanted), default=0)]):
            fault(f"{m['id']} has an astral-plane character before a mention")

    gold = raw["gold"]
    cats = gold["categories"]
    if set(cats) != ids_set:
        fault("categories do not cover exactly the messages")
    for mid, labels in cats.items():
        if not labels or set(labels) - CATEGORIES:
            fault(f"{mid} labels {labels} are empty or unknown")

    # ignored stretches, from the commands in the text
    ignored: list[str] = []
    open_cmd = None
    for m in messages:
        hit = _COMMAND.search(m["text"])
        cmd = hit.group(1).lower() if hit else None
        if open_cmd is None:
            if cmd in _CLOSES:
                open_cmd = cmd
        elif cmd == _CLOSES[open_cmd]:
            open_cmd = None
        else:
            ignored.append(m["id"])
    if sorted(gold.get("ignored", [])) != ignored:
        fault(f"ignored {gold.get('ignored')} is not the stretch between the commands {ignored}")
    for mid in ignored:
        if cats.get(mid) != ["routine"]:
            fault(f"ignored {mid} is not labelled ['routine']")
    to_bot = {m["id"] for m in messages if any(x["user"] == bot for x in m.get("mentions", []))}

    decisions = {d["id"]: d for d in gold["decisions"]}
    actions = {a["id"]: a for a in gold["actions"]}
    if list(decisions) != [f"D{i}" for i in range(1, len(decisions) + 1)]:
        fault("decision ids are not D1, D2, … in order")
    if list(actions) != [f"A{i}" for i in range(1, len(actions) + 1)]:
        fault("action ids are not A1, A2, … in order")
    evidence_of = defaultdict(set)
    for rid, rec in {**decisions, **actions}.items():
        if not rec["evidence"]:
            fault(f"{rid} has no evidence")
        for mid in rec["evidence"]:
            if mid not in ids_set:
                fault(f"{rid} evidence {mid} is not a message")
            elif mid in ignored or mid in to_bot:
                fault(f"{rid} evidence {mid} is ignored or addressed to Jeeves")
            evidence_of[rid[0]].add(mid)
    for d in decisions.values():
        if not d.get("summary") or not d["decided_by"] or set(d["decided_by"]) - people:
            fault(f"{d['id']} lacks a summary or decided_by members")
        if d["status"] not in {"active", "superseded", "reversed"}:
            fault(f"{d['id']} status {d['status']!r}")
        later = d.get("superseded_by")
        if (d["status"] == "active") != (later is None) or (later is not None and later not in decisions):
            fault(f"{d['id']} status {d['status']} and superseded_by {later!r} disagree")
        if not any("decision" in cats.get(mid, []) for mid in d["evidence"]):
            fault(f"{d['id']} has no evidence message labelled decision")
    for a in actions.values():
        if not a.get("description") or (a["owner"] is not None and a["owner"] not in people):
            fault(f"{a['id']} lacks a description or its owner is not a member")
        if a["deadline"] is not None and not re.fullmatch(r"\d{4}-\d\d-\d\d", a["deadline"]):
            fault(f"{a['id']} deadline {a['deadline']!r}")
        if a["status"] not in {"open", "done"}:
            fault(f"{a['id']} status {a['status']!r}")
        if not any("action" in cats.get(mid, []) for mid in a["evidence"]):
            fault(f"{a['id']} has no evidence message labelled action")
    for mid, labels in cats.items():
        if "decision" in labels and mid not in evidence_of["D"]:
            fault(f"{mid} is labelled decision but is no decision's evidence")
        if "action" in labels and mid not in evidence_of["A"]:
            fault(f"{mid} is labelled action but is no action's evidence")
    for pair in gold.get("contradictions", []):
        if len(pair) != 2 or any(decisions.get(d, {}).get("status") != "active" for d in pair):
            fault(f"contradiction {pair} is not two active decisions")

    names = set()
    for e in gold["entities"]:
        names.add(e["name"])
        if e["type"] not in ENTITY_TYPES:
            fault(f"entity {e['name']} type {e['type']!r}")
    for r in gold["relationships"]:
        if r["source"] not in names or r["target"] not in names or r["relationship"] not in RELATIONSHIPS:
            fault(f"relationship {r} names an unknown entity or kind")

    questions = gold["questions"]
    if not 3 <= len(questions) <= 8:
        fault(f"{len(questions)} questions (3-8 expected)")
    if not any(q["expected"] == [] and q["evidence"] == [] for q in questions):
        fault("no no-record question")
    for q in questions:
        if q["kind"] not in KINDS:
            fault(f"question kind {q['kind']!r}")
        if set(q["expected"]) - set(decisions) - set(actions) or set(q["evidence"]) - ids_set:
            fault(f"question {q['q'][:40]!r} names an unknown record or message")
    return out


def _runs(text: str) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return {tuple(words[i : i + 5]) for i in range(len(words) - 4)}


@cache
def _message_runs(path: Path) -> frozenset[tuple[str, ...]]:
    """The five-word runs of a file's messages (talk to Jeeves aside), read once per file."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return frozenset(run for m in raw["messages"] if "@jeeves" not in m["text"].lower() for run in _runs(m["text"]))


def shared_runs(path: Path) -> list[str]:
    """Five-word runs the file's messages share with the conversations of the other splits."""
    mine = _message_runs(path)
    out = []
    for split in SPLITS:
        if split == path.parent.name:
            continue
        for other in sorted((ROOT / split).glob("conv-*.json")):
            for run in sorted(mine & _message_runs(other)):
                out.append(f"{path.stem}: repeats the five words {' '.join(run)!r} of {split}/{other.stem}")
    return out


def main(argv: list[str]) -> int:
    runs = "--runs" in argv
    named = [Path(a) for a in argv if a != "--runs"]
    report = []
    for p in named:
        report += faults(json.loads(p.read_text(encoding="utf-8")), p.stem)
        if runs:
            report += shared_runs(p)
    for line in report:
        print(line)
    print(f"{len(named)} files checked, {len(report)} faults", file=sys.stderr)
    return 1 if report else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
