"""Debounced extraction per channel (docs/architecture.md §2, step 6): one run per burst, and a watermark so no
message is extracted twice.

Redis keys per channel (ids only, never text):
- `jeeves:extract:pending:{ch}` — classified messages not yet extracted (the watermark: a run
  takes these and removes them once its writes are committed);
- `jeeves:extract:lock:{ch}` — a run is scheduled; high-signal messages arriving meanwhile ride on it;
- `jeeves:extract:running:{ch}` — a run is in progress; a second run waits for it.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable

from celery import current_app
from django.conf import settings
from redis.exceptions import LockNotOwnedError
from redis.lock import Lock

from ground import keys
from ground.queues import Queue
from ground.redis import get_redis
from pipeline import liveness

logger = logging.getLogger(__name__)

EXTRACT_TASK = "pipeline.tasks.extract_channel"
# A scheduled run this late (seconds past its due time) is presumed lost and scheduled again.
OVERDUE_S = 30


def _pending_key(channel_id: str) -> str:
    return keys.EXTRACT_PENDING.key(channel_id)


def _lock_key(channel_id: str) -> str:
    return keys.EXTRACT_LOCK.key(channel_id)


def _running_key(channel_id: str) -> str:
    return keys.EXTRACT_RUNNING.key(channel_id)


def _schedule_ttl() -> int:
    # A scheduled run that no worker reached by then has expired; the lock must not outlive it.
    return keys.EXTRACT_LOCK.ttl_s()


def note_classified(channel_id: str, wire_msg_id: str) -> None:
    """The message was classified: the next run of its channel covers it."""
    key = _pending_key(channel_id)
    pipe = get_redis().pipeline()
    pipe.sadd(key, wire_msg_id)
    # Pending ids outlive the window by a margin so an eviction is still seen and counted.
    pipe.expire(key, keys.EXTRACT_PENDING.ttl_s())
    pipe.execute()


def note_classified_many(by_channel: dict[str, list[str]]) -> None:
    """`note_classified` for several messages of several channels, in one round trip."""
    pipe = get_redis().pipeline()
    for channel_id, ids in by_channel.items():
        if ids:
            pipe.sadd(_pending_key(channel_id), *ids)
            pipe.expire(_pending_key(channel_id), keys.EXTRACT_PENDING.ttl_s())
    pipe.execute()


def pending(channel_id: str) -> set[str]:
    return set(get_redis().smembers(_pending_key(channel_id)))


def mark_extracted(channel_id: str, wire_msg_ids: Iterable[str]) -> None:
    ids = list(wire_msg_ids)
    if ids:
        get_redis().srem(_pending_key(channel_id), *ids)


def open_burst(channel_id: str) -> tuple[list[str], int | None]:
    """The offline engine's burst the channel's last run left open (its messages' ids, its countdown), if any."""
    raw = get_redis().get(keys.EXTRACT_BURST.key(channel_id))
    if not raw:
        return [], None
    state = json.loads(raw)
    return list(state.get("ids") or []), state.get("countdown")


def note_open_burst(channel_id: str, ids: list[str], countdown: int | None) -> None:
    key = keys.EXTRACT_BURST.key(channel_id)
    if ids:
        get_redis().set(key, json.dumps({"ids": ids, "countdown": countdown}), ex=int(keys.EXTRACT_BURST.ttl_s()))
    else:
        get_redis().delete(key)


def forget(channel_id: str, wire_msg_id: str) -> None:
    get_redis().srem(_pending_key(channel_id), wire_msg_id)


def _publish(channel_id: str, epoch: int, countdown: float) -> None:
    current_app.send_task(
        EXTRACT_TASK,
        kwargs={"channel_id": channel_id, "epoch": epoch},
        queue=Queue.EXTRACT.value,
        countdown=countdown,
        expires=countdown + _schedule_ttl(),
    )


def request_extract(channel_id: str, epoch: int) -> str:
    """A high-signal message is pending: run at once when a batch is pending, else schedule one
    run `JEEVES_EXTRACT_DEBOUNCE_S` from now unless one is already scheduled. Returns what it did."""
    cfg = settings.JEEVES
    client = get_redis()
    if client.scard(_pending_key(channel_id)) >= cfg.extract_batch:
        client.set(_lock_key(channel_id), str(time.time()), ex=_schedule_ttl())
        _publish(channel_id, epoch, 0)
        logger.info("extract now (batch pending): channel=%s", channel_id)
        return "now"
    due = time.time() + cfg.extract_debounce_s
    if client.set(_lock_key(channel_id), str(due), nx=True, ex=_schedule_ttl()):
        _publish(channel_id, epoch, cfg.extract_debounce_s)
        logger.info("extract scheduled in %ss: channel=%s", cfg.extract_debounce_s, channel_id)
        return "scheduled"
    if _overdue(client.get(_lock_key(channel_id))):
        # The scheduled run never started (its worker died, or it expired): schedule afresh.
        client.set(_lock_key(channel_id), str(due), ex=_schedule_ttl())
        _publish(channel_id, epoch, cfg.extract_debounce_s)
        logger.warning("extract rescheduled (the scheduled run is overdue): channel=%s", channel_id)
        return "rescheduled"
    return "covered"


def _overdue(value: str | None) -> bool:
    try:
        return value is not None and float(value) + OVERDUE_S < time.time()
    except ValueError:
        return False


def _running_lock(channel_id: str) -> Lock:
    """The channel's running lock: redis-py's Lock (SET NX with a TTL; released by a token-checked delete in
    one Lua script, so a run whose lease lapsed cannot free the lock a later run took meanwhile)."""
    return get_redis().lock(
        _running_key(channel_id), timeout=keys.EXTRACT_RUNNING.ttl_s(), blocking=False, thread_local=False
    )


def begin_run(channel_id: str) -> str | None:
    """Start a run: clear the schedule lock (later messages schedule the next run) and take the
    running lock. None when another run of the channel is in progress."""
    client = get_redis()
    client.delete(_lock_key(channel_id))
    token = uuid.uuid4().hex
    # A lease, renewed while the run lives (pipeline/liveness.py): a run whose worker died frees the
    # channel within one lease instead of stalling it for the extract queue's whole time limit.
    if _running_lock(channel_id).acquire(token=token):
        liveness.hold_key(_running_key(channel_id), token)
        return token
    return None


def end_run(channel_id: str, token: str) -> None:
    """Release the running lock if it still holds `token`; a lock another run took meanwhile stays."""
    liveness.release_key(_running_key(channel_id))
    try:
        _running_lock(channel_id).do_release(token)
    except LockNotOwnedError:
        logger.info("extract run ended after its lock lapsed (another run may hold it): channel=%s", channel_id)


def retry_later(channel_id: str, epoch: int) -> None:
    """Another run holds the channel: come back after the debounce, once."""
    due = time.time() + settings.JEEVES.extract_debounce_s
    if get_redis().set(_lock_key(channel_id), str(due), nx=True, ex=_schedule_ttl()):
        _publish(channel_id, epoch, settings.JEEVES.extract_debounce_s)


def reschedule(channel_id: str, epoch: int) -> str | None:
    """A run queued under an earlier epoch was dropped: its schedule lock must not go on covering
    the messages of the channel's current epoch (they would wait for a run that never comes)."""
    get_redis().delete(_lock_key(channel_id))
    if not pending(channel_id):
        return None
    return request_extract(channel_id, epoch)


def flush(channel_id: str) -> None:
    get_redis().delete(
        _pending_key(channel_id), _lock_key(channel_id), _running_key(channel_id), keys.EXTRACT_BURST.key(channel_id)
    )
