"""The webhook's admission gate in Redis (`keys.GATE`): a copy of what the admission reads in Postgres.

One hash per channel: `g` = "<state>:<epoch>" ("left:<epoch>" once Jeeves left) and a `t:<wire_msg_id>` field
per message its author deleted (tombstones live in Postgres for days; the copy is filled with those alive).
The webhook decides paused / secure / left / deleted / duplicate against it in the same Redis script that
windows, parks and queues an admitted message (wire_bridge/ingest.py), one round trip; a channel whose hash
is missing (first message after a restart, a flush, the TTL) is admitted in Postgres as before, under the
row's share lock, and the hash filled from that read before the lock is released.

Kept right by ordering, not by expiry: every writer of `state`, `epoch` or `left_at` deletes the hash while it
holds the channel row's lock, before it commits (`forget`). A message the Redis script admits before the
delete was admitted before the change, as one holding the share lock was before; after the delete the next
message is admitted in Postgres, which waits for the change to commit and reads it. So once a pause (or
secure mode, or leaving) has committed, no message of the channel reaches the window, a claim check or a
queue. A fill never overwrites a hash (HSETNX semantics, `fill`'s script): a filler reading Postgres holds the
share lock, so a writer deleting the hash waits for it, and the fill lands first.
"""

from __future__ import annotations

from ground import keys
from ground.redis import get_redis

# Note a tombstone only in a hash that exists: a missing one is filled from Postgres, which has it.
_NOTE_TOMBSTONE = """
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], ARGV[1], '1') end
return 1
"""


def key_for(channel_id: str) -> str:
    return keys.GATE.key(channel_id)


def value(state: str, epoch: int, left: bool) -> str:
    """The hash's `g` for a channel row's state, epoch and left_at."""
    return f"{'left' if left else state}:{epoch}"


def forget(channel_id: str) -> None:
    """Drop the channel's gate; call it holding the channel row's lock, before the change commits."""
    get_redis().delete(key_for(channel_id))


def note_tombstone(channel_id: str, wire_msg_id: str) -> None:
    """The message was deleted (its tombstone committed in Postgres): the gate refuses it from now on."""
    get_redis().eval(_NOTE_TOMBSTONE, 1, key_for(channel_id), "t:" + wire_msg_id)
