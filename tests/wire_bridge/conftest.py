"""Fixtures of the bridge tests: Jeeves' Wire settings, an isolated Redis broker, and a respond worker."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings as django_settings
from django.test import override_settings

from tests.conftest import own_broker

APP_ID = "0a99ecb5-8a1c-4c4e-9f57-1b0ea1c0ffee@wire.example"
WIRE_SECRET = "sidecar-secret-for-tests"
ROMAN_SECRET = "roman-service-auth-for-tests"
CLASSIFY = "classify"


def wire_config(**extra: object):
    return dataclasses.replace(
        django_settings.JEEVES,
        wire_secret=WIRE_SECRET,
        roman_secret=ROMAN_SECRET,
        wire_app_id=APP_ID,
        wire_handle="jeeves",
        wire_default_domain="wire.example",
        **extra,
    )


@pytest.fixture
def wire_settings() -> Iterator[None]:
    with override_settings(JEEVES=wire_config()):
        yield


@pytest.fixture(autouse=True)
def drain_queues(redis_url: str) -> Iterator[None]:
    """Drop the tasks a test published for channels its transaction rolls back, so no later worker chews on them."""
    yield
    from ground.queues import queue_lists

    names = [n for q in ("classify", "respond", "extract", "embed", "summarise") for n in queue_lists(q)]
    redis.Redis.from_url(redis_url).delete(*names)


@pytest.fixture(scope="module")
def isolated_redis(redis_url: str) -> Iterator[str]:
    """A Redis database of this module's own, so the session-wide worker cannot take its tasks."""
    with own_broker(redis_url, "wire-bridge") as chosen:
        yield chosen
