"""Load and fairness through the real webhook, with the offline engine (the default) behind it.

    python bench/load.py                 # 50 messages/s for 5 minutes across 50 channels
    python bench/load.py --quick         # a smoke run (CI): 10 messages/s for 20 s across 10 channels
    python bench/load.py --fairness      # one channel at 10x the rate of nine others (2 vs 0.2 messages/s),
                                         # with a per-channel bucket below the flood's rate (--bucket 0.5,10)
                                         # on, then off: the nine's p95 webhook → settled (classified, and
                                         # extracted when high-signal), and the flood's
    python bench/load.py --fairness --quick --json   # what tests/chaos/test_fairness.py runs and asserts

Its own gunicorn (2 workers), one Celery worker per queue (classify, extract, embed, respond+summarise;
prefork, 1 process each) on an embedded Postgres and Valkey (or DATABASE_URL / REDIS_URL). Messages are sent
at a fixed rate by posting threads (open loop: a slow webhook does not slow the offered load). Reported:
ingest latency p50/p99 and 5xx answers, queue depths sampled every second (max, end), expired and evicted
counts, RSS of every process at start and end, and per message the time from the webhook's answer to its
receipt settling (the database's word, polled every 0.25 s). Messages are made up here (none from evalsets).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import threading
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field

import httpx
import psutil
import psycopg
import redis
from _common import PROCESSES, ROOT, exit_on_sigterm, migrate, pct, services, start_web, start_worker

SECRET = "load-secret"
APP_ID = f"{uuid.uuid4()}@load.example"
QUEUES = ("classify", "extract", "embed", "respond", "summarise")
SUBJECTS = ["the invoice job", "the retry queue", "the staging cluster", "the release notes", "the billing export"]
VERBS = ["move", "pin", "rename", "archive", "split"]
DAYS = ["Monday", "Tuesday", "Thursday", "Friday"]
TEMPLATES = [
    "ok let's {verb} {subject} by {day}, agreed",  # a decision
    "I'll {verb} {subject} before {day}",  # an action
    "has anyone looked at {subject} today?",  # a question
    "thanks, sounds good",  # routine
    "{subject} is slow again this morning",  # an update
]


def text(rng: random.Random) -> str:
    return rng.choice(TEMPLATES).format(verb=rng.choice(VERBS), subject=rng.choice(SUBJECTS), day=rng.choice(DAYS))


@dataclass
class Lane:
    """One channel and the rate it is sent at."""

    channel_id: str
    author: str
    rate: float
    sent: dict[str, float] = field(default_factory=dict)  # message id → when the webhook answered (monotonic)
    settled: dict[str, float] = field(default_factory=dict)


@dataclass
class Result:
    label: str
    seconds: float
    messages: int
    ingest_ms: list[float]
    five_xx: int
    expired: int
    evicted: int
    depth_max: dict[str, int]
    depth_end: dict[str, int]
    rss_start: dict[str, float]
    rss_end: dict[str, float]
    lanes: list[Lane]

    def settle_p95(self, lanes: list[Lane]) -> float:
        times = [lane.settled[m] - lane.sent[m] for lane in lanes for m in lane.settled]
        return pct(times, 95) if len(times) >= 2 else float("nan")

    def unsettled(self, lanes: list[Lane]) -> int:
        return sum(len(lane.sent) - len(lane.settled) for lane in lanes)


def rss() -> dict[str, float]:
    """MB of resident memory per started process (a worker with its prefork children)."""
    out: dict[str, float] = {}
    for name, proc in PROCESSES:
        try:
            root = psutil.Process(proc.pid)
            tree = [root, *root.children(recursive=True)]
            out[f"{name} ({len(tree)} proc)"] = sum(p.memory_info().rss for p in tree) / 2**20
        except psutil.NoSuchProcess:
            continue
    return out


def depths(client: redis.Redis) -> dict[str, int]:
    pipe = client.pipeline()
    for q in QUEUES:
        for step in ("", "\x06\x163", "\x06\x166", "\x06\x169"):
            pipe.llen(q + step)
    values = pipe.execute()
    return {q: sum(values[i * 4 : i * 4 + 4]) for i, q in enumerate(QUEUES)}


def run(url: str, env: dict[str, str], label: str, lanes: list[Lane], seconds: float, seed: int) -> Result:
    headers = {"Authorization": f"Bearer {SECRET}"}
    ids = [lane.channel_id for lane in lanes]
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        for lane in lanes:
            added = {
                "type": "app_added",
                "conversation": {"id": _qid(lane.channel_id), "name": "load", "type": "GROUP"},
                "members": [{"userId": _qid(lane.author), "role": "ADMIN", "name": "Ola Load", "handle": "ola"}],
            }
            client.post("/wire/events", json=added).raise_for_status()
    ingest: list[float] = []
    five_xx = [0]
    lock = threading.Lock()
    stop = threading.Event()
    r = redis.Redis.from_url(env["REDIS_URL"])
    depth_max = dict.fromkeys(QUEUES, 0)
    rss_start = rss()

    def post(lane: Lane, rng: random.Random) -> None:
        start = time.monotonic()
        n = 0
        with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
            while not stop.is_set():
                due = start + n / lane.rate
                if due > start + seconds:
                    return
                if due > time.monotonic():
                    time.sleep(due - time.monotonic())
                mid = f"l{n:06d}"
                event = {
                    "type": "text_message",
                    "conversationId": _qid(lane.channel_id),
                    "sender": _qid(lane.author),
                    "messageId": mid,
                    "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "text": text(rng),
                    "mentions": [],
                }
                t0 = time.perf_counter()
                try:
                    response = client.post("/wire/events", json=event)
                    status = response.status_code
                except httpx.TransportError:
                    status = 599
                answered = time.monotonic()
                with lock:
                    ingest.append((time.perf_counter() - t0) * 1000)
                    if status >= 500:
                        five_xx[0] += 1
                    else:
                        lane.sent[mid] = answered
                n += 1

    rngs = random.Random(seed)
    threads = [threading.Thread(target=post, args=(lane, random.Random(rngs.random())), daemon=True) for lane in lanes]
    conn = psycopg.connect(env["DATABASE_URL"], autocommit=True)
    started = time.monotonic()
    for t in threads:
        t.start()
    by_channel = {lane.channel_id: lane for lane in lanes}
    deadline = started + seconds + 300
    last_depth = 0.0
    try:
        while True:
            now = time.monotonic()
            rows = conn.execute(
                "SELECT channel_id, wire_msg_id FROM message_receipts WHERE channel_id = ANY(%s)"
                " AND outcome NOT IN ('queued', 'pending_extract')",
                [ids],
            ).fetchall()
            for channel_id, mid in rows:
                lane = by_channel[channel_id]
                if mid in lane.sent and mid not in lane.settled:
                    lane.settled[mid] = now
            if now - last_depth >= 1:
                last_depth = now
                for q, d in depths(r).items():
                    depth_max[q] = max(depth_max[q], d)
            posting = any(t.is_alive() for t in threads)
            if not posting and all(len(lane.settled) >= len(lane.sent) for lane in lanes):
                break
            if now > deadline:
                stop.set()
                break
            time.sleep(0.25)
        expired, evicted = conn.execute(
            "SELECT count(*) FILTER (WHERE outcome = 'expired'), count(*) FILTER (WHERE outcome = 'evicted')"
            " FROM message_receipts WHERE channel_id = ANY(%s)",
            [ids],
        ).fetchone()
    finally:
        stop.set()
        conn.close()
    return Result(
        label=label,
        seconds=time.monotonic() - started,
        messages=sum(len(lane.sent) for lane in lanes),
        ingest_ms=ingest,
        five_xx=five_xx[0],
        expired=expired,
        evicted=evicted,
        depth_max=depth_max,
        depth_end=depths(r),
        rss_start=rss_start,
        rss_end=rss(),
        lanes=lanes,
    )


def _qid(qualified: str) -> dict[str, str]:
    ident, _, domain = qualified.partition("@")
    return {"id": ident, "domain": domain}


def lanes(n: int, rate: float) -> list[Lane]:
    return [Lane(f"{uuid.uuid4()}@load.example", f"{uuid.uuid4()}@load.example", rate) for _ in range(n)]


def report(result: Result) -> None:
    print(f"\n{result.label}: {result.messages} messages accepted in {result.seconds:.0f} s")
    print(
        f"  ingest p50 {pct(result.ingest_ms, 50):.1f} ms, p99 {pct(result.ingest_ms, 99):.1f} ms;"
        f" 5xx {result.five_xx}; expired {result.expired}; evicted {result.evicted};"
        f" unsettled at the end {result.unsettled(result.lanes)}"
    )
    print(f"  webhook → settled p95 {result.settle_p95(result.lanes):.1f} s")
    print("  queue depth max: " + ", ".join(f"{q} {d}" for q, d in result.depth_max.items()))
    print("  queue depth end: " + ", ".join(f"{q} {d}" for q, d in result.depth_end.items()))
    for name in result.rss_end:
        print(f"  RSS {name}: {result.rss_start.get(name, float('nan')):.0f} MB → {result.rss_end[name]:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke run (CI)")
    parser.add_argument("--rate", type=float, default=50.0, help="messages per second in all")
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--channels", type=int, default=50)
    parser.add_argument("--fairness", action="store_true", help="one channel at 10x nine others, bucket on and off")
    parser.add_argument("--quiet-rate", type=float, default=0.2, help="fairness: messages/s of each quiet channel")
    parser.add_argument(
        "--bucket",
        default="0.5,10",
        help="fairness: JEEVES_CHANNEL_RATE,JEEVES_CHANNEL_BURST of the 'on' run (below the flood's rate, and the"
        " in-limit traffic within what one classify process handles on this machine)",
    )
    parser.add_argument("--json", action="store_true", help="fairness: print one JSON line of the figures")
    args = parser.parse_args()
    exit_on_sigterm()
    if args.quick:
        args.rate, args.seconds, args.channels = 10.0, 20.0, 10
        if args.fairness:
            args.seconds = 40.0

    with ExitStack() as stack:
        env = {
            **os.environ,
            **services(stack),
            "DJANGO_SETTINGS_MODULE": "jeeves.settings",
            "PYTHONPATH": str(ROOT),
            "JEEVES_WIRE_SECRET": SECRET,
            "JEEVES_WIRE_APP_ID": APP_ID,
            "JEEVES_LOG_LEVEL": "WARNING",
            "JEEVES_EXTRACT_DEBOUNCE_S": "2",
        }
        migrate(env)
        if not args.fairness:
            url = start_web(stack, env, workers=2)
            _workers(stack, env)
            result = run(url, env, "load", lanes(args.channels, args.rate / args.channels), args.seconds, seed=1)
            report(result)
            return
        figures = {}
        for bucket in ("on", "off"):
            rate, burst = args.bucket.split(",")
            benv = {**env, "JEEVES_CHANNEL_RATE": rate if bucket == "on" else "0", "JEEVES_CHANNEL_BURST": burst}
            with ExitStack() as inner:
                PROCESSES.clear()
                url = start_web(inner, benv, workers=2)
                _workers(inner, benv)
                quiet = lanes(9, args.quiet_rate)
                flood = lanes(1, args.quiet_rate * 10)
                result = run(url, benv, f"fairness, bucket {bucket}", [*flood, *quiet], args.seconds, seed=2)
                report(result)
                figures[bucket] = {
                    "quiet_p95_s": round(result.settle_p95(quiet), 2),
                    "flood_p95_s": round(result.settle_p95(flood), 2),
                    "quiet_unsettled": result.unsettled(quiet),
                    "flood_unsettled": result.unsettled(flood),
                    "expired": result.expired,
                    "five_xx": result.five_xx,
                    "quiet_messages": sum(len(lane.sent) for lane in quiet),
                    "flood_messages": sum(len(lane.sent) for lane in flood),
                }
                f = figures[bucket]
                print(f"  the nine quiet channels' p95 {f['quiet_p95_s']} s, the flooding one's {f['flood_p95_s']} s")
        if args.json:
            print(json.dumps(figures))


def _workers(stack: ExitStack, env: dict[str, str]) -> None:
    for queue in ("classify", "extract", "embed", "respond,summarise"):
        start_worker(stack, env, queue, 1)


if __name__ == "__main__":
    main()
