"""The /metrics page: every process's series (ground/metrics.py, multiprocess mode) and the gauges read at
scrape time, not stored: queue depths, Redis' reachability, the tasks sweepers put back and the clocks'
offsets (pipeline/liveness.py). With Redis down the depth is NaN and `jeeves_redis_up` is 0, and the page
still answers 200."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

from ground import keys
from ground.metrics import QUEUES, multiproc_dir
from ground.queues import queue_lists
from ground.redis import get_redis
from pipeline import liveness


class _ScrapeTime:
    """Queue depths (every priority list of a queue summed), Redis' reachability, the tasks sweepers put back
    and the clocks' offsets to Redis', read when scraped. Redis down: depths NaN, up 0."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        depth = GaugeMetricFamily("jeeves_queue_depth", "Messages waiting in a Celery queue.", labels=["queue"])
        up = GaugeMetricFamily("jeeves_redis_up", "1 when Redis (the broker) answered this scrape, else 0.")
        put_back = GaugeMetricFamily(
            "jeeves_tasks_put_back",
            "Tasks sweepers put back because the worker holding them died (since Redis started).",
        )
        clocks = GaugeMetricFamily(
            "jeeves_clock_offset_seconds",
            "A process's clock minus Redis' (web: measured at this scrape; workers: at their last sweep).",
            labels=["process"],
        )
        steps = len(queue_lists(QUEUES[0]))
        try:
            client = get_redis()
            pipe = client.pipeline()
            for queue in QUEUES:
                for name in queue_lists(queue):
                    pipe.llen(name)
            pipe.get(keys.SWEEP_RESTORED.key())
            pipe.hgetall(keys.CLOCK.key())
            *lengths, restored, offsets = pipe.execute()
            depths = [float(sum(lengths[i * steps : (i + 1) * steps])) for i in range(len(QUEUES))]
            up.add_metric([], 1.0)
            put_back.add_metric([], float(restored or 0))
            clocks.add_metric(["web"], liveness.clock_offset(client))
            for process, value in sorted(offsets.items()):
                offset, _, seen = value.partition(" ")
                if seen and float(seen) > time.time() - 600:  # processes seen in the last ten minutes
                    clocks.add_metric([process], float(offset))
        except Exception:
            depths = [float("nan")] * len(QUEUES)
            up.add_metric([], 0.0)
        for queue, value in zip(QUEUES, depths, strict=True):
            depth.add_metric([queue], value)
        yield depth
        yield up
        yield put_back
        yield clocks


def render() -> tuple[bytes, str]:
    """The /metrics page: every process's series (multiprocess mode) or this one's, and the scrape-time gauges."""
    path = multiproc_dir()
    if path:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=path)
        body = generate_latest(registry)
    else:
        body = generate_latest(REGISTRY)
    scrape = CollectorRegistry()
    scrape.register(_ScrapeTime())
    return body + generate_latest(scrape), CONTENT_TYPE_LATEST
