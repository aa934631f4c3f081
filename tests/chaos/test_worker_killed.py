"""Worker killed: a real prefork worker (parent and children, the whole node as far as Celery can tell)
is SIGKILLed again and again while messages stream in through the webhook. Afterwards every message a
clean run records is recorded exactly once: what the dead worker held is put back by the sweeper of the
next worker within its TTL (pipeline/liveness.py), a dead extraction's channel lock lapses by itself.
The test deletes no lock and touches no Redis key."""

from __future__ import annotations

import random
import threading
import time

import pytest

from tests.chaos import harness

pytestmark = pytest.mark.django_db(transaction=True)


def _run(chaos_redis, kills: int, messages: int, rate: float, channels: int, nodes: int, record_row) -> harness.Tally:
    """`nodes` workers side by side; in turn, once every node is up, one is SIGKILLed (its whole process group:
    parent and prefork children, as when its machine dies) a few seconds in, and started again while the
    others work; `kills` times, while messages stream in through the webhook."""
    broker = chaos_redis.url  # a Valkey of the test's own
    fake = harness.provider()
    env = harness.stack_env(broker, fake)
    web = harness.WebProcess(env)
    traffic = harness.Traffic(web.url)
    slots: list = [None] * nodes
    failure: list[BaseException] = []
    done = threading.Event()
    enough = threading.Event()  # the kills are over: the stream ends

    def start(i: int) -> None:
        try:
            slots[i] = harness.start_worker(env, f"chaos-kill-{i}")
        except BaseException as exc:
            failure.append(exc)

    def post() -> None:
        try:
            traffic.run(messages, rate, stop=enough)
        except BaseException as exc:  # reported by the main thread
            failure.append(exc)
        finally:
            done.set()

    starters = [threading.Thread(target=start, args=(i,), daemon=True) for i in range(nodes)]
    try:
        for t in starters:
            t.start()
        for t in starters:
            t.join(timeout=180)
        assert not failure and all(slots), failure
        traffic.open_channels(channels)
        poster = threading.Thread(target=post, daemon=True)
        poster.start()
        rng = random.Random(11)
        for k in range(kills):
            for t in starters:
                t.join(timeout=180)  # every node up again
            assert not failure, failure
            time.sleep(rng.uniform(2.0, 4.0))
            i = k % nodes
            slots[i].kill()
            slots[i] = None
            restart = threading.Thread(target=start, args=(i,), daemon=True)
            restart.start()
            starters = [restart]
        for t in starters:
            t.join(timeout=180)
        time.sleep(3)  # a little traffic with every node back
        enough.set()
        done.wait(timeout=120)
        assert not failure, failure
        harness.settle(traffic, timeout=240)
        result = harness.tally(f"worker SIGKILLed x{kills}", traffic)
        record_row(result)
        return result
    finally:
        enough.set()
        for t in starters:
            if t.is_alive():
                t.join(timeout=180)
        for worker in slots:
            if worker is not None:
                worker.stop()
        web.stop()
        fake.stop()
        traffic.close()


def _check(result: harness.Tally, expired_allowed: bool = False) -> None:
    assert result.duplicated == 0, result
    assert result.lost == 0, result
    if not expired_allowed:
        assert result.expired == 0 and result.evicted == 0, result  # all within the TTL: nothing given up
    assert result.found == result.expected > 0, result
    assert result.canaries == 0, result


# Not in the default run: on a loaded CI machine a message may wait past its 60 s TTL while the killed
# worker restarts (expired, counted), which this test's exactly-found assertion refuses (CI verify run,
# 1 December: 29 found, 1 expired). Run with `pytest tests/chaos -m chaos`.
@pytest.mark.chaos
def test_a_killed_worker_loses_and_duplicates_nothing(chaos_redis, record_row):
    _check(_run(chaos_redis, kills=1, messages=30, rate=3, channels=3, nodes=2, record_row=record_row))


@pytest.mark.chaos
@pytest.mark.timeout(1500)
def test_a_worker_killed_twenty_times_loses_and_duplicates_nothing(chaos_redis, record_row):
    """Twenty kills take ten minutes or more here (a worker needs ~30 s to start on this loaded machine), with
    one of the two workers down much of the time: what waited past its TTL meanwhile is counted expired (by
    design, README Guarantees); everything else is recorded exactly once, nothing is lost uncounted."""
    _check(
        _run(chaos_redis, kills=20, messages=5000, rate=2, channels=8, nodes=2, record_row=record_row),
        expired_allowed=True,
    )
