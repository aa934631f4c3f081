"""Claim-check keys: message text parked in Redis with a TTL; tasks carry only the key (docs/architecture.md §4)."""

from __future__ import annotations

from collections.abc import Sequence

from celery import current_app
from django.conf import settings
from redis.client import Pipeline

from ground import keys, metrics
from ground.queues import Queue
from ground.redis import get_redis

SEND_TASK = "wire_bridge.tasks.send_message"


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


def post(
    channel_id: str, ref: str, text: str, *, proactive: str, buttons: Sequence[Sequence[str]] | None = None
) -> str:
    """Post `text` in the channel on Jeeves's own initiative (a contradiction prompt, a staleness nudge, a
    digest): park it under the channel's claim-check key for `ref` and ask the respond queue to post it
    (the bridge's task, by name), counted under `proactive`; returns the key.

    The task is given the channel and the ref; it derives the key from both, so no caller can point it
    at another channel's text."""
    key = park(channel_id, ref, text)
    kwargs: dict[str, object] = {"channel_id": channel_id, "message_ref": ref}
    if buttons is not None:
        kwargs["buttons"] = [list(b) for b in buttons]
    current_app.send_task(SEND_TASK, kwargs=kwargs, queue=Queue.RESPOND.value, expires=settings.JEEVES.queue_ttl_s)
    metrics.proactive(proactive)
    return key
