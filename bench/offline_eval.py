"""Measure the offline engine on the evalset: decisions/actions P/R/F1, owners, deadlines, Tier 1 labels.

Pure Python, no services. Simulates the pipeline per conversation: the bridge drops @jeeves
messages and everything between pause/ears off/secure mode and resume/ears on/secure mode off;
the window holds the last 30 messages; extract runs in bursts like the debounced extractor
(at 10 pending messages, or 3 messages after a high-signal one) with `pending_ids`.

    .venv/bin/python bench/offline_eval.py [evalsets/dev] [--no-classify] [--verbose]
    .venv/bin/python bench/offline_eval.py --quick    # a smoke run (CI): the first four conversations
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jeeves.settings")

import django

django.setup()

from pipeline import offline  # noqa: E402
from pipeline.context import ChannelContext  # noqa: E402
from pipeline.members import Member  # noqa: E402
from pipeline.offline import cues  # noqa: E402
from pipeline.offline.classify import cue_categories  # noqa: E402
from pipeline.offline.verbatim import longest_common_run  # noqa: E402
from pipeline.schemas import HIGH_SIGNAL  # noqa: E402
from pipeline.window import WindowMessage  # noqa: E402

WINDOW = 30
BATCH = 10
AFTER_HIGH_SIGNAL = 3
DEFAULT_DIR = Path(__file__).resolve().parent.parent / "evalsets" / "dev"


def _context(conv: dict) -> tuple[ChannelContext, dict[str, str]]:
    channel = conv["channel"]
    org = channel["org"]
    members = tuple(
        Member(user_id=f"{m['id']}@{org}", name=m.get("name"), handle=m.get("handle")) for m in channel["members"]
    )
    bots = tuple(m.user_id for m in members if (m.handle or "").lower() == "jeeves")
    ctx = ChannelContext(
        channel_id=channel["id"],
        organisation_id=org,
        name=channel.get("name"),
        purpose=None,
        context_type=None,
        tags=(),
        timezone=channel.get("timezone", "UTC"),
        members=members,
        bot_ids=bots,
        known_entities=(),
    )
    return ctx, {m["id"]: f"{m['id']}@{org}" for m in channel["members"]}


def _match(predicted: list[set[str]], gold: list[set[str]]) -> list[tuple[int, int]]:
    """Greedy one-to-one matching, largest overlap first."""
    pairs = sorted(
        ((len(p & g), i, j) for i, p in enumerate(predicted) for j, g in enumerate(gold) if p & g), reverse=True
    )
    used_p: set[int] = set()
    used_g: set[int] = set()
    matches = []
    for _, i, j in pairs:
        if i not in used_p and j not in used_g:
            used_p.add(i)
            used_g.add(j)
            matches.append((i, j))
    return matches


def run_conversation(conv: dict, use_classify: bool) -> dict:
    ctx, qualify = _context(conv)
    window: list[WindowMessage] = []
    pending: list[str] = []
    countdown: int | None = None
    records = {"decisions": [], "actions": [], "entities": [], "relationships": [], "signals": []}
    labels: dict[str, list[str]] = {}
    texts: dict[str, str] = {}
    paused = False
    dropped: set[str] = set()

    def burst() -> None:
        nonlocal pending, countdown
        if not pending:
            return
        result = offline.extract(list(window), ctx, set(pending))
        for kind in records:
            records[kind].extend(getattr(result, kind))
        pending, countdown = [], None

    for raw in conv["messages"]:
        mentions = [qualify.get(m["user"], m["user"]) for m in raw.get("mentions", [])]
        author = qualify.get(raw["author"], raw["author"])
        text = raw["text"]
        texts[raw["id"]] = text
        if any(m in ctx.bot_ids for m in mentions):
            lowered = cues.norm(text)
            if cues.RESUME_COMMAND.search(lowered):
                paused = False
            elif cues.PAUSE_COMMAND.search(lowered):
                paused = True
                if "secure" in lowered or "ears off" in lowered:
                    window.clear()
                    pending = []
            if use_classify:
                labels[raw["id"]] = offline.classify(text, ctx, author, mentions).categories
            continue
        if paused:
            dropped.add(raw["id"])
            continue
        message = WindowMessage(
            id=raw["id"], author_id=author, ts=datetime.fromisoformat(raw["ts"].replace("Z", "+00:00")), text=text,
            mentions=mentions,
        )  # fmt: skip
        window = [*window, message][-WINDOW:]
        pending.append(message.id)
        if use_classify:
            result = offline.classify(text, ctx, author, mentions)
            labels[raw["id"]] = result.categories
            high = result.is_high_signal
        else:
            high = bool(HIGH_SIGNAL & cue_categories(text, bool(mentions)))
        if high and countdown is None:
            countdown = AFTER_HIGH_SIGNAL
        elif countdown is not None:
            countdown -= 1
        if len(pending) >= BATCH or countdown == 0:
            burst()
    burst()
    return {"ctx": ctx, "qualify": qualify, "records": records, "labels": labels, "texts": texts, "dropped": dropped}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(DEFAULT_DIR))
    parser.add_argument("--no-classify", action="store_true", help="skip Tier 1 (and MiniLM); bursts from cues")
    parser.add_argument("--verbose", action="store_true", help="list misses and false positives per file")
    parser.add_argument("--quick", action="store_true", help="a smoke run: the first four conversations")
    args = parser.parse_args()

    totals: Counter[str] = Counter()
    label_hits: Counter[str] = Counter()
    label_pred: Counter[str] = Counter()
    label_gold: Counter[str] = Counter()
    failures: list[str] = []
    files = sorted(p for p in Path(args.folder).glob("conv-*.json"))[: 4 if args.quick else None]
    for path in files:
        conv = json.loads(path.read_text())
        gold = conv["gold"]
        out = run_conversation(conv, not args.no_classify)
        records, texts, qualify = out["records"], out["texts"], out["qualify"]
        ignored = set(gold.get("ignored", []))
        for kind in ("decisions", "actions"):
            predicted = [set(r.source_msg_ids) for r in records[kind]]
            golds = [set(g["evidence"]) for g in gold[kind]]
            matches = _match(predicted, golds)
            totals[f"{kind}_pred"] += len(predicted)
            totals[f"{kind}_gold"] += len(golds)
            totals[f"{kind}_match"] += len(matches)
            if kind == "actions":
                for i, j in matches:
                    g = gold["actions"][j]
                    p = records["actions"][i]
                    owner = qualify.get(g["owner"], g["owner"]) if g["owner"] else None
                    totals["owner_ok"] += p.owner_id == owner
                    totals["deadline_ok"] += (p.deadline.isoformat() if p.deadline else None) == g["deadline"]
            if args.verbose:
                hit_p = {i for i, _ in matches}
                hit_g = {j for _, j in matches}
                for j, g in enumerate(gold[kind]):
                    if j not in hit_g:
                        print(f"  MISS {path.stem} {kind} {g['evidence']}: {texts[g['evidence'][0]][:110]}")
                for i, r in enumerate(records[kind]):
                    if i not in hit_p:
                        text = r.summary if kind == "decisions" else r.description
                        print(f"  FP   {path.stem} {kind} {r.source_msg_ids}: {text[:110]}")
        for kind, items in records.items():
            for item in items:
                for msg_id in getattr(item, "source_msg_ids", []):
                    if msg_id in ignored or msg_id in out["dropped"]:
                        failures.append(f"{path.stem}: ignored message {msg_id} in a {kind} record")
                stored = [getattr(item, f, None) for f in ("summary", "description", "rationale", "context", "name")]
                for text in filter(None, stored):
                    run = longest_common_run(text, texts.values())
                    if run >= 10:
                        failures.append(f"{path.stem}: {kind} text copies {run} words")
        for msg_id, predicted_labels in out["labels"].items():
            truth = set(gold["categories"].get(msg_id, []))
            got = set(predicted_labels)
            totals["label_msgs"] += 1
            totals["label_any"] += bool(truth & got)
            totals["label_exact"] += truth == got
            for label in got:
                label_pred[label] += 1
                label_hits[label] += label in truth
            for label in truth:
                label_gold[label] += 1
            totals["hs_pred"] += bool(HIGH_SIGNAL & got)
            totals["hs_gold"] += bool(HIGH_SIGNAL & truth)
            totals["hs_both"] += bool(HIGH_SIGNAL & got) and bool(HIGH_SIGNAL & truth)

    def prf(match: int, pred: int, gold: int) -> str:
        p = match / pred if pred else 0.0
        r = match / gold if gold else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        return f"P={p:.2f} R={r:.2f} F1={f:.2f}  ({match} matched / {pred} predicted / {gold} gold)"

    print(f"offline engine on {len(files)} conversations in {args.folder}")
    print("decisions:", prf(totals["decisions_match"], totals["decisions_pred"], totals["decisions_gold"]))
    print("actions:  ", prf(totals["actions_match"], totals["actions_pred"], totals["actions_gold"]))
    matched = totals["actions_match"] or 1
    print(
        f"action owner accuracy: {totals['owner_ok'] / matched:.2f}"
        f"   deadline accuracy: {totals['deadline_ok'] / matched:.2f}"
    )
    if totals["label_msgs"]:
        n = totals["label_msgs"]
        print(
            f"classify: any-label accuracy {totals['label_any'] / n:.2f},"
            f" exact-set accuracy {totals['label_exact'] / n:.2f}"
            f" over {n} messages"
        )
        print("high-signal:", prf(totals["hs_both"], totals["hs_pred"], totals["hs_gold"]))
        for label in sorted(label_gold):
            print(f"  {label:<10}", prf(label_hits[label], label_pred[label], label_gold[label]))
    print(f"guards: {len(failures)} failures (ignored ids in source refs, 10-word verbatim runs)")
    for failure in failures[:20]:
        print("  ", failure)


if __name__ == "__main__":
    main()
