"""Timeouts at the edge: a black-holed Redis or Postgres (it accepts the connection and never answers)
makes the real web process answer 503 with Retry-After within the backend timeout, not hang until
gunicorn kills the worker (a 502)."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import WebProcess, service_env
from tests.fakes.wire import sidecar_text

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "timeout-secret"
TIMEOUT_S = 1  # JEEVES_BACKEND_TIMEOUT_S for the web process under test


@pytest.fixture
def black_hole() -> Iterator[str]:
    """A TCP port whose kernel completes the handshake (listen backlog) but no one ever reads or answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def _post_text(redis_url: str, **extra: str) -> tuple[httpx.Response, float]:
    """One text event posted at a real web process on these settings (stopped afterwards): its answer and the
    time it took."""
    env = service_env(redis_url, JEEVES_WIRE_SECRET=SECRET, JEEVES_BACKEND_TIMEOUT_S=str(TIMEOUT_S), **extra)
    web = WebProcess(env, timeout_s=30)
    try:
        conv = f"{uuid.uuid4()}@wire.example"
        event = sidecar_text(conv, f"{uuid.uuid4()}@wire.example", "m1", "the retry budget is three attempts")
        started = time.monotonic()
        response = httpx.post(
            f"{web.url}/wire/events", json=event, headers={"Authorization": f"Bearer {SECRET}"}, timeout=60
        )
        return response, time.monotonic() - started
    finally:
        web.stop()


def test_a_black_holed_redis_answers_503_within_the_timeout(redis_url, black_hole):
    response, took = _post_text(redis_url, REDIS_URL=f"redis://{black_hole}/0")
    assert response.status_code == 503 and response.headers["Retry-After"]
    # Window push (read timeout, one retry) then the rollback: a few timeouts, far from gunicorn's 30 s.
    assert took < 6 * TIMEOUT_S, took


def test_a_black_holed_postgres_answers_503_within_the_timeout(redis_url, black_hole):
    host, port = black_hole.split(":")
    response, took = _post_text(redis_url, DATABASE_URL=f"postgresql://jeeves@{host}:{port}/jeeves")
    assert response.status_code == 503 and response.headers["Retry-After"]
    assert took < 6 * TIMEOUT_S + 2, took  # libpq's connect timeout is whole seconds, at least 2
