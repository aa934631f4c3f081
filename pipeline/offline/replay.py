"""The offline engine over labelled conversations as the pipeline would run it, and its scores.

Per conversation: the bridge lets through `Conversation.heard`; Tier 1 classifies each message with
the window before it; the window keeps the last 30 messages; extraction runs in bursts like the
debounced extractor (at 10 pending messages, or 3 messages after a high-signal one) and reads, as the
stack's does, the `LOOKAHEAD` heard messages after the burst's last one. Secure mode
flushes the window as the bridge does (docs/guarantees.md §3): what is pending is extracted first (a
live channel's debounced run had long done so), and what follows is read without what came before.
Scored as the evalsets' README says (decisions/actions matched by evidence overlap, owner, deadline,
Tier 1 labels; an action's status, open or done, too), plus what the stored text keeps of its messages and how
many signals are stored per 100 messages.
Used by `jeeves train` (train cross-validation with fold engines, dev) and `bench/offline_eval.py`.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from knowledge.verbatim import longest_common_run
from pipeline.offline import bursts, model, restate
from pipeline.offline.classify import classify
from pipeline.offline.corpus import Conversation
from pipeline.offline.extract import LOOKAHEAD, extract
from pipeline.schemas import ExtractResult

WINDOW = 30
BATCH = bursts.BATCH
AFTER_HIGH_SIGNAL = bursts.AFTER_HIGH_SIGNAL


@dataclass
class Replayed:
    conversation: Conversation
    result: ExtractResult = field(default_factory=ExtractResult)
    labels: dict[str, list[str]] = field(default_factory=dict)


def run(conv: Conversation, engine: model.Engine, *, labels: bool = True) -> Replayed:
    out = Replayed(conv)
    window: list = []
    pending: list[str] = []
    countdown: int | None = None
    found: dict[str, list] = {k: [] for k in ("decisions", "actions", "entities", "relationships", "signals")}
    extracted: set[str] = set()  # the messages of earlier bursts: what a record can continue

    heard = {m.id for m in conv.heard}
    position = {m.id: k for k, m in enumerate(conv.messages)}

    def ahead() -> list:
        """The heard messages after the last pending one that the engine reads too (`LOOKAHEAD`), as if they
        had arrived while the burst was being classified; never past secure mode, which flushes the window."""
        out: list = []
        for message in conv.messages[position[pending[-1]] + 1 :]:
            if len(out) >= LOOKAHEAD or message.id in conv.secured:
                break
            if message.id in heard:
                out.append(message)
        return out

    def burst() -> None:
        nonlocal pending, countdown
        if pending:
            result = extract([*window, *ahead()][-WINDOW:], conv.ctx, set(pending), engine=engine)
            for kind in found:
                if kind == "actions":
                    for action in result.actions:
                        _store_action(found["actions"], action, extracted)
                elif kind == "decisions":
                    for decision in result.decisions:
                        _store_decision(found["decisions"], decision, extracted)
                else:
                    found[kind].extend(getattr(result, kind))
            extracted.update(pending)
        pending, countdown = [], None

    for message in conv.messages:
        if message.id in conv.secured:
            burst()
            window = []
        if message.id not in heard:
            continue
        result = classify(
            message.text, conv.ctx, message.author_id, list(message.mentions), window, message.ts, engine=engine
        )
        if labels:
            out.labels[message.id] = result.categories
        window = [*window, message][-WINDOW:]
        pending.append(message.id)
        if result.is_high_signal and countdown is None:
            countdown = AFTER_HIGH_SIGNAL
        elif countdown is not None:
            countdown -= 1
        if len(pending) >= BATCH or countdown == 0:
            burst()
    burst()
    out.result = ExtractResult(**found)
    return out


# As the store keeps them (shared with the stack's burst-by-burst extraction, `pipeline.offline.bursts`).
_store_decision = bursts.store_decision
_store_action = bursts.store_action


def match(predicted: list[set[str]], gold: list[set[str]]) -> list[tuple[int, int]]:
    """Greedy one-to-one matching, largest overlap first; of pairs with the same overlap, the one whose evidence
    is most alike (the larger share of their messages in common) first, then the earlier record and gold item.
    `jeeves eval` matches what the real pipeline stored with this function, so a record on the messages of two
    gold actions is scored against the same one in process and through the stack."""
    pairs = sorted(
        (
            (len(p & g), -len(p & g) / len(p | g), i, j)
            for i, p in enumerate(predicted)
            for j, g in enumerate(gold)
            if p & g
        ),
        key=lambda t: (-t[0], t[1], t[2], t[3]),
    )
    used_p: set[int] = set()
    used_g: set[int] = set()
    matches = []
    for _, _, i, j in pairs:
        if i not in used_p and j not in used_g:
            used_p.add(i)
            used_g.add(j)
            matches.append((i, j))
    return matches


def _prf(matched: int, predicted: int, gold: int) -> dict[str, float]:
    p = matched / predicted if predicted else 0.0
    r = matched / gold if gold else 0.0
    return {"p": round(p, 3), "r": round(r, 3), "f1": round(2 * p * r / (p + r), 3) if p + r else 0.0}


def score(runs: list[Replayed]) -> dict[str, Any]:
    """The figures of replayed conversations (see the module docstring)."""
    t: Counter[str] = Counter()
    shares: list[float] = []
    label_tp: Counter[str] = Counter()
    label_pred: Counter[str] = Counter()
    label_gold: Counter[str] = Counter()
    for run_ in runs:
        conv, res, gold = run_.conversation, run_.result, run_.conversation.gold
        texts = {m.id: m.text for m in conv.messages}
        heard = len(conv.heard)
        t["messages"] += heard
        for kind in ("decisions", "actions"):
            records = getattr(res, kind)
            matches = match([set(r.source_msg_ids) for r in records], [set(g["evidence"]) for g in gold[kind]])
            t[f"{kind}_pred"] += len(records)
            t[f"{kind}_gold"] += len(gold[kind])
            t[f"{kind}_match"] += len(matches)
            if kind == "actions":
                for i, j in matches:
                    g, p = gold["actions"][j], records[i]
                    owner_ok = p.owner_id == conv.member(g["owner"])
                    deadline_ok = (p.deadline.isoformat() if p.deadline else None) == g["deadline"]
                    t["owner_ok"] += owner_ok
                    t["deadline_ok"] += deadline_ok
                    t["status_ok"] += p.status == g.get("status", "open")
                    t["actions_exact"] += owner_ok and deadline_ok
        ignored = set(gold.get("ignored", [])) | conv.dropped | conv.to_bot
        for record in [*res.decisions, *res.actions, *res.signals]:
            t["ignored_evidence"] += len(set(record.source_msg_ids) & ignored)
            text = getattr(record, "summary", None) or getattr(record, "description", "")
            sources = [texts[i] for i in record.source_msg_ids if i in texts]
            long = [s for s in sources if len(s.split()) >= 8]
            if long:
                share = max(restate.kept_share(text, s) for s in long)
                shares.append(share)
                t["kept_ge_0_9"] += share >= 0.9
            t["ten_word_runs"] += longest_common_run(text, sources) >= 10
        t["signals"] += len(res.signals)
        for msg_id, predicted in run_.labels.items():
            truth = set(gold["categories"].get(msg_id, []))
            for cat in model.CATEGORIES:
                label_tp[cat] += cat in truth and cat in predicted
                label_pred[cat] += cat in predicted
                label_gold[cat] += cat in truth
    per_cat = {c: _prf(label_tp[c], label_pred[c], label_gold[c])["f1"] for c in model.CATEGORIES}
    return {
        "decisions": _prf(t["decisions_match"], t["decisions_pred"], t["decisions_gold"]),
        "actions": _prf(t["actions_match"], t["actions_pred"], t["actions_gold"]),
        # Actions found with their owner and their deadline right: what a reader of the action list can act on.
        "actions_exact": _prf(t["actions_exact"], t["actions_pred"], t["actions_gold"]),
        "owner_accuracy": round(t["owner_ok"] / t["actions_match"], 3) if t["actions_match"] else 0.0,
        "deadline_accuracy": round(t["deadline_ok"] / t["actions_match"], 3) if t["actions_match"] else 0.0,
        # Open or done as the conversation left it: what a status answer and the staleness nudges rest on.
        "status_accuracy": round(t["status_ok"] / t["actions_match"], 3) if t["actions_match"] else 0.0,
        "categories_macro_f1": round(sum(per_cat.values()) / len(per_cat), 3) if any(label_gold.values()) else None,
        "categories_f1": per_cat,
        "signals_per_100_messages": round(100 * t["signals"] / max(1, t["messages"]), 1),
        "kept_share_median": round(statistics.median(shares), 3) if shares else 0.0,
        "kept_ge_0_9": t["kept_ge_0_9"],
        "ten_word_runs": t["ten_word_runs"],
        "ignored_evidence": t["ignored_evidence"],
        "conversations": len(runs),
        "messages": t["messages"],
    }
