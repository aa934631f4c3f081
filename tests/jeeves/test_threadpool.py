"""`--pool threads` (jeeves/threadpool.py): a threads worker fetches the next message as soon as a task ends,
not at its event loop's next timer (up to 10 s later, celery/celery#6941)."""

from __future__ import annotations

import time
import uuid

import pytest
import redis

from jeeves.celery import app as celery_app
from knowledge.models import PipelineCounter
from pipeline.tasks import extract_channel
from tests.conftest import WorkerProcess, free_redis_db, service_env, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

TASKS = 20


def test_a_threads_worker_takes_the_next_message_when_a_task_ends(redis_url):
    broker = free_redis_db(redis_url, "threadpool")  # a broker of this test's own: only its worker consumes
    channel_id = f"{uuid.uuid4()}@wire.example"  # no such channel: each run is dropped and counted, a quick task
    worker = WorkerProcess("extract", service_env(broker), pool="threads", concurrency=2, name="threads")
    try:
        started = time.monotonic()
        with celery_app.connection_for_write(broker) as conn:
            for _ in range(TASKS):
                extract_channel.apply_async(kwargs={"channel_id": channel_id, "epoch": 0}, connection=conn)

        def dropped() -> int:
            row = PipelineCounter.objects.filter(channel_id=channel_id, name="extract_dropped").first()
            return row.value if row else 0

        wait_for(lambda: dropped() >= TASKS, timeout=120, interval=0.05)
        elapsed = time.monotonic() - started
        # Two at a time, a few tens of ms each: 0.4 s here. With the loop waking only at its timers, a round of
        # two every event heartbeat (2 s): 18 s; every 5-10 s without heartbeats (bench/pipeline.py's workers).
        assert elapsed < 8, f"{TASKS} quick tasks took {elapsed:.1f}s on 2 threads:\n{worker.log()[-3000:]}"
    finally:
        worker.stop()
        redis.Redis.from_url(broker).flushdb()
