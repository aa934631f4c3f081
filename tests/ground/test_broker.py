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


def test_a_gate_queues_one_of_two_messages_by_its_answer(url):
    client = redis.Redis.from_url(url)

    def message(n: int, list_key: str) -> broker.TaskMessage:
        return broker.TaskMessage("t", "q", list_key, json.dumps({"n": n}), ())

    for answer in (1, 0, 1):
        pipe = client.pipeline(transaction=False)
        gate = broker.Gate("redis.call('INCR', KEYS[1]) return tonumber(ARGV[1])", ("asked",), (answer,))
        gate.push_one(pipe, message(answer, "passed"), message(10 + answer, "held"))
        assert pipe.execute()[-1] == answer
    assert client.get("asked") == b"3"  # the gate ran every time
    assert [json.loads(m)["n"] for m in client.lrange("passed", 0, -1)] == [1, 1]
    assert [json.loads(m)["n"] for m in client.lrange("held", 0, -1)] == [10]


@pytest.mark.parametrize("priority", [0, 9])
def test_a_task_message_built_here_is_the_one_celery_would_queue(url, priority):
    """Field for field what `apply_async` queues through kombu's Redis channel for the same task and options,
    but for its own ids and expiry time (a new uuid each, now + expires); a worker consumes it as usual."""
    from datetime import UTC, datetime, timedelta

    from celery import signals

    from jeeves.celery import app
    from pipeline.tasks import classify_message

    kwargs = {"channel_id": "c@wire.example", "wire_msg_id": "m'1\\\"é", "epoch": 2, "author_id": "a@wire.example"}
    options = {"expires": 65, "argsrepr": "()", "kwargsrepr": repr(kwargs), "declare": [], "priority": priority}
    client = redis.Redis.from_url(url)
    with Connection(url) as conn, app.producer_or_acquire(conn.Producer()) as producer:
        classify_message.apply_async(kwargs=kwargs, producer=producer, **options)
    [(list_key, raw)] = [(k, client.lpop(k)) for k in client.keys("classify*")]
    celery_made = json.loads(raw)
    built = broker.TaskMessage.build(classify_message, kwargs, kwargsrepr=repr(kwargs), expires_s=65, priority=priority)
    assert built.list_key.encode() == list_key
    mine = json.loads(built.payload)
    for message in (celery_made, mine):
        expires = datetime.fromisoformat(message["headers"].pop("expires"))
        assert abs(expires - datetime.now(UTC) - timedelta(seconds=65)) < timedelta(seconds=5)
        task_id = message["headers"].pop("id")
        assert message["headers"].pop("root_id") == message["properties"].pop("correlation_id") == task_id
        message["properties"].pop("delivery_tag")
    assert mine == celery_made
    assert json.loads(base64.b64decode(mine["body"]))[1] == kwargs

    seen = []
    signals.before_task_publish.connect(receiver := lambda **kw: seen.append(kw["headers"]["id"]), weak=False)
    try:
        built.announce()
    finally:
        signals.before_task_publish.disconnect(receiver)
    assert seen == [json.loads(built.payload)["headers"]["id"]]


@pytest.mark.parametrize("priority", [-1, 0, 1, 3, 5, 8, 9, 12])
def test_queue_list_is_kombus_list_for_the_priority(url, priority):
    from ground.queues import queue_list

    with Connection(url, transport=broker.Transport) as conn:
        channel = conn.default_channel
        message = {"properties": {"priority": priority}}
        assert queue_list("q", priority) == channel._q_for_pri("q", channel._get_message_priority(message))
