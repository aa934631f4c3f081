"""The retrieval paths side by side: each runs in a thread of a small per-process pool, on that thread's own
database connection, so a question waits for its slowest path instead of the sum of them.

The pool's connections are Django's (one per thread, kept open between questions) and serve only retrieval
reads, so they carry the iterative HNSW scan's settings for their whole session (`paths.configure_session`).
Inside a transaction of the caller's (a test, or a caller that must see its own uncommitted writes) the jobs
run one after another on the caller's connection instead: another connection could not see those rows.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

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
