"""Fixtures of the bridge tests: Jeeves' Wire settings, an isolated Redis broker, and a respond worker."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings as django_settings
from django.test import override_settings

from tests.conftest import WorkerProcess, own_broker, service_env

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


def wire_worker(redis_url: str, name: str, **extra: str) -> WorkerProcess:
    """A respond worker on `redis_url` with wire_config()'s secret, app id and domain and this process's Django
    secret key; `extra`: more of its environment (the fake servers' URLs)."""
    env = service_env(
        redis_url,
        JEEVES_WIRE_SECRET=WIRE_SECRET,
        JEEVES_WIRE_APP_ID=APP_ID,
        JEEVES_WIRE_DEFAULT_DOMAIN="wire.example",
        DJANGO_SECRET_KEY=django_settings.SECRET_KEY,
        **extra,
    )
    return WorkerProcess("respond", env, name=name)


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
