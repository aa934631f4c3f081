"""Claim-check keys: message text parked in Redis with a TTL; tasks carry only the key (docs/architecture.md §4)."""

from __future__ import annotations

from redis.client import Pipeline

from ground import keys
from ground.redis import get_redis


def key_for(channel_id: str, wire_msg_id: str) -> str:
    return keys.CLAIM_CHECK.key(channel_id, wire_msg_id)


def park(channel_id: str, wire_msg_id: str, text: str, pipe: Pipeline | None = None) -> str:
    """Park the text for JEEVES_QUEUE_TTL_S; with `pipe` the SET joins the caller's pipeline."""
    key = key_for(channel_id, wire_msg_id)
    (pipe if pipe is not None else get_redis()).set(key, text, ex=keys.CLAIM_CHECK.ttl_s())
    return key


def claim(key: str) -> str | None:
    """The parked text, or None when its TTL has passed (the task then counts itself expired)."""
    return get_redis().get(key)


def discard(key: str) -> None:
    get_redis().delete(key)


def discard_many(keys_: list[str]) -> None:
    if keys_:
        get_redis().delete(*keys_)
