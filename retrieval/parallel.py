"""The retrieval paths side by side: groups of their statements run on the threads of a small per-process pool,
each on that thread's own database connection, each group in one round trip (`pipeline`), so a question waits
for its slowest group instead of the sum of them.

The pool's connections are Django's (one per thread, kept open between questions) and serve only retrieval
reads, so they carry the iterative HNSW scan's settings for their whole session (`paths.configure_session`).
Inside a transaction of the caller's (a test, or a caller that must see its own uncommitted writes) the jobs
run one after another on the caller's connection instead: another connection could not see those rows.
"""

from __future__ import annotations

import functools
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import psycopg
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections

T = TypeVar("T")

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_pid: int | None = None
_connections: list = []  # the pool threads' connection wrappers, to close them (tests drop their database)


def _executor(threads: int) -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _lock:
        # A forked child (a prefork worker) gets a pool of its own: threads do not survive a fork.
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="retrieval")
            _pool_pid = os.getpid()
            _connections.clear()
        return _pool


def _timed(job: Callable[[], T], prepare: Callable[[], None]) -> tuple[T, float]:
    """Run `job` on this thread's connection; a database error closes it, so the next job reconnects."""
    wrapper = connections[DEFAULT_DB_ALIAS]
    with _lock:
        if not any(w is wrapper for w in _connections):
            _connections.append(wrapper)
    started = time.perf_counter()
    try:
        prepare()
        result = job()
    except DatabaseError:
        connection.close()
        raise
    return result, round((time.perf_counter() - started) * 1000, 2)


def run(
    jobs: Mapping[str, Callable[[], T]], *, threads: int, prepare: Callable[[], None]
) -> dict[str, tuple[T, float]]:
    """name → (result, ms) of every job; `prepare` readies a pool thread's connection (idempotent)."""
    if connection.in_atomic_block or threads < 1:
        out = {}
        for name, job in jobs.items():
            started = time.perf_counter()
            out[name] = (job(), round((time.perf_counter() - started) * 1000, 2))
        return out
    pool = _executor(threads)
    futures = {name: pool.submit(_timed, job, prepare) for name, job in jobs.items()}
    return {name: future.result() for name, future in futures.items()}


def call(job: Callable[[], T], *, threads: int, prepare: Callable[[], None]) -> T:
    """`job` on a pool thread's connection (readied by `prepare`), waited for."""
    return _executor(threads).submit(_timed, job, prepare).result()[0]


def close() -> None:
    """Close the pool's connections and stop its threads (a later question starts a new pool)."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=True)
    for wrapper in list(_connections):
        wrapper.inc_thread_sharing()
        try:
            wrapper.close()
        finally:
            wrapper.dec_thread_sharing()
    _connections.clear()


@dataclass(frozen=True)
class Statement:
    """One statement of a pipeline. `generic`: on a connection whose session runs prepared statements with their
    generic plan (`paths.configure_session`), prepared (server-side binding) and planned once per connection;
    otherwise, and without it, its parameters are bound on the client and it is planned with them as constants."""

    sql: str
    params: Mapping[str, object] = field(default_factory=dict)
    generic: bool = False


def pipeline(statements: Sequence[Statement], *, prepared: bool) -> list[list[tuple]]:
    """Each statement's rows (an empty list for one that returns none), in order, from one round trip on this
    thread's connection (psycopg pipeline mode: the statements are sent together and the server runs them one
    after another without waiting for the client). `prepared`: this connection runs `generic` statements
    prepared. Outside a transaction the statements up to the pipeline's sync are one transaction (an error
    in one skips the rest, and raises)."""
    connection.ensure_connection()
    raw = connection.connection
    with connection.wrap_database_errors:
        cursors: list[psycopg.Cursor] = []
        with raw.pipeline():
            for statement in statements:
                if statement.generic and prepared:
                    cur = psycopg.RawCursor(raw)
                    query, names = _numbered(statement.sql)
                    cur.execute(query, [statement.params[name] for name in names], prepare=True)
                else:
                    cur = psycopg.ClientCursor(raw)
                    cur.execute(statement.sql, statement.params, prepare=False)
                cursors.append(cur)
        # Leaving the pipeline sends its sync and reads every result (one round trip).
        rows = [cur.fetchall() if cur.description is not None else [] for cur in cursors]
        for cur in cursors:
            cur.close()
    return rows


_NAMED = re.compile(r"%\((\w+)\)s")


@functools.lru_cache(maxsize=256)
def _numbered(sql: str) -> tuple[str, tuple[str, ...]]:
    """`sql` with its `%(name)s` placeholders numbered ($1, $2, ... in order of first use) and the names in that
    order: what psycopg's cursor works out on every call for a statement over 4,096 characters (it caches only
    shorter ones), the folded paths' among them. Text only, never a value."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    if "%%" in sql or re.search(r"%[^(]", sql):
        raise ValueError("a statement with placeholders other than %(name)s")
    return _NAMED.sub(number, sql), tuple(names)
