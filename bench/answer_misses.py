"""Why answers miss: each question of a split, with the offline engine's records seeded, decomposed.

    .venv/bin/python bench/answer_misses.py [evalsets/train] [--dump FILE] [--quiet]
    .venv/bin/python bench/answer_misses.py --quick    # a smoke run (CI): the first three conversations

For every answerable question whose first cited record is not an expected one, the cause:
- `absent`: no stored record overlaps the expected evidence (an extraction miss);
- `not-retrieved`: one is stored but no path found it;
- `ranked-below`: found, but the relevance model put another record first;
- `gated`: found, but the answer is "no record" (gate or floor);
and for no-record questions answered with records, the first record's probability and topicality.
`--dump` writes every question with all its candidates (features, probability, text, kind, status,
whether expected) and the stored expected records, as JSON, to study ranking and gates without asking
again. Read train's misses to find what is wrong in general; dev is for the figure only.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _qa_module():
    spec = importlib.util.spec_from_file_location("bench_retrieval_qa", Path(__file__).with_name("retrieval_qa.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stored(channel_id: str) -> list[dict]:
    """Every decision, action and signal stored for the channel, with its message ids."""
    from knowledge.models import Action, ConversationSignal, Decision

    out = []
    for model, kind, text in ((Decision, "decision", "summary"), (Action, "action", "description")):
        for r in model.objects.filter(channel_id=channel_id):
            out.append({"type": kind, "id": str(r.id), "text": getattr(r, text), "status": r.status,
                        "ids": (r.source_ref or {}).get("wire_msg_ids") or [], "tags": list(r.tags)})  # fmt: skip
    for s in ConversationSignal.objects.filter(channel_id=channel_id):
        out.append({"type": "signal", "id": str(s.id), "text": s.summary, "status": s.signal_type,
                    "ids": (s.source_ref or {}).get("wire_msg_ids") or [], "tags": list(s.tags)})  # fmt: skip
    return out


def study(conv: dict) -> list[dict]:
    from retrieval import evaluation, relevance
    from retrieval.ask import ask, retrieve
    from retrieval.config import RetrievalConfig
    from retrieval.plan import form_of
    from retrieval.scope import RetrievalScope

    cfg = dataclasses.replace(RetrievalConfig.from_settings(), top_n=1000)
    scorer = relevance.load()
    scope = RetrievalScope.for_asker(conv["channel"]["id"], evaluation.asker(conv))
    known = evaluation.evidence(conv)
    stored = _stored(conv["channel"]["id"])
    tags = {s["id"]: s["tags"] for s in stored}
    out = []
    for q in conv["gold"]["questions"]:
        wanted = evaluation.wanted(q, known)
        found = retrieve(q["q"], scope, cfg, scorer=scorer)
        result = ask(conv["channel"]["id"], evaluation.asker(conv), q["q"])
        cands = []
        for rank, f in enumerate(found.fused):
            r = found.records[f.key]
            if f.key not in found.features:
                continue
            d = r.detail
            cands.append(
                {
                    "key": list(f.key), "type": r.type, "status": r.status, "text": r.text,
                    "sim": r.similarity, "cov": r.coverage, "paths": list(f.paths), "fused": f.score,
                    "row": found.features[f.key], "p": found.scores[f.key], "citable": relevance.citable(r),
                    "expected": bool(evaluation.record_ids(r) & wanted), "confidence": r.confidence,
                    "occurred_at": r.occurred_at.isoformat(), "ids": sorted(evaluation.record_ids(r)),
                    "owner_name": d.get("owner_name"), "owner_id": d.get("owner_id"),
                    "deadline": d["deadline"].isoformat() if d.get("deadline") else None,
                    "superseded_by": d.get("superseded_by"), "decided_by": d.get("decided_by"),
                    "rationale": d.get("rationale"), "participants": d.get("participants"),
                    "friendly_id": r.friendly_id, "prob_rank": rank, "tags": tags.get(r.id, []),
                }
            )  # fmt: skip
        present = [s for s in stored if set(s["ids"]) & wanted]
        cited = [c.id for c in result.records]
        out.append(
            {
                "conversation": conv["id"], "question": q["q"], "kind": q["kind"], "no_record": not q["expected"],
                "wanted": sorted(wanted), "present": present, "candidates": cands,
                "plan": found.plan.model_dump(mode="json"), "form": form_of(q["q"]),
                "is_filter": relevance.is_filter(found.plan), "verification": relevance.is_verification(q["q"]),
                "answer": result.answer, "cited": cited,
                "cited_expected": [bool(evaluation.record_ids(c) & wanted) for c in result.records],
            }
        )  # fmt: skip
    return out


def cause(q: dict) -> str:
    """Why an answerable question's first cited record is not an expected one ('' when it is)."""
    if q["cited_expected"][:1] == [True]:
        return ""
    if not q["present"]:
        return "absent"
    found = [c for c in q["candidates"] if c["expected"] and c["citable"]]
    if not found:
        return "not-retrieved"
    if not q["cited"]:
        return "gated"
    return "ranked-below"


def text_quality(questions: list[dict], folder: Path) -> str:
    """For the ranked-below questions: the question's mean MiniLM cosine to the gold restatement of an expected
    record, to the stored record that rests on its evidence, and to the record cited first instead."""
    import numpy as np

    from pipeline import embedder

    rows = []
    for q in questions:
        if q["no_record"] or cause(q) != "ranked-below":
            continue
        conv = json.loads((folder / f"{q['conversation']}.json").read_text())
        records = conv["gold"]["decisions"] + conv["gold"]["actions"]
        gold = {r["id"]: r.get("summary") or r.get("description") for r in records}
        asked = next(x for x in conv["gold"]["questions"] if x["q"] == q["question"])
        restated = [gold[g] for g in asked["expected"] if g in gold]
        order = sorted((c for c in q["candidates"] if c["citable"]), key=lambda c: -c["p"])
        stored = next(c for c in order if c["expected"])
        if restated:
            rows.append((q["question"], restated[0], stored["text"], order[0]["text"]))
    if not rows:
        return "ranked-below: none"
    v = np.asarray(embedder.embed([t for r in rows for t in r]), dtype=float).reshape(len(rows), 4, -1)
    v /= np.linalg.norm(v, axis=2, keepdims=True)
    gold, stored, first = ((v[:, 0] * v[:, k]).sum(1) for k in (1, 2, 3))
    return (
        f"ranked-below ({len(rows)} with a gold restatement): question's mean cosine to the gold restatement"
        f" {gold.mean():.2f}, to the stored expected record {stored.mean():.2f}, to the record cited first"
        f" {first.mean():.2f}; the gold restatement is nearer than the first cited for {int((gold > first).sum())},"
        f" the stored expected record for {int((stored > first).sum())}"
    )


def _said(record: dict) -> str:
    return f"{record['type']}/{record['status']}: {record['text'][:110]}"


def report(questions: list[dict], verbose: bool, folder: Path | None = None) -> None:
    answerable = [q for q in questions if not q["no_record"]]
    causes = Counter(cause(q) or "top-1" for q in answerable)
    n = len(answerable)
    print(f"answerable {n}: " + ", ".join(f"{k} {v} ({v / n:.1%})" for k, v in causes.most_common()))
    # Yes/no questions have a gate of their own (relevance.is_verification): how each cause and the no-record
    # questions split between them and the rest, since most no-record questions are yes/no ones.
    yes_no = Counter(cause(q) or "top-1" for q in answerable if q["verification"])
    print(f"  of them yes/no {sum(yes_no.values())}: " + ", ".join(f"{k} {v}" for k, v in yes_no.most_common()))
    below = [q for q in answerable if cause(q) == "ranked-below"]
    if below:
        ranks = Counter()
        for q in below:
            order = sorted((c for c in q["candidates"] if c["citable"]), key=lambda c: -c["p"])
            first = next(i for i, c in enumerate(order) if c["expected"])
            ranks[min(first + 1, 6)] += 1
        print("  ranked-below: the first expected record's place by probability: " + str(dict(sorted(ranks.items()))))
        in_cited = sum(any(q["cited_expected"]) for q in below)
        print(f"  ranked-below with an expected record cited further down: {in_cited}")
        if folder is not None:
            print("  " + text_quality(questions, folder))
    none = [q for q in questions if q["no_record"]]
    wrong = [q for q in none if q["cited"]]
    print(
        f"no-record {len(none)}: answered with records {len(wrong)}; of them yes/no"
        f" {sum(q['verification'] for q in none)}, answered {sum(q['verification'] for q in wrong)}"
    )
    for q in wrong:
        order = sorted((c for c in q["candidates"] if c["citable"]), key=lambda c: -c["p"])
        top = max(order, key=lambda c: (c["sim"] or 0) + (c["cov"] or 0))
        print(
            f"  {q['conversation']} p={order[0]['p']:.2f} topicality={(top['sim'] or 0) + (top['cov'] or 0):.2f}"
            + (f" | {q['question']} -> {order[0]['text'][:80]}" if verbose else "")
        )
    if verbose:
        for q in answerable:
            c = cause(q)
            if c:
                order = sorted((x for x in q["candidates"] if x["citable"]), key=lambda x: -x["p"])
                exp = [x for x in order if x["expected"]]
                print(f"{c.upper()} {q['conversation']} [{q['kind']}/{q['form']}] {q['question']}")
                if order:
                    print(f"    first p={order[0]['p']:.2f} {_said(order[0])}")
                if exp:
                    print(f"    expected #{order.index(exp[0]) + 1} p={exp[0]['p']:.2f} {_said(exp[0])}")
                elif q["present"]:
                    print(f"    stored {_said(q['present'][0])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default=str(ROOT / "evalsets" / "train"))
    parser.add_argument("--dump", metavar="FILE")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--load", metavar="FILE", help="report from a dump instead of asking")
    parser.add_argument("--quick", action="store_true", help="a smoke run: the first three conversations")
    parser.add_argument("--folds", metavar="CACHE", help="train's records from its fold engines (retrieval_qa --folds)")
    args = parser.parse_args()
    if args.load:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jeeves.settings")
        import django

        django.setup()
        report(json.loads(Path(args.load).read_text()), not args.quiet, Path(args.path))
        return
    qa = _qa_module()
    qa.exit_on_sigterm()
    path = Path(args.path)
    files = sorted(path.glob("conv-*.json"))[: 3 if args.quick else None]
    convs = {c["id"]: c for c in (json.loads(f.read_text()) for f in files)}
    with qa.django_for(convs, qa.fold_seed(args.folds), "jeeves-bench-misses-"):
        questions = [q for conv in convs.values() for q in study(conv)]
        if args.dump:
            Path(args.dump).write_text(json.dumps(questions), encoding="utf-8")
        report(questions, not args.quiet, path)


if __name__ == "__main__":
    main()
