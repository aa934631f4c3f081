"""pipeline.tasks.forget_message on a real worker: the author's delete is retried until it succeeds."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import psycopg
import pytest
import redis

from jeeves.celery import app as celery_app
from knowledge import records, sources
from knowledge.models import ChannelConfig, Decision
from pipeline.tasks import forget_message
from tests.conftest import WorkerProcess, database_url, free_redis_db, service_env, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 3, 2, 9, 20, tzinfo=UTC)


def test_a_delete_blocked_by_a_lock_is_retried_until_it_succeeds(redis_url):
    broker = free_redis_db(redis_url, "forget-message")  # a broker of this test's own: only its worker consumes
    channel = ChannelConfig.objects.create(channel_id=f"{uuid.uuid4()}@wire.example", organisation_id="wire.example")
    message = str(uuid.uuid4())
    decision = records.record_decision(
        channel, records.DecisionDraft(
            summary="The team chose the quarterly release train.", rationale=None, decided_by=[], decided_at=T0,
            confidence=0.9,
        ), source=sources.source_ref([(message, T0)]), sources_text=[],
        key=f"dec:{message}:0",
    ).record  # fmt: skip
    worker = WorkerProcess("extract", service_env(broker), name="forget")
    try:
        with psycopg.connect(database_url()) as locker:
            # Another transaction holds the record (as a long extraction writing it would).
            locker.execute("SELECT 1 FROM decisions WHERE id = %s FOR UPDATE", [decision.pk])
            with celery_app.connection_for_write(broker) as conn:
                forget_message.apply_async(
                    kwargs={"channel_id": channel.channel_id, "wire_msg_id": message}, connection=conn
                )
            wait_for(lambda: "Retry in" in worker.log(), timeout=90)
            assert Decision.objects.filter(pk=decision.pk).exists()
        # The lock is gone (the transaction ended): a retry gets through.
        wait_for(lambda: not Decision.objects.filter(pk=decision.pk).exists(), timeout=120)
        assert "lock timeout" in worker.log()
    finally:
        worker.stop()
        redis.Redis.from_url(broker).flushdb()
