"""ground/broker.py: kombu's Redis transport with a reused publishing client and publishes that can join a pipeline."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest
import redis
from kombu import Connection, Exchange, Queue

from ground import broker
from tests.conftest import free_redis_db


@pytest.fixture
def url(redis_url: str) -> Iterator[str]:
    chosen = free_redis_db(redis_url, "broker-test")
    yield chosen
    redis.Redis.from_url(chosen).flushdb()


def test_redis_urls_get_the_jeeves_transport(url):
    import jeeves.celery  # noqa: F401 - registers the transport

    with Connection(url) as conn:
        assert isinstance(conn.default_channel, broker.Channel)
        assert conn.as_uri().startswith("redis://")  # Flower's broker view reads the scheme


def test_the_publishing_client_is_built_once_per_pool(url):
    with Connection(url, transport=broker.Transport) as conn:
        channel = conn.default_channel
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second and first.connection_pool is channel.pool
        channel._disconnect_pools()  # what kombu does after a lost connection: a new pool, a new client
        with channel.conn_or_acquire() as third:
            assert third is not first and third.connection_pool is channel.pool


def test_a_publish_joins_the_pipeline_at_its_priority_and_is_consumed_as_usual(url):
    client = redis.Redis.from_url(url)
    queue = Queue("q", Exchange("q"), routing_key="q", max_priority=9)
    with Connection(url, transport=broker.Transport, transport_options={"priority_steps": [0, 3, 6, 9]}) as conn:
        producer = conn.Producer()
        pipe = client.pipeline(transaction=False)
        assert broker.joins_pipelines(producer.channel, pipe)
        pipe.set("before", 1)
        with broker.publishing_on(pipe):
            producer.publish({"n": 1}, exchange="", routing_key="q", serializer="json")
            producer.publish({"n": 2}, exchange="", routing_key="q", serializer="json", priority=9)
        assert client.llen("q") == 0  # nothing sent before the pipeline executes
        pipe.execute()
        assert client.llen("q") == 1 and client.llen("q\x06\x169") == 1
        producer.publish({"n": 3}, exchange="", routing_key="q", serializer="json")  # outside: at once
        assert client.llen("q") == 2
        got = []
        with conn.Consumer(queue, callbacks=[lambda body, message: (got.append(body["n"]), message.ack())]):
            for _ in range(3):
                conn.drain_events(timeout=5)
        assert sorted(got) == [1, 2, 3]


def test_a_pipeline_on_another_database_is_not_joined(url, redis_url):
    other = redis.Redis.from_url(redis_url).pipeline(transaction=False)
    with Connection(url, transport=broker.Transport) as conn:
        assert not broker.joins_pipelines(conn.default_channel, other)
        assert broker.joins_pipelines(conn.default_channel, redis.Redis.from_url(url).pipeline())
    assert not broker.joins_pipelines(object(), other)  # another transport's channel


def test_a_gated_publish_is_queued_only_when_its_gate_lets_it(url):
    client = redis.Redis.from_url(url)
    with Connection(url, transport=broker.Transport) as conn:
        producer = conn.Producer()
        for answer, passes_on in ((1, 1), (0, 1), (0, 0), (1, 0)):
            pipe = client.pipeline(transaction=False)
            gate = broker.Gate("redis.call('INCR', KEYS[1]) return tonumber(ARGV[1])", ("asked",), (answer,), passes_on)
            with broker.publishing_on(pipe, gate):
                producer.publish({"n": answer * 2 + passes_on}, exchange="", routing_key="q", serializer="json")
            assert pipe.execute()[-1] == answer
    assert client.get("asked") == b"4"  # the gate ran every time
    queued = [json.loads(base64.b64decode(json.loads(m)["body"]))["n"] for m in client.lrange("q", 0, -1)]
    assert sorted(queued) == [0, 3]  # answer 1 with passes_on 1, answer 0 with passes_on 0
