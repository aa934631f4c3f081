"""Pipeline throughput: messages/s end to end (webhook → classified → extracted → embedded), counted from the database.

    python bench/pipeline_throughput.py          # offline engine with 1 then 2 worker processes per queue
                                                 # (the scaling ratio) and with 4 threads in one process per
                                                 # queue (the embedder batches concurrent tasks), then a model
                                                 # answering in 200 ms at worker concurrency 2, 4, 8
    python bench/pipeline_throughput.py --quick  # a smoke run (CI): 2 conversations, one setting of each,
                                                 # no warm-up
    python bench/pipeline_throughput.py --offline-only | --model-only

Its own gunicorn, Celery workers (classify, extract, embed: one worker per queue, `--concurrency N`) and
embedded Postgres and Valkey. The dev conversations are replayed side by side, each into a fresh channel,
through `POST /wire/events` by a few posting threads; a message counts once its receipt is settled
(routine, signal, extracted — or evicted/expired, reported) and every decision and action of those
channels has its vector. Posting holds back while more than `--backlog` messages per channel wait, as a
live channel would not outrun its window. The model runs use the fake OpenAI-compatible server of the
tests (tests/fakes/openai_server.py) answering the classify and extract slots after a fixed delay;
the embed slot stays the bundled MiniLM. Each setting also prints the CPU a message cost in each process
tree (a queue's worker with its pool children, web, the embedded Postgres and Valkey), which the machine's load
does not inflate as it does wall time. Target: ≥ 150 messages/s offline on 2 cores, 1 → 2 workers
≥ 1.6x, and with a 200 ms model ≥ 0.8 x concurrency / 0.2 s.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import threading
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field

import httpx
import psycopg
from _common import (
    PROCESSES,
    ROOT,
    SERVICE_PIDS,
    exit_on_sigterm,
    migrate,
    services,
    start_web,
    start_worker,
    tree_cpu_s,
)

SECRET = "bench-secret"
APP_ID = f"{uuid.uuid4()}@bench.example"


@dataclass
class Run:
    label: str
    messages: int
    seconds: float
    posted_s: float
    evicted: int
    expired: int
    model_calls: int
    busy: dict[str, tuple[int, float]] = field(default_factory=dict)  # queue → (tasks, seconds in tasks)
    slots: dict[str, int] = field(default_factory=dict)  # queue → tasks its worker runs at once
    cpu: dict[str, float] = field(default_factory=dict)  # process tree (a queue's worker, web, Postgres…) → CPU s

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


def conversations(limit: int | None) -> list[dict]:
    convs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((ROOT / "evalsets" / "dev").glob("conv-*.json"))]
    return convs[:limit] if limit else convs


def _events(conv: dict) -> tuple[str, dict, list[dict]]:
    """A fresh channel for the conversation: its id, app_added, and its text messages (none addressed to Jeeves)."""
    conv_qid = {"id": str(uuid.uuid4()), "domain": "bench.example"}
    org = conv["channel"]["org"]
    bot = next((m["id"] for m in conv["channel"]["members"] if (m.get("handle") or "").lower() == "jeeves"), None)

    def qid(user: str) -> dict[str, str]:
        return {"id": user, "domain": org}

    added = {
        "type": "app_added",
        "conversation": {"id": conv_qid, "name": conv["channel"].get("name"), "type": "GROUP"},
        "members": [
            {"userId": qid(m["id"]), "role": "MEMBER", "name": m.get("name"), "handle": m.get("handle")}
            for m in conv["channel"]["members"]
            if m["id"] != bot
        ],
        "timezone": conv["channel"].get("timezone"),
    }
    texts = [
        {
            "type": "text_message",
            "conversationId": conv_qid,
            "sender": qid(m["author"]),
            "messageId": m["id"],
            "timestamp": m["ts"],
            "text": m["text"],
            "mentions": [],
        }
        for m in conv["messages"]
        if m["author"] != bot and not m.get("mentions")  # commands go to `respond`, not through the tiers
    ]
    return f"{conv_qid['id']}@{conv_qid['domain']}", added, texts


_PROGRESS = """
SELECT count(*) FILTER (WHERE outcome IN ('queued', 'pending_extract')),
       count(*) FILTER (WHERE outcome = 'evicted'),
       count(*) FILTER (WHERE outcome = 'expired'),
       (SELECT count(*) FROM decisions d WHERE d.channel_id = ANY(%(ch)s)
          AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.source_id = d.id))
     + (SELECT count(*) FROM actions a WHERE a.channel_id = ANY(%(ch)s)
          AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.source_id = a.id)),
       count(*)
FROM message_receipts WHERE channel_id = ANY(%(ch)s)
"""


def replay(url: str, database_url: str, convs: list[dict], *, posters: int, backlog: int, timeout: float) -> Run:
    """Post every conversation side by side and wait until the database says the pipeline is done."""
    channels = [_events(c) for c in convs]
    ids = [cid for cid, _, _ in channels]
    total = sum(len(texts) for _, _, texts in channels)
    headers = {"Authorization": f"Bearer {SECRET}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        for _, added, _ in channels:
            client.post("/wire/events", json=added).raise_for_status()

    waiting = [0]  # messages of these channels not yet settled, refreshed by the watcher
    stop = threading.Event()
    errors: list[str] = []

    limit = backlog * len(channels)

    def post(mine: list[list[dict]]) -> None:
        # Round robin over this poster's channels, as side-by-side conversations arrive.
        queue = [t[i] for i in range(max(len(t) for t in mine)) for t in mine if i < len(t)]
        with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
            for event in queue:
                while waiting[0] >= limit and not stop.is_set():
                    time.sleep(0.02)
                response = client.post("/wire/events", json=event)
                if response.status_code != 200:
                    errors.append(f"HTTP {response.status_code}")
                    stop.set()
                    return

    groups = [[texts for _, _, texts in channels[i::posters]] for i in range(posters)]
    threads = [threading.Thread(target=post, args=(g,), daemon=True) for g in groups if g]
    conn = psycopg.connect(database_url, autocommit=True)
    started = time.perf_counter()
    for t in threads:
        t.start()
    posted_at = None
    deadline = time.monotonic() + timeout
    try:
        while True:
            busy, evicted, expired, unembedded, received = conn.execute(_PROGRESS, {"ch": ids}).fetchone()
            waiting[0] = busy
            if posted_at is None and not any(t.is_alive() for t in threads):
                posted_at = time.perf_counter()
            if errors:
                raise SystemExit(f"the webhook failed: {errors[0]}")
            if posted_at is not None and received >= total and busy == 0 and unembedded == 0:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"gave up after {timeout:.0f}s: {busy} messages busy, {unembedded} records unembedded")
            time.sleep(0.1)
        elapsed = time.perf_counter() - started
        calls = conn.execute(
            "SELECT count(*) FROM llm_calls WHERE channel_id = ANY(%s) AND model <> 'local'", [ids]
        ).fetchone()[0]
    finally:
        stop.set()
        conn.close()
    return Run("", total, elapsed, posted_at - started, evicted, expired, calls)


def _fake_model(delay_s: float):
    """The fake provider: classify calls one message in three high-signal, extract writes one decision and one
    action citing the newest new message of the window; every answer after `delay_s`."""
    sys.path.insert(0, str(ROOT))
    from tests.fakes.openai_server import Behaviour, FakeOpenAI

    def classify(body: dict) -> dict:
        payload = json.loads(body["messages"][-1]["content"])
        if "message" not in payload:  # the contradiction duty's pair judgement goes through the classify slot
            return {"verdict": "compatible", "reason": "Different matters.", "confidence": 0.9}
        text = payload["message"]["text"]
        high = int(hashlib.sha256(text.encode()).hexdigest(), 16) % 3 == 0
        return {
            "categories": ["decision"] if high else ["discussion"],
            "confidence": 0.9,
            "entities": [],
            "is_high_signal": high,
            "gist": "" if high else "A remark in passing about the work.",
        }

    def extract(body: dict) -> dict:
        window = json.loads(body["messages"][-1]["content"])["messages"]
        newest = [m["id"] for m in window if m["new"]][-1:] or [window[-1]["id"]]
        return {
            "decisions": [
                {
                    "summary": f"The team settled point {newest[0]} of the plan.",
                    "source_msg_ids": newest,
                    "confidence": 0.9,
                }
            ],
            "actions": [
                {
                    "description": f"Someone follows up on point {newest[0]}.",
                    "source_msg_ids": newest,
                    "confidence": 0.9,
                }
            ],
        }

    fake = FakeOpenAI().start()
    fake.default("bench-classify", Behaviour(reply=classify, delay_s=delay_s))
    fake.default("bench-extract", Behaviour(reply=extract, delay_s=delay_s))
    return fake


_SUCCEEDED = re.compile(rb"succeeded in ([0-9.]+)s")


def run_setting(
    env: dict[str, str], url: str, convs: list[dict], concurrency: int, pool: str, embed: tuple[int, str], args
) -> Run:
    """Start a worker per queue, warm them up on one conversation, then time the replay of all of them."""
    with ExitStack() as workers:
        logs = {
            "classify": start_worker(workers, env, "classify", concurrency, pool),
            "extract": start_worker(workers, env, "extract", concurrency, pool),
            "embed": start_worker(workers, env, "embed", *embed),
        }
        # Warm-up: the first tasks of each process load and probe the embedder (not in a smoke run).
        if not args.quick:
            replay(url, env["DATABASE_URL"], convs[:1], posters=1, backlog=args.backlog, timeout=args.timeout)
        offsets = {q: log.stat().st_size for q, log in logs.items()}
        # CPU of each queue's worker (main process and pool children), web, and the embedded Postgres and Valkey
        # (when the bench started them), over the timed replay.
        pids = {name.removeprefix("worker "): proc.pid for name, proc in PROCESSES}
        pids = {**{name: pids[name] for name in ("web", *logs)}, **SERVICE_PIDS}
        cpu = {name: tree_cpu_s(pid) for name, pid in pids.items()}
        run = replay(url, env["DATABASE_URL"], convs, posters=args.posters, backlog=args.backlog, timeout=args.timeout)
        run.cpu = {name: tree_cpu_s(pid) - cpu[name] for name, pid in pids.items()}
        for queue, log in logs.items():
            with log.open("rb") as f:
                f.seek(offsets[queue])
                times = [float(m) for m in _SUCCEEDED.findall(f.read())]
            run.busy[queue] = (len(times), sum(times))
        run.slots = {"classify": concurrency, "extract": concurrency, "embed": embed[0]}
        return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 conversations, one setting each")
    parser.add_argument("--conversations", type=int, default=0, help="dev conversations to replay (default: all)")
    parser.add_argument("--workers", default="1,2", help="offline engine: processes per queue to compare")
    parser.add_argument("--threads", type=int, default=4, help="offline engine: also one process x N threads (0: not)")
    parser.add_argument("--concurrency", default="2,4,8", help="model runs: worker concurrency per queue")
    parser.add_argument("--model-delay", type=float, default=0.2, help="seconds the fake model takes per call")
    parser.add_argument("--model-pool", default="threads", choices=("threads", "prefork"))
    parser.add_argument("--posters", type=int, default=4, help="threads posting to the webhook")
    parser.add_argument("--backlog", type=int, default=10, help="messages a channel may have waiting")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--offline-only", action="store_true")
    parser.add_argument("--model-only", action="store_true")
    args = parser.parse_args()
    exit_on_sigterm()
    if args.quick:
        args.conversations = args.conversations or 2
        args.workers, args.concurrency, args.threads = "1", "2", 0

    convs = conversations(args.conversations)
    with ExitStack() as stack:
        env = {**os.environ, **services(stack)}
        env.update(
            DJANGO_SETTINGS_MODULE="jeeves.settings",
            JEEVES_WIRE_SECRET=SECRET,
            JEEVES_WIRE_APP_ID=APP_ID,
            JEEVES_LOG_LEVEL="WARNING",
            # A backed-up queue must not expire the text it holds: the bench measures capacity, not the TTL.
            JEEVES_QUEUE_TTL_S="900",
            JEEVES_EXTRACT_DEBOUNCE_S="1",
            JEEVES_CHANNEL_RATE="0",  # throughput, not fairness: no per-channel bucket (bench/load.py measures it)
        )
        migrate(env)
        url = start_web(stack, env, workers=2)
        runs: list[Run] = []
        if not args.model_only:
            for n in [int(x) for x in args.workers.split(",")]:
                run = run_setting(env, url, convs, n, "prefork", (n, "prefork"), args)
                run.label = f"offline engine, {n} process{'es' if n > 1 else ''} per queue"
                runs.append(run)
                print(_line(run), flush=True)
            if len(runs) >= 2:
                print(
                    f"scaling {runs[0].label.split(', ')[1]} → {runs[-1].label.split(', ')[1]}: "
                    f"{runs[-1].rate / runs[0].rate:.2f}x (target ≥ 1.6x where cores allow)",
                    flush=True,
                )
            if args.threads:
                # One process per queue whose tasks run on threads: their embeddings share forward passes.
                n = args.threads
                run = run_setting(env, url, convs, n, "threads", (n, "threads"), args)
                run.label = f"offline engine, 1 process x {n} threads per queue"
                print(_line(run), flush=True)
        if not args.offline_only:
            fake = _fake_model(args.model_delay)
            stack.callback(fake.stop)
            model_env = {
                **env,
                "JEEVES_LLM_BASE_URL": fake.base_url,
                "JEEVES_LLM_API_KEY": "bench",
                "JEEVES_MODEL_CLASSIFY": "bench-classify",
                "JEEVES_MODEL_EXTRACT": "bench-extract",
            }
            for c in [int(x) for x in args.concurrency.split(",")]:
                # Embedding waits on no model: one process, whatever the model-bound queues get.
                run = run_setting(model_env, url, convs, c, args.model_pool, (1, "prefork"), args)
                run.label = f"{args.model_delay * 1000:.0f} ms model, concurrency {c} ({args.model_pool})"
                ideal = c / args.model_delay
                print(
                    f"{_line(run)}  model calls {run.model_calls}, "
                    f"{run.model_calls / run.seconds:.1f} calls/s = {run.model_calls / run.seconds / ideal:.2f}"
                    f" x concurrency / delay (target ≥ 0.8)",
                    flush=True,
                )


def _line(run: Run) -> str:
    # Busy: time in tasks over the time its slots had (wall x concurrency): well below 100 % is a worker waiting
    # for work (posting held back, debounce), not working.
    tiers = ", ".join(
        f"{q} {n} tasks {1000 * s / max(n, 1):.0f} ms each ({1000 * s / run.messages:.0f} ms/message,"
        f" busy {100 * s / (run.seconds * run.slots.get(q, 1)):.0f} %)"
        for q, (n, s) in run.busy.items()
    )
    # CPU per message of each process tree (worker main + pool children, gunicorn, Postgres, Valkey): what a message
    # costs whatever the machine's load (this bench's own posting not included); 2 cores / the total bounds msg/s.
    cpu = ", ".join(f"{name} {1000 * s / run.messages:.1f}" for name, s in run.cpu.items())
    total = 1000 * sum(run.cpu.values()) / run.messages
    return (
        f"{run.label:48} {run.messages:5d} messages in {run.seconds:6.1f} s = {run.rate:6.1f} messages/s"
        f" (posted in {run.posted_s:5.1f} s; evicted {run.evicted}, expired {run.expired})\n    time in tasks: {tiers}"
        f"\n    CPU ms/message: {cpu} (total {total:.1f})"
    )


if __name__ == "__main__":
    main()
