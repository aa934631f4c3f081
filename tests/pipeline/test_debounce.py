"""pipeline/debounce.py against the session's Redis and broker: the watermark of classified messages, one
scheduled run per burst (at once for a full batch, again when the scheduled one is overdue), a retry after a
busy channel, and a reschedule after an epoch change. The running lock is tests/pipeline/test_debounce_lock.py."""

from __future__ import annotations

import dataclasses
import time
import uuid

import pytest
from celery.signals import before_task_publish
from django.test import override_settings

from ground import keys
from ground.redis import get_redis
from jeeves.celery import app as celery_app
from pipeline import debounce

DEBOUNCE_S = 120.0


@pytest.fixture
def channel_id(settings):
    cid = f"c-{uuid.uuid4().hex[:8]}@harbour.example"
    with override_settings(JEEVES=dataclasses.replace(settings.JEEVES, extract_debounce_s=DEBOUNCE_S, extract_batch=3)):
        yield cid
    celery_app.control.purge()  # the runs it published: no worker here
    debounce.flush(cid)


@pytest.fixture
def published():
    """(queue, kwargs, countdown) of every extract run published, in order."""
    runs: list[tuple[str, dict, bool]] = []

    def capture(sender=None, headers=None, body=None, routing_key=None, **kwargs):
        if headers["task"] == debounce.EXTRACT_TASK:
            runs.append((routing_key, body[1], headers.get("eta") is not None))

    before_task_publish.connect(capture, weak=False)
    yield runs
    before_task_publish.disconnect(capture)


def _lock(cid: str) -> str | None:
    return get_redis().get(keys.EXTRACT_LOCK.key(cid))


def test_the_watermark_holds_classified_ids_until_extracted_or_forgotten(channel_id):
    for msg in ("w1", "w2", "w3"):
        debounce.note_classified(channel_id, msg)
    assert debounce.pending(channel_id) == {"w1", "w2", "w3"}
    assert 0 < get_redis().ttl(keys.EXTRACT_PENDING.key(channel_id)) <= keys.EXTRACT_PENDING.ttl_s()
    debounce.mark_extracted(channel_id, ["w1", "w3"])
    debounce.mark_extracted(channel_id, [])
    debounce.forget(channel_id, "w2")
    assert debounce.pending(channel_id) == set()


def test_a_burst_gets_one_delayed_run_and_a_full_batch_runs_at_once(channel_id, published):
    debounce.note_classified(channel_id, "b1")
    assert debounce.request_extract(channel_id, 4) == "scheduled"
    assert float(_lock(channel_id)) == pytest.approx(time.time() + DEBOUNCE_S, abs=5)
    debounce.note_classified(channel_id, "b2")
    assert debounce.request_extract(channel_id, 4) == "covered"
    debounce.note_classified(channel_id, "b3")  # the batch (3) is full: no waiting for the debounce
    assert debounce.request_extract(channel_id, 4) == "now"
    assert published == [
        ("extract", {"channel_id": channel_id, "epoch": 4}, True),
        ("extract", {"channel_id": channel_id, "epoch": 4}, False),
    ]


def test_a_scheduled_run_that_never_started_is_scheduled_again(channel_id, published):
    debounce.note_classified(channel_id, "o1")
    lapsed = time.time() - debounce.OVERDUE_S - 1
    get_redis().set(keys.EXTRACT_LOCK.key(channel_id), str(lapsed), ex=600)
    assert debounce.request_extract(channel_id, 0) == "rescheduled"
    assert float(_lock(channel_id)) > time.time()
    get_redis().set(keys.EXTRACT_LOCK.key(channel_id), "not a time", ex=600)
    assert debounce.request_extract(channel_id, 0) == "covered"  # an unreadable schedule is left to expire
    assert len(published) == 1


def test_a_busy_channel_is_retried_once_and_an_old_epochs_schedule_is_replaced(channel_id, published):
    debounce.retry_later(channel_id, 1)
    debounce.retry_later(channel_id, 1)  # the first retry covers it
    assert len(published) == 1

    assert debounce.reschedule(channel_id, 2) is None  # nothing pending: the old schedule just goes
    assert _lock(channel_id) is None
    debounce.note_classified(channel_id, "e1")
    debounce.retry_later(channel_id, 1)
    assert debounce.reschedule(channel_id, 2) == "scheduled"
    assert [kwargs["epoch"] for _, kwargs, _ in published] == [1, 1, 2]


def test_a_run_clears_the_schedule_and_flush_forgets_the_channel(channel_id):
    debounce.note_classified(channel_id, "f1")
    debounce.request_extract(channel_id, 0)
    token = debounce.begin_run(channel_id)
    assert token and _lock(channel_id) is None  # messages from now on schedule the next run
    assert debounce.begin_run(channel_id) is None  # one run at a time
    debounce.end_run(channel_id, token)
    again = debounce.begin_run(channel_id)
    assert again is not None
    debounce.flush(channel_id)
    families = (keys.EXTRACT_PENDING, keys.EXTRACT_LOCK, keys.EXTRACT_RUNNING)
    assert not any(get_redis().exists(f.key(channel_id)) for f in families)
    debounce.end_run(channel_id, again)  # its lock went with the flush: ending it is harmless
