"""Postgres unavailable for 30 s: a PostgreSQL of the test's own (embedded), stopped mid-stream and started
again. While it is away the webhook admits messages of channels its Redis gate knows (their receipts written
later) and answers 503 with Retry-After within the backend timeout for the others (Wire retries);
tasks in flight fail on the database and are retried with backoff and jitter (pipeline.tasks.BACKEND_RETRY),
completing once it is back; an extraction is one transaction, so nothing is half-written: every accepted
message ends recorded exactly once, or counted."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.chaos import harness
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

AWAY_S = 30


@pytest.mark.chaos
@pytest.mark.timeout(900)
def test_postgres_away_for_30_seconds_answers_503_and_every_task_completes_after(chaos_redis, record_row):
    import subprocess
    import sys

    from jeeves import embedded

    pgdata = Path(tempfile.mkdtemp(prefix="jeeves-chaos-pg-")) / "pg"
    fake = harness.provider()
    web = worker = traffic = None
    try:
        admin = embedded.start_postgres(pgdata, delete_on_exit=True)
        embedded.ensure_database(admin, "jeeves_chaos")
        dsn = admin.rsplit("/", 1)[0] + "/jeeves_chaos"
        env = {**harness.stack_env(chaos_redis.url, fake), "DATABASE_URL": dsn}
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        harness.DSN["url"] = dsn
        web = harness.WebProcess(env)
        worker = harness.start_worker(env, "chaos-pg")
        traffic = harness.Traffic(web.url)
        traffic.open_channels(3)
        traffic.run(12, rate=4)

        embedded.pg_ctl(["-w", "-m", "fast", "stop"], pgdata)
        away = time.monotonic()
        during = threading.Thread(target=lambda: traffic.run(6, rate=1, first=100), daemon=True)
        during.start()
        started = time.monotonic()
        # A channel the webhook's Redis gate does not know yet is admitted in Postgres: 503. The known ones are
        # admitted in Redis meanwhile, their receipts written by the worker once Postgres is back.
        newcomer = harness.Channel(f"{uuid.uuid4()}@{harness.DOMAIN}", f"{uuid.uuid4()}@{harness.DOMAIN}")
        probe = traffic.client.post("/wire/events", json=traffic.text(newcomer, 999))
        took = time.monotonic() - started
        assert probe.status_code == 503 and probe.headers.get("Retry-After"), probe.status_code
        assert took < 10, took  # within the backend timeout (1 s here) and libpq's connect timeout
        time.sleep(max(0.0, AWAY_S - (time.monotonic() - away)))
        # restart, not start: it takes up the options the server last ran with (postmaster.opts: port, socket dir)
        embedded.pg_ctl(["-w", "-l", str(pgdata / "log"), "restart"], pgdata)
        during.join(timeout=180)
        traffic.run(12, rate=4, first=200)
        harness.settle(traffic, timeout=300)
        result = harness.tally("Postgres away 30 s", traffic)
        record_row(result)
        retried = worker.log().count(" retry: Retry in ")
    finally:
        harness.DSN["url"] = None
        for proc in (worker, web):
            if proc is not None:
                proc.stop()
        fake.stop()
        if traffic is not None:
            traffic.close()
        embedded.stop_postgres(pgdata)
        shutil.rmtree(pgdata.parent, ignore_errors=True)
    assert traffic.retry_after_seen == traffic.five_xx
    assert result.duplicated == 0 and result.lost == 0 and result.canaries == 0, result
    assert result.found + result.expired == sum(len(v) for v in traffic.accepted.values()), result
    print(f"tasks retried while Postgres was away: {retried}")
