"""The channel's running lock (pipeline/debounce.py, redis-py's Lock) against the session's Redis: a run whose
lease lapsed and whose lock another run then took cannot release the newer run's lock."""

from __future__ import annotations

import uuid

from ground import keys
from ground.redis import get_redis
from pipeline import debounce, liveness
from tests.conftest import wait_for


def test_a_run_whose_lock_lapsed_does_not_release_the_lock_a_later_run_took():
    cid = f"c-{uuid.uuid4().hex[:8]}@wire.example"
    key = keys.EXTRACT_RUNNING.key(cid)
    client = get_redis()

    first = debounce.begin_run(cid)
    assert first is not None
    assert debounce.begin_run(cid) is None  # one run per channel
    assert 0 < client.ttl(key) <= keys.EXTRACT_RUNNING.ttl_s()

    # The first run stalls: nothing renews its lease any more, and the lock lapses.
    liveness.release_key(key)
    client.pexpire(key, 1)
    wait_for(lambda: not client.exists(key), timeout=5)

    second = debounce.begin_run(cid)
    assert second is not None and second != first
    debounce.end_run(cid, first)  # the stalled run wakes up and ends
    assert client.get(key) == second
    assert debounce.begin_run(cid) is None  # the channel is still held by the second run

    debounce.end_run(cid, second)
    assert not client.exists(key)
    assert debounce.begin_run(cid) is not None
    debounce.end_run(cid, client.get(key))
