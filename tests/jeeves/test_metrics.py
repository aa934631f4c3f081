"""GET /metrics is not for the public web: a bearer token (JEEVES_METRICS_TOKEN), or a client on the host."""

from __future__ import annotations

import dataclasses

import pytest
from django.test import override_settings

pytestmark = pytest.mark.django_db


def test_without_a_token_only_the_host_itself_reads_metrics(client, settings):
    with override_settings(JEEVES=dataclasses.replace(settings.JEEVES, metrics_token="")):
        assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
        assert client.get("/metrics", REMOTE_ADDR="203.0.113.9").status_code == 401
        forwarded = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.9")
        assert forwarded.status_code == 401  # a proxy on the host relaying the public web


def test_with_a_token_every_client_needs_it(client, settings):
    with override_settings(JEEVES=dataclasses.replace(settings.JEEVES, metrics_token="scrape-me")):
        assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 401
        assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
        ok = client.get("/metrics", REMOTE_ADDR="203.0.113.9", HTTP_AUTHORIZATION="Bearer scrape-me")
        assert ok.status_code == 200 and b"jeeves_queue_depth" in ok.content


def _families(text: str) -> dict[str, list]:
    from prometheus_client.parser import text_string_to_metric_families

    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_metrics_answer_200_with_redis_down_depths_nan_and_up_zero(client, settings):
    import math

    from ground.redis import get_redis
    from tests.conftest import free_port

    with override_settings(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0"):  # nothing listens there
        get_redis.cache_clear()
        try:
            response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
        finally:
            get_redis.cache_clear()
    assert response.status_code == 200
    families = _families(response.content.decode())
    assert [s.value for s in families["jeeves_redis_up"]] == [0.0]
    depths = {s.labels["queue"]: s.value for s in families["jeeves_queue_depth"]}
    assert set(depths) == {"classify", "extract", "embed", "respond", "summarise"}
    assert all(math.isnan(v) for v in depths.values())

    up = _families(client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode())
    assert [s.value for s in up["jeeves_redis_up"]] == [1.0]


def test_metrics_report_clock_offsets_and_tasks_put_back(client, settings, redis_client):
    """Each worker's sweeper records its clock's offset to Redis'; /metrics exports them, the web's own, and
    how many tasks sweepers put back; a process over JEEVES_CLOCK_SKEW_S is logged."""
    from ground import keys
    from pipeline import liveness

    offset = liveness.measure_clock()
    assert abs(offset) < 1  # this process and the test Redis share a clock
    with override_settings(JEEVES=dataclasses.replace(settings.JEEVES, metrics_token="")):
        body = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    families = _families(body)
    processes = {s.labels["process"] for s in families["jeeves_clock_offset_seconds"]}
    assert "web" in processes and len(processes) >= 2  # the web's, and this process's recorded one
    assert "jeeves_tasks_put_back" in families
    redis_client.delete(keys.CLOCK.key())
