"""Redis restarted mid-replay: a private Valkey (never the shared 127.0.0.1:6379) stopped and started again
empty, as a Redis without persistence comes back. While it is away the webhook answers 503 with Retry-After
(Wire retries); the workers reconnect by themselves; afterwards messages flow again, and every message is
either recorded exactly once or counted by the stack (expired: its text went with Redis; evicted: its pending
mark did) — the counts add up to what was accepted, nothing is silently lost."""

from __future__ import annotations

import threading
import time

import pytest

from tests.chaos import harness

pytestmark = pytest.mark.django_db(transaction=True)


# In the default run (quick, ~50 s). It was taken out after "25 of 36 still waiting 240 s after the restart"
# was put down to load; the cause was celery/kombu 5.7.0, whose worker died on losing its broker instead of
# reconnecting (requirements.txt pins below 5.7).
@pytest.mark.chaos
@pytest.mark.quick
def test_a_redis_restart_answers_503_while_away_and_every_message_is_recorded_or_counted(chaos_redis, record_row):
    private = chaos_redis
    fake = harness.provider()
    env = harness.stack_env(private.url, fake)
    web = worker = None
    traffic = None
    try:
        web = harness.WebProcess(env)
        worker = harness.start_worker(env, "chaos-redis")
        traffic = harness.Traffic(web.url)
        traffic.open_channels(3)
        traffic.run(15, rate=5)

        private.stop()
        during = threading.Thread(target=lambda: [traffic.send(traffic.channels[n % 3], n) for n in range(100, 106)])
        during.start()
        time.sleep(4)
        assert traffic.five_xx > 0, "the webhook must refuse while Redis is away"
        private.start()
        during.join(timeout=120)
        assert not during.is_alive()

        before = sum(len(v) for v in traffic.accepted.values())
        for n in range(200, 215):
            traffic.send(traffic.channels[n % 3], n)
        after = sum(len(v) for v in traffic.accepted.values()) - before
        harness.settle(traffic, timeout=240)
        result = harness.tally("Redis restarted (empty)", traffic)
        record_row(result)
    finally:
        if worker is not None:
            worker.stop()
        if web is not None:
            web.stop()
        fake.stop()
        if traffic is not None:
            traffic.close()
    assert traffic.retry_after_seen == traffic.five_xx, "every 503 carries Retry-After"
    assert result.duplicated == 0 and result.lost == 0, result
    assert result.found + result.expired + result.evicted == sum(len(v) for v in traffic.accepted.values()), result
    assert result.found >= after > 0, result  # what came after the restart went all the way
    assert result.canaries == 0, result
