"""Celery's `threads` pool, waking the worker's event loop when a task ends (`--pool threads` is this pool:
jeeves/celery.py points Celery's alias at it).

With the Redis broker the worker fetches a message only from its event loop, and only while it has room
(`worker_prefetch_multiplier=1`: one message per thread). Celery's own thread pool acknowledges a task on the
thread that ran it and tells the loop nothing, so the loop, blocked in `poll()` with no socket to watch, does
not fetch the next message until its next timer, up to 10 s later (celery/celery#6941). A model-bound queue on
threads then ran a 0.3 s task every 5-10 s with its queue full (bench/pipeline_throughput.py: 0.8 calls/s at
concurrency 2). Here each task's end writes a byte to a pipe the loop watches: the loop wakes, sees the room
the acknowledgement made, and fetches at once.
"""

from __future__ import annotations

import os
from typing import Any

from celery.concurrency import thread


class TaskPool(thread.TaskPool):
    """Threads pool whose finished tasks wake the event loop (see the module's docstring)."""

    _wake_fd: int | None = None
    _read_fd: int | None = None

    def register_with_event_loop(self, loop: Any) -> None:
        super().register_with_event_loop(loop)
        if self._read_fd is None:  # registered again (a new loop after a lost broker): the same pipe
            read_fd, write_fd = os.pipe()
            os.set_blocking(read_fd, False)
            os.set_blocking(write_fd, False)
            self._read_fd, self._wake_fd = read_fd, write_fd
        loop.add_reader(self._read_fd, self._drain)

    def _drain(self, *_: Any) -> None:
        try:
            while os.read(self._read_fd, 4096):  # type: ignore[arg-type]
                pass
        except (BlockingIOError, OSError):
            pass

    def _wake(self, *_: Any) -> None:
        if self._wake_fd is not None:
            try:
                os.write(self._wake_fd, b"\0")
            except (BlockingIOError, OSError):  # the pipe is full (the loop is awake anyway) or closed
                pass

    def on_apply(self, *args: Any, **kwargs: Any) -> thread.ApplyResult:
        result = super().on_apply(*args, **kwargs)
        # Done means the callback has run: the task is acknowledged and its slot is free.
        result.f.add_done_callback(self._wake)
        return result

    def on_stop(self) -> None:
        super().on_stop()
        for fd in (self._wake_fd, self._read_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._wake_fd = self._read_fd = None
