"""One Redis connection pool per process, for the window, claim-check keys and counters; and forgetting
a channel's keys.

Every call is bounded: a Redis that is down or black-holed fails a command within
JEEVES_BACKEND_TIMEOUT_S (connect and read), retried once on a fresh connection (a restarted Redis
leaves pooled connections dead), so the webhook answers 503 instead of hanging.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

import redis
from django.conf import settings
from redis.backoff import NoBackoff
from redis.retry import Retry

from ground import keys


@lru_cache(maxsize=1)
def get_redis() -> redis.Redis:
    timeout = settings.JEEVES.backend_timeout_s
    return redis.Redis.from_url(
        settings.REDIS_URL,
        decode_responses=True,
        health_check_interval=30,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 1),
    )


def family_keys(family: keys.Family, *leading: str) -> Iterator[str]:
    """The family's keys in Redis now (those whose first parts are `leading`), found by SCAN."""
    return get_redis().scan_iter(match=family.pattern(*leading), count=500)


def delete_matching(pattern: str) -> int:
    """Delete the keys SCAN MATCH `pattern` finds; how many there were."""
    client = get_redis()
    found = list(client.scan_iter(match=pattern, count=1000))
    if found:
        client.delete(*found)
    return len(found)


def forget_channel_keys(channel_id: str) -> int:
    """Delete every key of Jeeves' that names the channel (window, text claim checks, member cache,
    extraction locks, once-only markers): what a purged channel may not leave even in memory."""
    return delete_matching(keys.naming_channel(channel_id))
