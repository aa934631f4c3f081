"""The per-channel sliding window: the only place raw text rests (Redis, no persistence).

A Redis list per channel, newest last, trimmed to JEEVES_WINDOW_SIZE entries; the key's TTL is
JEEVES_WINDOW_MAX_AGE_S (refreshed on push); entries that arrived longer ago than that are removed
on push and never returned by read. Only the bridge writes it; extraction reads it at run time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter
from typing import TypeVar

from django.conf import settings
from redis.client import Pipeline

from ground import keys
from ground.redis import family_keys, get_redis

T = TypeVar("T")


@dataclass(frozen=True)
class WindowMessage:
    id: str
    author_id: str
    ts: datetime
    text: str
    mentions: list[str] = field(default_factory=list)  # qualified user ids mentioned
    quoted_id: str | None = None
    received_at: float = field(default_factory=time.time)  # unix time the bridge saw it

    def to_json(self) -> str:
        # Field by field: dataclasses.asdict deep-copies every value, a third of the webhook's window push.
        data = {
            "id": self.id,
            "author_id": self.author_id,
            "ts": self.ts.isoformat(),
            "text": self.text,
            "mentions": list(self.mentions),
            "quoted_id": self.quoted_id,
            "received_at": self.received_at,
        }
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str) -> WindowMessage:
        data = json.loads(raw)
        data["ts"] = datetime.fromisoformat(data["ts"])
        return cls(**data)


def key_for(channel_id: str) -> str:
    return keys.WINDOW.key(channel_id)


# Push, trim to the window's size, refresh the key's TTL and drop the entries that arrived longer ago than the
# max age, in one server-side step (one round trip, or none of its own inside a caller's pipeline). The
# key's TTL only bounds a quiet channel; in a busy one the oldest entries must go by age too.
def push_lua(key: str, entry: str, size: str, ttl: str, cutoff: str) -> str:
    """The push as Lua statements over the given KEYS/ARGV slots, for a script that pushes as one of its steps
    (the webhook's admission, `wire_bridge.ingest`)."""
    return f"""
redis.call('RPUSH', {key}, {entry})
redis.call('LTRIM', {key}, -tonumber({size}), -1)
redis.call('EXPIRE', {key}, {ttl})
local cutoff = tonumber({cutoff})
local head = redis.call('LINDEX', {key}, 0)
while head and cjson.decode(head)['received_at'] < cutoff do
  redis.call('LPOP', {key})
  head = redis.call('LINDEX', {key}, 0)
end
"""


_PUSH = push_lua("KEYS[1]", "ARGV[1]", "ARGV[2]", "ARGV[3]", "ARGV[4]") + "return 1\n"


def push(channel_id: str, message: WindowMessage, pipe: Pipeline | None = None) -> None:
    """Append the message. With `pipe` the step joins the caller's pipeline (sent when it executes)."""
    cfg = settings.JEEVES
    cutoff = repr(time.time() - cfg.window_max_age_s)
    (pipe if pipe is not None else get_redis()).eval(
        _PUSH, 1, key_for(channel_id), message.to_json(), cfg.window_size, keys.WINDOW.ttl_s(), cutoff
    )


def read(channel_id: str) -> list[WindowMessage]:
    """Messages in the window, oldest first, one per id; none that arrived more than the max age ago.

    Age is measured on arrival (`received_at`), not on the message's own timestamp, so a
    conversation replayed from a file behaves like a live one. A message pushed twice (the bridge
    retried after a failed publish) is kept at its first arrival.
    """
    cutoff = time.time() - settings.JEEVES.window_max_age_s
    raw = get_redis().lrange(key_for(channel_id), 0, -1)
    messages: dict[str, WindowMessage] = {}
    for r in raw:
        m = WindowMessage.from_json(r)
        if m.received_at >= cutoff:
            messages.setdefault(m.id, m)
    return list(messages.values())


def remove(channel_id: str, wire_msg_id: str) -> bool:
    """Remove one message (the author deleted it), and its vector. True when it was in the window."""
    client = get_redis()
    key = key_for(channel_id)
    removed = False
    client.hdel(keys.WINDOW_VECTORS.key(channel_id), wire_msg_id)
    for raw in client.lrange(key, 0, -1):
        if WindowMessage.from_json(raw).id == wire_msg_id:
            removed = bool(client.lrem(key, 1, raw)) or removed
    return removed


def flush(channel_id: str) -> None:
    get_redis().delete(key_for(channel_id), keys.WINDOW_VECTORS.key(channel_id))


def remove_author(author_id: str) -> int:
    """Drop every message `author_id` wrote from every window, and their vectors (a personal data request);
    returns how many."""
    client = get_redis()
    removed = 0
    for key in family_keys(keys.WINDOW):
        channel_id = keys.WINDOW.channel_of(key)
        for raw in client.lrange(key, 0, -1):
            message = WindowMessage.from_json(raw)
            if message.author_id == author_id:
                removed += client.lrem(key, 1, raw)
                client.hdel(keys.WINDOW_VECTORS.key(channel_id), message.id)
    return removed


# Tier 1's vectors of the window's messages (`keys.WINDOW_VECTORS`): the offline engine's Tier 2 reads them
# instead of embedding the same messages again in its own process. A value is opaque here (its writer packs
# a digest of the text with the vector, as text: `pipeline.offline.features.pack`). They go with their messages: removed
# with one, flushed with the window, and an extraction run keeps only those of the messages its window holds.
def keep_vectors(vectors: dict[str, dict[str, str]]) -> None:
    """Store `vectors` ({channel id: {wire_msg_id: packed vector}}), one round trip."""
    if not vectors:
        return
    ttl = keys.WINDOW_VECTORS.ttl_s()
    pipe = get_redis().pipeline(transaction=False)
    for channel_id, packed in vectors.items():
        if packed:
            key = keys.WINDOW_VECTORS.key(channel_id)
            pipe.hset(key, mapping=packed)
            pipe.expire(key, int(ttl) if ttl else 1)
    pipe.execute()


# Keep the fields of the window's messages (ARGV[2 .. n + 1]), drop the rest, return those asked for.
_VECTORS = """
local n = tonumber(ARGV[1])
local keep = {}
for i = 2, n + 1 do keep[ARGV[i]] = true end
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  if not keep[field] then redis.call('HDEL', KEYS[1], field) end
end
local out = {}
for i = n + 2, #ARGV do out[#out + 1] = redis.call('HGET', KEYS[1], ARGV[i]) or '' end
return out
"""


def vectors(channel_id: str, window_ids: Sequence[str], wanted: Sequence[str]) -> dict[str, str]:
    """The stored vectors of the messages `wanted`, after dropping those of messages not in `window_ids` (the
    window an extraction run read), one round trip."""
    found = get_redis().eval(_VECTORS, 1, keys.WINDOW_VECTORS.key(channel_id), len(window_ids), *window_ids, *wanted)
    return {i: raw for i, raw in zip(wanted, found, strict=True) if raw}


def excerpt(
    messages: Sequence[T],
    new: Collection[str],
    *,
    lead: int,
    budget: int,
    size: Callable[[T], int],
    key: Callable[[T], str] = attrgetter("id"),
) -> list[T]:
    """The part of a window (oldest first) a model's extraction prompt shows: every message from the first
    `new` one to the last, after at most `lead` messages before the first, taken nearest first while their
    `size`s sum to at most `budget` (the first that would pass it ends them). Messages after the last new one
    are not yet classified: the next run shows them as new. Empty when no message is new."""
    at = [i for i, m in enumerate(messages) if key(m) in new]
    if not at:
        return []
    start, spent = at[0], 0
    while start > 0 and at[0] - start < lead:
        cost = size(messages[start - 1])
        if spent + cost > budget:
            break
        spent += cost
        start -= 1
    return list(messages[start : at[-1] + 1])
