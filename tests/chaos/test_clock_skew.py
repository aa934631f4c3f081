"""Clock skew: a worker whose clock runs 20 s ahead of the web host's and Redis' (time-machine in that process
only, tests/chaos/faults/sitecustomize.py). Task expiry is set on the web's clock and checked on the worker's;
with JEEVES_CLOCK_SKEW_S (5 s) of tolerance and a 60 s TTL every message is still processed, and the worker
reports its offset: a warning in its log, and its entry under jeeves:clock that /metrics exports."""

from __future__ import annotations

import pytest
import redis

from ground import keys
from tests.chaos import harness
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

SHIFT_S = 20


@pytest.mark.chaos
def test_a_worker_20_seconds_ahead_processes_everything_and_reports_its_skew(chaos_redis, record_row):
    fake = harness.provider()
    env = harness.stack_env(chaos_redis.url, fake)
    worker_env = {
        **env,
        "PYTHONPATH": f"{ROOT / 'tests' / 'chaos' / 'faults'}:{ROOT}",
        "JEEVES_CHAOS_CLOCK_SHIFT_S": str(SHIFT_S),
    }
    with harness.running(fake, env, "chaos-clock", worker_env=worker_env) as (web, worker, traffic):
        traffic.open_channels(3)
        traffic.run(15, rate=3)
        harness.settle(traffic, timeout=240)
        result = harness.tally(f"worker clock {SHIFT_S} s ahead", traffic)
        record_row(result)
        offsets = redis.Redis.from_url(chaos_redis.url, decode_responses=True).hgetall(keys.CLOCK.key())
        log = worker.log()
    assert result.found == result.expected == 15 and result.expired == 0 and result.duplicated == 0, result
    assert any(abs(float(v.split()[0]) - SHIFT_S) < 3 for v in offsets.values()), offsets
    assert f"clock skew: this process is {SHIFT_S}" in log or "clock skew: this process is 19." in log
