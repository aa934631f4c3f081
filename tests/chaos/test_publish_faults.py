"""Broker publish fails after the receipt: the bridge publishes inside the receipt's transaction (publish
first), so a refused publish rolls the receipt back and answers 503, and a web process that dies between the
publish and the commit leaves the receipt to the classify worker. Either way Wire's retry is processed
exactly once. The faults are injected into the real gunicorn (tests/chaos/faults/sitecustomize.py)."""

from __future__ import annotations

import pytest

from tests.chaos import harness
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.chaos
@pytest.mark.parametrize(
    ("fault", "spec"),
    [("broker refuses every 3rd publish", "refuse:3"), ("web dies after every 4th publish", "die:4")],
)
def test_a_publish_that_fails_after_the_receipt_is_processed_once_after_the_retry(chaos_redis, record_row, fault, spec):
    broker = chaos_redis.url
    fake = harness.provider()
    env = harness.stack_env(broker, fake)
    web_env = {
        **env,
        "PYTHONPATH": f"{ROOT / 'tests' / 'chaos' / 'faults'}:{ROOT}",
        "JEEVES_CHAOS_PUBLISH_FAULT": spec,
    }
    with harness.running(fake, env, "chaos-publish", web_env=web_env) as (web, worker, traffic):
        traffic.open_channels(3)
        traffic.run(24, rate=6)
        harness.settle(traffic, timeout=240)
        result = harness.tally(fault, traffic)
        record_row(result)
    if spec.startswith("refuse"):
        assert traffic.five_xx >= 24 // 3 and traffic.retry_after_seen == traffic.five_xx
    assert result.duplicated == 0 and result.lost == 0 and result.expired == 0, result
    assert result.found == result.expected == 24, result
    assert result.canaries == 0
