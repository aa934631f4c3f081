"""`jeeves up` on a fresh data dir: embedded Postgres + Valkey, every process, clean Ctrl-C, data reused."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import psutil
import psycopg
import pytest

from jeeves import embedded
from tests.conftest import ROOT, wait_for


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(data_dir: Path, web_port: int, redis_port: int, flower_port: int, log: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(
        JEEVES_DATA_DIR=str(data_dir),
        JEEVES_WEB_PORT=str(web_port),
        JEEVES_EMBEDDED_REDIS_PORT=str(redis_port),
        JEEVES_FLOWER_PORT=str(flower_port),
    )
    return subprocess.Popen(
        [sys.executable, "manage.py", "jeeves", "up", "--web-workers", "1"],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _stop(proc: subprocess.Popen, data_dir: Path) -> None:
    descendants = psutil.Process(proc.pid).children(recursive=True)
    assert len(descendants) >= 9  # valkey, web, five workers, beat, flower (+ their children)
    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
    proc.wait(timeout=60)
    gone, alive = psutil.wait_procs(descendants, timeout=15)
    assert not alive, f"left behind: {[p.pid for p in alive]}"
    postmasters = [
        p for p in psutil.process_iter(["name", "cmdline"]) if str(data_dir) in " ".join(p.info["cmdline"] or [])
    ]
    assert not postmasters, "embedded PostgreSQL still running"


@pytest.mark.timeout(400)
def test_up_runs_everything_and_ctrl_c_leaves_nothing_behind():
    data_dir = Path(tempfile.mkdtemp(prefix="jeeves-up-"))
    log = data_dir / "up.log"
    web, redis_port, flower = _free_port(), _free_port(), _free_port()
    proc = _start(data_dir, web, redis_port, flower, log)
    try:
        wait_for(lambda: "Jeeves is ready" in log.read_text(errors="replace") or proc.poll() is not None, timeout=240)
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        # It says so only once /readyz answers (Postgres, migrations, Redis, the models).
        assert _healthy(f"http://127.0.0.1:{web}/readyz")
        assert _healthy(f"http://127.0.0.1:{web}/healthz")
        admin = httpx.get(f"http://127.0.0.1:{web}/admin/", timeout=5)
        assert admin.status_code == 302 and "/admin/login/" in admin.headers["location"]
        assert httpx.get(f"http://127.0.0.1:{web}/admin/login/", timeout=5).status_code == 200
        wait_for(lambda: _healthy_flower(flower), timeout=60)
        wait_for(lambda: log.read_text(errors="replace").count(" ready.") >= 5, timeout=120)
        # Leave a mark to find on the next run.
        db_url = embedded.postgres_url(data_dir)
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO channel_config (channel_id, organisation_id) VALUES ('reuse@wire.example', 'wire.example')"
            )
    finally:
        _stop(proc, data_dir)

    # A later run reuses the data.
    proc = _start(data_dir, web, redis_port, flower, data_dir / "up2.log")
    try:
        wait_for(lambda: _healthy(f"http://127.0.0.1:{web}/healthz") or proc.poll() is not None, timeout=180)
        with psycopg.connect(embedded.postgres_url(data_dir), autocommit=True) as conn:
            row = conn.execute("SELECT organisation_id FROM channel_config WHERE channel_id = 'reuse@wire.example'")
            assert row.fetchone() == ("wire.example",)
    finally:
        _stop(proc, data_dir)


def _healthy_flower(port: int) -> bool:
    try:
        unauth = httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
        return unauth.status_code == 401
    except httpx.HTTPError:
        return False
