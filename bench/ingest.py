"""Webhook ingest benchmark: latency p50/p99 of `POST /wire/events` against a bare Django view on the same server.

    python bench/ingest.py                     # starts its own gunicorn (+ embedded Postgres/Valkey
                                               # unless DATABASE_URL / REDIS_URL are set), N=2000
    python bench/ingest.py --quick             # a smoke run (CI)
    python bench/ingest.py --against DIR       # also a gunicorn from another checkout of Jeeves (DIR, e.g.
                                               # `git worktree add /tmp/old main`), on the same services: A/B
    python bench/ingest.py --profile           # the webhook and the bare view in-process through Django's WSGI
                                               # handler (same services, same POST): CPU and wall per call, the
                                               # webhook's waits for Postgres and Redis, cProfile of each
    python bench/ingest.py --url http://127.0.0.1:8000 --secret $JEEVES_WIRE_SECRET
                                               # a running web process started with JEEVES_BENCH_ENDPOINTS=1

Each event is a `text_message` of one channel (receipt, window, claim-check, classify published; no
worker needs to run). Requests are sent one after another by one client (gunicorn's sync worker closes the
connection after each answer, so every request of every target includes its TCP connect), in rounds that
alternate which target goes first, so a neighbour's load hits every target alike; the ratio is read within
the run.
The baseline is the bare view (`/wire/bench/noop`, same server, same middleware) sent the same POST as the
webhook (body and headers; before 4 Dec 2026 it was a bare GET, still printed beside it); every body is
encoded before its request's clock starts. Target: ingest p99 ≤ 10 ms and ≤ 2x the bare view.
"""

from __future__ import annotations

import argparse
import json
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
    """One endpoint under measurement: a name, what to send for a request number (made before the clock starts:
    the body's JSON encoding is the client's work, not the server's) and the call sending it."""

    def __init__(
        self, name: str, prepare: Callable[[int], bytes | None], call: Callable[[bytes | None], httpx.Response]
    ):
        self.name = name
        self.prepare = prepare
        self.call = call
        self.latencies: list[float] = []

    def measure(self, numbers: range) -> None:
        for i in numbers:
            body = self.prepare(i)
            t0 = time.perf_counter()
            response = self.call(body)
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
    """The bare view and the webhook in-process, through Django's WSGI handler (no HTTP, no test client), each
    sent the same POST, in alternating rounds: CPU and wall time per call, the webhook's waits for Postgres and
    Redis, then a cProfile (CPU clock) of each, so what Django costs both and what only Jeeves adds read apart."""
    code = f"""
import cProfile, io, json, pstats, sys, time
from collections import defaultdict
sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(Path(__file__).parent)!r})
import django; django.setup()
from django.core.handlers.wsgi import WSGIHandler
from redis.client import Pipeline
from _common import pct
from ingest import _events
from knowledge import receipts
_, added, text, headers = _events({env["JEEVES_WIRE_SECRET"]!r})
app = WSGIHandler()
def call(path, body):
    environ = {{"REQUEST_METHOD": "POST", "PATH_INFO": path, "SCRIPT_NAME": "", "QUERY_STRING": "",
               "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80", "HTTP_HOST": "127.0.0.1", "SERVER_PROTOCOL": "HTTP/1.1",
               "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr,
               "wsgi.multithread": False, "wsgi.multiprocess": True, "wsgi.run_once": False,
               "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)),
               "HTTP_AUTHORIZATION": headers["Authorization"]}}
    status = []
    response = app(environ, lambda s, h, exc=None: status.append(s))
    b"".join(response)
    response.close()  # Django's request_finished: what the webhook left to after the response is done here
    assert status[0].startswith("200"), status
targets = {{"bare view": "/wire/bench/noop", "POST /wire/events": "/wire/events"}}
call("/wire/events", json.dumps(added).encode())
for i in range(200):
    for path in targets.values(): call(path, json.dumps(text(i, "warm" + path)).encode())
waits = defaultdict(float)
def timed(name, f):
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try: return f(*args, **kwargs)
        finally: waits[name] += time.perf_counter() - t0
    return wrapper
receipts._exec = timed("Postgres: BEGIN + admission (receipts._exec)", receipts._exec)
from django.core.signals import request_finished, request_started
from redis.commands.core import Script
hooks = (
    (request_finished, "request_finished", "knowledge.receipts.settle",
     "after the response: a COMMIT's answer, receipts sent"),
    (request_started, "request_started", "knowledge.receipts.request_started",
     "at the next request's start: answers read"),
)
for signal, name, uid, what in hooks:
    if hasattr(receipts, name):
        signal.disconnect(dispatch_uid=uid)
        hook = timed(f"Postgres: {{what}} (receipts.{{name}})", getattr(receipts, name))
        signal.connect(hook, dispatch_uid=uid, weak=False)
    elif name == "request_finished":  # the code before 5 Dec 2026
        signal.disconnect(dispatch_uid=uid)
        hook = timed("Postgres: the COMMIT's answer, after the response (receipts.settle)", receipts.settle)
        signal.connect(hook, dispatch_uid=uid, weak=False)
Pipeline.execute = timed("Redis: window, claim check, gated publish (Pipeline.execute)", Pipeline.execute)
Script.__call__ = timed("Redis: the admission script (gate, dedupe, window, claim check, publish)", Script.__call__)
rounds, per = 10, max(1, {n} // 10)
latencies, cpu = defaultdict(list), defaultdict(float)
for r in range(rounds):
    for name, path in (list(targets.items()) if r % 2 else list(targets.items())[::-1]):
        bodies = [json.dumps(text(i, f"{{name[:4]}}{{r}}")).encode() for i in range(per)]
        c0 = time.process_time()
        for body in bodies:
            t0 = time.perf_counter(); call(path, body); latencies[name].append((time.perf_counter() - t0) * 1000)
        cpu[name] += time.process_time() - c0
calls = rounds * per
print(f"{{calls}} calls each, in-process (no HTTP), same POST, alternating rounds")
for name, lat in latencies.items():
    per_call = f"CPU {{cpu[name] * 1000 / calls:.3f}} ms/call, wall p50 {{pct(lat, 50):.3f}} ms"
    print(f"{{name:20}} {{per_call}}, mean {{sum(lat) / calls:.3f}} ms")
for name, seconds in waits.items():
    print(f"  {{name}}: {{seconds * 1000 / calls:.3f}} ms/call wall")
mine = r"jeeves|knowledge|wire_bridge|pipeline|ground|redis/client|redis/connection|psycopg|pydantic"
for name, path in targets.items():
    bodies = [json.dumps(text(i, f"p{{name[:4]}}")).encode() for i in range({n})]
    profile = cProfile.Profile(time.process_time); profile.enable()
    for body in bodies: call(path, body)
    profile.disable()
    out = io.StringIO(); stats = pstats.Stats(profile, stream=out)
    print(f"\\n=== {{name}} under cProfile (CPU clock), {n} calls")
    stats.sort_stats("cumulative").print_stats(30)
    if path == "/wire/events": stats.sort_stats("cumulative").print_stats(mine, 30)
    stats.sort_stats("tottime").print_stats(15)
    print(out.getvalue())
"""
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**env, "JEEVES_BENCH_ENDPOINTS": "1"}, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running web process (with JEEVES_BENCH_ENDPOINTS=1); default: start one")
    parser.add_argument("--secret", default=os.environ.get("JEEVES_WIRE_SECRET") or "bench-secret")
    parser.add_argument("-n", "--events", type=int, default=2000, help="requests per target")
    parser.add_argument("--rounds", type=int, default=10, help="rounds alternating the targets' order")
    parser.add_argument("--workers", type=int, default=1, help="gunicorn workers when the bench starts the server")
    parser.add_argument("--against", type=Path, help="another checkout of Jeeves to measure side by side (A/B)")
    parser.add_argument(
        "--profile", action="store_true", help="profile the webhook and the bare view in-process instead"
    )
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
        headers = {**headers, "Content-Type": "application/json"}

        def post(path: str) -> Callable[[bytes | None], httpx.Response]:
            return lambda body: client.post(f"{url}{path}", content=body, headers=headers)

        def encoded(prefix: str) -> Callable[[int], bytes]:
            return lambda i: json.dumps(text(i, prefix)).encode()

        # The baseline is the bare view sent the very request the webhook is (same body, same headers, same
        # server and middleware); the bare GET (no body, no headers) is printed beside it, as measured before.
        targets = [
            Target("bare view, same POST", encoded("n"), post("/wire/bench/noop")),
            Target("bare view, GET", lambda i: None, lambda body: client.get(f"{url}/wire/bench/noop")),
            Target("POST /wire/events", encoded("a"), post("/wire/events")),
        ]
        if args.against:
            other = start_web(stack, {**env, "PYTHONPATH": str(args.against)}, args.workers, cwd=args.against)
            targets.append(
                Target(
                    f"… {args.against.name}",
                    encoded("b"),
                    lambda body: client.post(f"{other}/wire/events", content=body, headers=headers),
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
    print(f"{per_round * args.rounds} requests per target in {args.rounds} interleaved rounds, sequential")
    print(f"{'':28}{'p50 ms':>9}{'p99 ms':>9}{'p50 x':>8}{'p99 x':>8}")
    for target in targets:
        lat = target.latencies
        print(
            f"{target.name:28}{pct(lat, 50):9.2f}{pct(lat, 99):9.2f}"
            f"{pct(lat, 50) / pct(base, 50):8.2f}{pct(lat, 99) / pct(base, 99):8.2f}"
        )
    print("(x = ratio to the bare view sent the same POST; target ≤ 2, and p99 ≤ 10 ms)")


if __name__ == "__main__":
    main()
