"""Webhook ingest benchmark: latency p50/p99 of `POST /wire/events` against a bare Django view on the same server.

    python bench/ingest.py                     # starts its own gunicorn (+ embedded Postgres/Valkey
                                               # unless DATABASE_URL / REDIS_URL are set), N=2000
    python bench/ingest.py --quick             # a smoke run (CI)
    python bench/ingest.py --against DIR       # also a gunicorn from another checkout of Jeeves (DIR, e.g.
                                               # `git worktree add /tmp/old main`), on the same services: A/B
    python bench/ingest.py --profile           # cProfile (CPU time) of the webhook in-process (Django's test
                                               # client, same services): where a message's time goes
    python bench/ingest.py --url http://127.0.0.1:8000 --secret $JEEVES_WIRE_SECRET
                                               # a running web process started with JEEVES_BENCH_ENDPOINTS=1

Each event is a `text_message` of one channel (receipt, window, claim-check, classify published; no
worker needs to run). The baseline is `GET /wire/bench/noop` on the same server. Requests are sent
sequentially on a kept-alive connection, in rounds that alternate which target goes first, so a
neighbour's load hits every target alike; the ratio is read within the run. Target: ingest p99
≤ 10 ms and ≤ 2x the bare view.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import httpx
from _common import ROOT, exit_on_sigterm, migrate, pct, services, start_web

TEXT = "shall we move the retry worker to the new queue on Thursday"


class Target:
    """One endpoint under measurement: a name and a call taking a request number."""

    def __init__(self, name: str, call: Callable[[int], httpx.Response]) -> None:
        self.name = name
        self.call = call
        self.latencies: list[float] = []

    def measure(self, numbers: range) -> None:
        for i in numbers:
            t0 = time.perf_counter()
            response = self.call(i)
            self.latencies.append((time.perf_counter() - t0) * 1000)
            if response.status_code not in (200, 202):
                raise SystemExit(f"{self.name}: unexpected HTTP {response.status_code}: {response.text[:200]}")


def _events(secret: str) -> tuple[dict, dict, Callable[[int, str], dict], dict[str, str]]:
    conv = {"id": str(uuid.uuid4()), "domain": "bench.example"}
    sender = {"id": str(uuid.uuid4()), "domain": "bench.example"}
    added = {
        "type": "app_added",
        "conversation": {"id": conv, "name": "bench", "type": "GROUP"},
        "members": [{"userId": sender, "role": "ADMIN"}],
    }

    def text(i: int, prefix: str) -> dict:
        return {
            "type": "text_message",
            "conversationId": conv,
            "sender": sender,
            "messageId": f"{prefix}-{i}",
            "timestamp": "2026-03-02T09:00:00Z",
            "text": TEXT,
            "mentions": [],
        }

    return conv, added, text, {"Authorization": f"Bearer {secret}"}


def _profile(env: dict[str, str], n: int) -> None:
    """cProfile over `n` webhook calls through Django's test client in a child process with the bench's env."""
    code = f"""
import cProfile, io, json, pstats, sys, time
sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(Path(__file__).parent)!r})
import django; django.setup()
from django.test import Client
from ingest import _events
_, added, text, headers = _events({env["JEEVES_WIRE_SECRET"]!r})
client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=headers["Authorization"])
def post(body): return client.post("/wire/events", json.dumps(body), content_type="application/json")
assert post(added).status_code == 200
for i in range(100): assert post(text(i, "warm")).status_code == 200
# CPU time, not wall time: on a shared machine the wall clock mostly measures the neighbours.
profile = cProfile.Profile(time.process_time); t0, c0 = time.perf_counter(), time.process_time(); profile.enable()
for i in range({n}): post(text(i, "p"))
profile.disable()
wall, cpu = (time.perf_counter() - t0) * 1000 / {n}, (time.process_time() - c0) * 1000 / {n}
print(f"{n} webhook calls under the profiler: {{wall:.2f}} ms wall, {{cpu:.2f}} ms CPU per call")
out = io.StringIO(); stats = pstats.Stats(profile, stream=out)
mine = r"jeeves|knowledge|wire_bridge|pipeline|send_task|psycopg/cursor|redis/client"
stats.sort_stats("cumulative").print_stats(mine, 40)
stats.sort_stats("tottime").print_stats(15)
print(out.getvalue())
"""
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running web process (with JEEVES_BENCH_ENDPOINTS=1); default: start one")
    parser.add_argument("--secret", default=os.environ.get("JEEVES_WIRE_SECRET") or "bench-secret")
    parser.add_argument("-n", "--events", type=int, default=2000, help="requests per target")
    parser.add_argument("--rounds", type=int, default=10, help="rounds alternating the targets' order")
    parser.add_argument("--workers", type=int, default=1, help="gunicorn workers when the bench starts the server")
    parser.add_argument("--against", type=Path, help="another checkout of Jeeves to measure side by side (A/B)")
    parser.add_argument("--profile", action="store_true", help="profile the webhook in-process instead")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 200 requests per target")
    args = parser.parse_args()
    exit_on_sigterm()
    if args.quick:
        args.events, args.rounds = 200, 2

    with ExitStack() as stack:
        if args.url:
            url, env = args.url, {}
        else:
            env = {**os.environ, **services(stack)}
            env.update(
                DJANGO_SETTINGS_MODULE="jeeves.settings", JEEVES_WIRE_SECRET=args.secret, JEEVES_LOG_LEVEL="WARNING"
            )
            migrate(env)
            if args.profile:
                _profile(env, args.events)
                return
            url = start_web(stack, env, args.workers)
        client = stack.enter_context(httpx.Client(timeout=10))
        _, added, text, headers = _events(args.secret)
        client.post(f"{url}/wire/events", json=added, headers=headers).raise_for_status()
        targets = [
            Target("bare view (baseline)", lambda i: client.get(f"{url}/wire/bench/noop")),
            Target(
                "POST /wire/events", lambda i: client.post(f"{url}/wire/events", json=text(i, "a"), headers=headers)
            ),
        ]
        if args.against:
            other = start_web(stack, {**env, "PYTHONPATH": str(args.against)}, args.workers, cwd=args.against)
            targets.append(
                Target(
                    f"… {args.against.name}",
                    lambda i: client.post(f"{other}/wire/events", json=text(i, "b"), headers=headers),
                )
            )
        for target in targets:  # warm-up: connections, imports, query plans
            target.measure(range(-50, 0))
            target.latencies.clear()
        per_round = max(1, args.events // args.rounds)
        for r in range(args.rounds):
            order = targets[r % len(targets) :] + targets[: r % len(targets)]
            for target in order:
                target.measure(range(r * per_round, (r + 1) * per_round))

    base = targets[0].latencies
    print(f"{per_round * args.rounds} requests per target in {args.rounds} interleaved rounds, sequential, keep-alive")
    print(f"{'':28}{'p50 ms':>9}{'p99 ms':>9}{'p50 x':>8}{'p99 x':>8}")
    for target in targets:
        lat = target.latencies
        print(
            f"{target.name:28}{pct(lat, 50):9.2f}{pct(lat, 99):9.2f}"
            f"{pct(lat, 50) / pct(base, 50):8.2f}{pct(lat, 99) / pct(base, 99):8.2f}"
        )
    print("(x = ratio to the bare view; target ≤ 2, and p99 ≤ 10 ms)")


if __name__ == "__main__":
    main()
