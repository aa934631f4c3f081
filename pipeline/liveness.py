"""Liveness: leases for running work, and the sweeper that puts a dead worker's tasks back in time.

Celery runs with `acks_late`: a task stays in the broker's `unacked` hash until it finishes. When a
prefork child dies its parent requeues the task at once (`reject_on_worker_lost`), but when the whole
worker (or its node) dies nobody does, and Redis hands the task back only after the transport's
`visibility_timeout` (900 s, above the longest hard time limit). A classify or respond task expires
after `JEEVES_QUEUE_TTL_S` (60 s): without more, a dead node's messages and questions were dropped,
and a dead extraction's channel lock stalled the channel for 300 s.

So:
- every running task holds a lease `jeeves:lease:{task_id}` (`JEEVES_TASK_LEASE_S`), renewed every
  third of it by a thread of the process running the task; an extraction's channel lock is renewed
  the same way (`hold_key`), so the lock of a run that died frees itself within one lease;
- every worker's main process runs a sweeper thread; every `JEEVES_SWEEP_INTERVAL_S` one of them (a
  Redis lock) looks at the tasks delivered more than 1.5 leases ago and puts back at the head of its
  queue each one with no lease (its worker died, or never started it): the task is redone within its
  TTL. A task still waiting for its ETA (a countdown) is left alone. Redoing is safe: every tier is
  idempotent (receipts, source keys, the extraction watermark), and a redelivered classify or respond
  task whose text outlived its TTL is counted expired, never lost silently.
- the sweeper also measures this process's clock against Redis' (`TIME`) and records the offset
  (`jeeves:clock`, exported at /metrics), with a warning over `JEEVES_CLOCK_SKEW_S`.

Nothing here reads or writes message text: tasks carry ids only.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from bisect import bisect
from datetime import datetime

import redis
from django.conf import settings

from ground import keys
from ground.queues import Queue
from ground.redis import get_redis

logger = logging.getLogger(__name__)

# kombu's Redis transport (defaults): where delivered, unacknowledged messages wait.
UNACKED = "unacked"
UNACKED_INDEX = "unacked_index"
_PRIORITY_STEPS = [0, 3, 6, 9]
_PRIORITY_SEP = "\x06\x16"
_QUEUES = frozenset(q.value for q in Queue)

# A renewal: a plain lease (token '') is set again; a held key is extended only while it still holds its token.
_RENEW = """
local ttl = ARGV[1]
for i, key in ipairs(KEYS) do
  local token = ARGV[i + 1]
  if token == '' then
    redis.call('SET', key, '1', 'EX', ttl)
  elseif redis.call('GET', key) == token then
    redis.call('EXPIRE', key, ttl)
  end
end
return #KEYS
"""

# Put one delivered message back at the head of its queue, unless it was acknowledged (or put back) meanwhile.
_RESTORE = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('RPUSH', KEYS[3], ARGV[2])
return 1
"""


def lease_s() -> int:
    return keys.LEASE.ttl_s()


def orphan_after_s() -> float:
    return lease_s() * 1.5


class _Keeper:
    """What this process holds (task ids, and keys with their tokens) and the thread that renews them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tasks: set[str] = set()
        self.keys: dict[str, str] = {}
        self.pid = -1
        self.thread: threading.Thread | None = None
        self.failing = False

    def _ensure_thread(self) -> None:
        if self.pid == os.getpid() and self.thread is not None and self.thread.is_alive():
            return
        # A forked child inherits the parent's state but not its threads: start afresh.
        self.pid = os.getpid()
        self.thread = threading.Thread(target=self._run, name="jeeves-lease-keeper", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(max(lease_s() / 3, 0.5))
            self.renew()

    def renew(self) -> None:
        with self.lock:
            entries = [(keys.LEASE.key(t), "") for t in self.tasks] + list(self.keys.items())
        if not entries:
            return
        try:
            get_redis().eval(_RENEW, len(entries), *[k for k, _ in entries], lease_s(), *[t for _, t in entries])
        except (redis.RedisError, OSError) as exc:
            if not self.failing:
                logger.warning("leases not renewed (%s); retrying", type(exc).__name__)
            self.failing = True
            return
        self.failing = False


_keeper = _Keeper()


def hold_task(task_id: str) -> None:
    """A task starts in this process: its lease, renewed until `release_task`."""
    with _keeper.lock:
        _keeper.tasks.add(task_id)
        _keeper._ensure_thread()
    get_redis().set(keys.LEASE.key(task_id), "1", ex=lease_s())


def release_task(task_id: str) -> None:
    with _keeper.lock:
        _keeper.tasks.discard(task_id)
    get_redis().delete(keys.LEASE.key(task_id))


def hold_key(key: str, token: str) -> None:
    """Keep `key` alive (its TTL renewed to one lease) while it holds `token`, until `release_key`."""
    with _keeper.lock:
        _keeper.keys[key] = token
        _keeper._ensure_thread()


def release_key(key: str) -> None:
    with _keeper.lock:
        _keeper.keys.pop(key, None)


# --------------------------------------------------------------------------- the sweeper


def _queue_key(queue: str, priority: int | None) -> str:
    step = _PRIORITY_STEPS[bisect(_PRIORITY_STEPS, int(priority or 0)) - 1]
    return f"{queue}{_PRIORITY_SEP}{step}" if step else queue


def _eta(headers: dict) -> float | None:
    eta = headers.get("eta")
    if not eta:
        return None
    try:
        return datetime.fromisoformat(eta).timestamp()
    except (TypeError, ValueError):
        return None


def sweep(client: redis.Redis | None = None, now: float | None = None, limit: int = 200) -> list[str]:
    """Put back every delivered task whose worker holds no lease on it; returns the task names put back."""
    client = client or get_redis()
    now = time.time() if now is None else now
    cutoff = now - orphan_after_s()
    restored: list[str] = []
    for tag in client.zrange(UNACKED_INDEX, "-inf", cutoff, byscore=True, offset=0, num=limit):
        raw = client.hget(UNACKED, tag)
        if raw is None:
            continue
        try:
            payload, _exchange, routing_key = json.loads(raw)
            headers = payload.get("headers") or {}
            task_id = headers["id"]
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        if routing_key not in _QUEUES:
            continue
        eta = _eta(headers)
        if eta is not None and eta > cutoff:
            continue  # waiting for its countdown in a worker's memory: not late yet
        if client.exists(keys.LEASE.key(task_id)):
            continue  # running on a live worker
        headers["redelivered"] = True
        priority = (payload.get("properties") or {}).get("priority")
        queue_key = _queue_key(routing_key, priority)
        if client.eval(_RESTORE, 3, UNACKED, UNACKED_INDEX, queue_key, tag, json.dumps(payload)):
            name = str(headers.get("task", "?"))
            restored.append(name)
            client.incr(keys.SWEEP_RESTORED.key())
            # kwargsrepr holds ids only (never text).
            logger.warning("put back a task its worker no longer holds: %s %s", name, headers.get("kwargsrepr", ""))
    return restored


def clock_offset(client: redis.Redis) -> float:
    """This process's clock minus Redis' (TIME), in seconds, the round trip halved."""
    before = time.time()
    seconds, micros = client.time()
    after = time.time()
    return (before + after) / 2 - (seconds + micros / 1e6)


def measure_clock(client: redis.Redis | None = None) -> float:
    """This process's clock minus Redis' (seconds, half the round trip allowed for), recorded under keys.CLOCK."""
    client = client or get_redis()
    offset = clock_offset(client)
    name = f"{socket.gethostname()}:{os.getpid()}"
    client.hset(keys.CLOCK.key(), name, f"{offset:.3f} {time.time():.0f}")
    if abs(offset) > settings.JEEVES.clock_skew_s:
        logger.warning(
            "clock skew: this process is %.1f s %s Redis (tolerated: %.1f s)",
            abs(offset),
            "ahead of" if offset > 0 else "behind",
            settings.JEEVES.clock_skew_s,
        )
    return offset


RECONCILE_EVERY_S = keys.RECONCILE_LOCK.ttl_s()


def _reconcile(client: redis.Redis) -> None:
    """Every RECONCILE_EVERY_S (one worker at a time), the database side: pipeline.tasks.reconcile."""
    if client.set(keys.RECONCILE_LOCK.key(), os.getpid(), nx=True, ex=RECONCILE_EVERY_S):
        from celery import current_app

        current_app.send_task("pipeline.tasks.reconcile", queue=Queue.SUMMARISE.value, expires=RECONCILE_EVERY_S)


def _sweeper() -> None:
    interval = settings.JEEVES.sweep_interval_s
    failing = False
    while True:
        try:
            client = get_redis()
            measure_clock(client)
            if client.set(keys.SWEEP_LOCK.key(), os.getpid(), nx=True, px=round(keys.SWEEP_LOCK.ttl_s() * 1000)):
                sweep(client)
                _reconcile(client)
            failing = False
        except (redis.RedisError, OSError) as exc:
            if not failing:
                logger.warning("sweeper: Redis unavailable (%s); retrying", type(exc).__name__)
            failing = True
        except Exception:
            logger.exception("sweeper failed; retrying")
        time.sleep(interval)


_sweeper_started = False


def start_sweeper() -> None:
    """In a worker's main process, once: the sweeper thread (it dies with the process)."""
    global _sweeper_started
    if _sweeper_started:
        return
    _sweeper_started = True
    threading.Thread(target=_sweeper, name="jeeves-sweeper", daemon=True).start()
