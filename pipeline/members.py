"""The per-channel member cache in Redis (docs/architecture.md §4: members live in Redis, not Postgres).

A hash `jeeves:members:{channel_id}`: field = qualified user id ("uuid@domain"), value = JSON
{"role": str, "name": str|None, "handle": str|None}. The bridge writes it on app added / user
joined / user left; the pipeline reads it to name members in prompts and resolve owners.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from ground import keys
from ground.redis import family_keys, get_redis


@dataclass(frozen=True)
class Member:
    user_id: str  # qualified "uuid@domain"
    role: str = "MEMBER"
    name: str | None = None
    handle: str | None = None


def key_for(channel_id: str) -> str:
    return keys.MEMBERS.key(channel_id)


def _encode(member: Member) -> str:
    data = asdict(member)
    data.pop("user_id")
    return json.dumps(data)


def replace_all(channel_id: str, members: list[Member]) -> None:
    key = key_for(channel_id)
    pipe = get_redis().pipeline()
    pipe.delete(key)
    if members:
        pipe.hset(key, mapping={m.user_id: _encode(m) for m in members})
    pipe.execute()


def add(channel_id: str, members: list[Member]) -> None:
    if members:
        get_redis().hset(key_for(channel_id), mapping={m.user_id: _encode(m) for m in members})


def remove(channel_id: str, user_ids: list[str]) -> None:
    if user_ids:
        get_redis().hdel(key_for(channel_id), *user_ids)


def all_members(channel_id: str) -> list[Member]:
    raw = get_redis().hgetall(key_for(channel_id))
    return [Member(user_id=uid, **json.loads(value)) for uid, value in sorted(raw.items())]


def flush(channel_id: str) -> None:
    get_redis().delete(key_for(channel_id))


def remove_everywhere(user_id: str) -> int:
    """Drop `user_id` from every channel's member cache (a personal data request); returns caches touched."""
    client = get_redis()
    return sum(client.hdel(key, user_id) for key in family_keys(keys.MEMBERS))
