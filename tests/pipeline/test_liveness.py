"""The sweeper (pipeline/liveness.py) against a real Valkey of the test's own, with kombu's own bookkeeping
of delivered messages: a delivered task whose lease lapsed goes back to the head of its queue (its priority's
list), once; a task under a live lease, or still waiting for its countdown, stays where it is."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import redis

from ground import keys
from pipeline import liveness
from tests.chaos.harness import PrivateRedis


@pytest.fixture
def private() -> redis.Redis:
    server = PrivateRedis()
    try:
        yield redis.Redis.from_url(server.url, decode_responses=True)
    finally:
        server.stop()


def _deliver(client: redis.Redis, queue: str, age_s: float, priority: int = 0, eta: str | None = None) -> str:
    """What kombu writes when a worker takes a message (acks_late): the message in `unacked`, when in the index."""
    task_id, tag = str(uuid.uuid4()), str(uuid.uuid4())
    headers = {"id": task_id, "task": "pipeline.tasks.classify_message", "kwargsrepr": "{}", "eta": eta}
    payload = {"body": "e30=", "headers": headers, "properties": {"priority": priority, "delivery_tag": tag}}
    client.hset(liveness.UNACKED, tag, json.dumps([payload, "jeeves", queue]))
    client.zadd(liveness.UNACKED_INDEX, {tag: time.time() - age_s})
    return task_id


def test_a_task_whose_worker_died_is_put_back_and_a_live_one_is_not(private, settings):
    settings.JEEVES = dataclasses.replace(settings.JEEVES, task_lease_s=4)
    dead = _deliver(private, "classify", age_s=30)
    alive = _deliver(private, "classify", age_s=30)
    private.set(keys.LEASE.key(alive), "1", ex=4)
    fresh = _deliver(private, "classify", age_s=1)  # just taken: its lease is about to be written
    later = (datetime.now(UTC) + timedelta(seconds=60)).isoformat()
    waiting = _deliver(private, "extract", age_s=30, eta=later)  # a countdown a live worker holds
    low = _deliver(private, "classify", age_s=30, priority=9)

    assert liveness.sweep(private) == ["pipeline.tasks.classify_message"] * 2
    back = [json.loads(raw)["headers"]["id"] for raw in private.lrange("classify", 0, -1)]
    assert back == [dead]
    assert [json.loads(raw)["headers"]["id"] for raw in private.lrange("classify\x06\x169", 0, -1)] == [low]
    still = {json.loads(v)[0]["headers"]["id"] for v in private.hvals(liveness.UNACKED)}
    assert still == {alive, fresh, waiting}
    assert liveness.sweep(private) == []  # put back once
    assert int(private.get(keys.SWEEP_RESTORED.key())) == 2
