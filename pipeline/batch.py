"""Tier 1 in batches: a classify task also classifies the messages queued right behind it.

The offline engine embeds a batch of sentences far faster than the same sentences one at a time (MiniLM on
two cores: ~600 a second batched, ~130 alone), and a message's other work (its channel's context and window,
the consent and tombstone checks) is shared by the messages of a channel. So when a classify task runs with
the offline engine, it looks at the classify queue's next messages (read, never popped: `LRANGE` of the
lists kombu delivers from, highest priority first) and takes up to `JEEVES_CLASSIFY_BATCH` - 1 of them as
companions, marking each `jeeves:classify:taken:{ch}:{id}` (`SET NX`) so that two batches do not take the
same one.

Every guarantee stays with each message's own task, which is still in the queue:
- a companion is only classified on the plain path: channel active in the task's epoch, not deleted,
  receipt written and waiting at tier 0, text still parked. Anything else (dropped, expired, deleted, no
  receipt yet) is left for its own task, which counts it as it always did;
- when its own task is delivered it finds the receipt at tier 1 and the text discarded, and does nothing;
  when the batch died first (a killed worker), its own task classifies it: nothing is acknowledged for it
  but its own task; once the batch has committed and marked its companions done, their own tasks still
  waiting in the queue are removed from it (`dequeue`, `LREM` of the message as queued): a worker is not
  handed a task only for it to find its message done;
- the text is read from the claim-check key derived from the companion's channel and id, as its own task
  would, and lives only in this task's memory; each message is classified with its own channel's context
  and window, and writes only its own channel's rows.

A message taken by a batch while its own task runs on another worker may be classified twice; every write
of Tier 1 is idempotent (receipts, `t1:` signal keys, the pending set), as for a redelivery.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from ground import keys
from ground.queues import Queue, queue_lists
from ground.redis import get_redis
from knowledge import channels, forgetting, receipts
from knowledge.models import ChannelConfig, MessageReceipt
from pipeline import claimcheck
from pipeline.classify import Pending

logger = logging.getLogger(__name__)

CLASSIFY_TASK = "pipeline.tasks.classify_message"
# How far down the queue a batch looks for messages no other batch took.
_LOOK_AHEAD = 4

# SET NX each key in turn until ARGV[2] of them are taken; returns the indexes (1-based) taken.
_TAKE = """
local taken = {}
for i, key in ipairs(KEYS) do
  if #taken >= tonumber(ARGV[2]) then break end
  if redis.call('SET', key, '1', 'NX', 'EX', ARGV[1]) then
    taken[#taken + 1] = i
  end
end
return taken
"""


@dataclass(frozen=True)
class Queued:
    """A classify task waiting in the queue: its arguments (ids, an epoch, a timestamp; never text)."""

    channel_id: str
    wire_msg_id: str
    epoch: int
    over_rate: bool = False
    # What the companion's receipt is written with when the webhook's is not there yet (`ready`).
    author_id: str | None = field(default=None, compare=False)
    sent_at: str | None = field(default=None, compare=False)  # ISO 8601
    # Where the task waits (the queue's list and the message as kombu stored it): `dequeue` removes it there.
    queue: str | None = field(default=None, compare=False)
    raw: str | None = field(default=None, compare=False)


def _kwargs(raw: bytes | str, task: str, now: datetime) -> dict | None:
    """The keyword arguments of a queued task named `task`, or None for anything else (another task, an
    expired or delayed one, one with positional arguments, a message this code cannot read)."""
    try:
        message = json.loads(raw)
        headers = message.get("headers") or {}
        if headers.get("task") != task or headers.get("eta"):
            return None
        expires = headers.get("expires")
        if expires and datetime.fromisoformat(expires) <= now:
            return None  # Celery drops and counts it when it is delivered
        body = message["body"]
        if (message.get("properties") or {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args, kwargs, _embed = json.loads(body)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return kwargs if not args and isinstance(kwargs, dict) else None


def _parse(raw: bytes | str, now: datetime) -> Queued | None:
    """The arguments of a queued classify task, or None."""
    kwargs = _kwargs(raw, CLASSIFY_TASK, now)
    if kwargs is None:
        return None
    try:
        return Queued(
            channel_id=str(kwargs["channel_id"]),
            wire_msg_id=str(kwargs["wire_msg_id"]),
            epoch=int(kwargs["epoch"]),
            over_rate=bool(kwargs.get("over_rate", False)),
            author_id=None if kwargs.get("author_id") is None else str(kwargs["author_id"]),
            sent_at=None if kwargs.get("sent_at") is None else str(kwargs["sent_at"]),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _taken_key(channel_id: str, wire_msg_id: str) -> str:
    return keys.CLASSIFY_TAKEN.key(channel_id, wire_msg_id)


def take(channel_id: str, wire_msg_id: str, limit: int) -> list[Queued]:
    """Mark the task's own message taken and take up to `limit` companions from the head of the classify
    queue (the messages the workers would be handed next). Two round trips to Redis."""
    client = get_redis()
    now = timezone.now()
    seen = {(channel_id, wire_msg_id)}
    candidates: list[Queued] = []
    if limit > 0:
        with client.pipeline(transaction=False) as pipe:
            for name in queue_lists(Queue.CLASSIFY.value):
                pipe.lrange(name, -limit * _LOOK_AHEAD, -1)
            lists = pipe.execute()
        for name, raw_list in zip(queue_lists(Queue.CLASSIFY.value), lists, strict=True):
            # Highest priority first; in each list the next delivered is the last.
            for raw in reversed(raw_list):
                queued = _parse(raw, now)
                if queued is not None and (queued.channel_id, queued.wire_msg_id) not in seen:
                    seen.add((queued.channel_id, queued.wire_msg_id))
                    candidates.append(dataclasses.replace(queued, queue=name, raw=raw))
    own = _taken_key(channel_id, wire_msg_id)
    ttl = keys.CLASSIFY_TAKEN.ttl_s()
    if not candidates:
        client.set(own, "1", ex=ttl)
        return []
    # Its own message first, always counted as taken (its task runs it whatever another batch does).
    ids = client.eval(
        _TAKE, len(candidates) + 1, own, *[_taken_key(q.channel_id, q.wire_msg_id) for q in candidates], ttl, limit + 1
    )
    return [candidates[i - 2] for i in ids if i > 1]


def release(messages: Iterable[tuple[str, str]]) -> None:
    """The batch gave these up unclassified: they may be taken again."""
    names = [_taken_key(c, m) for c, m in messages]
    if names:
        get_redis().delete(*names)


def mark_done(messages: Iterable[tuple[str, str]]) -> None:
    """These messages' receipts are committed at tier 1: their own tasks may return at once (`done`)."""
    messages = list(messages)
    if not messages:
        return
    ttl = keys.CLASSIFY_TAKEN.ttl_s()
    with get_redis().pipeline(transaction=False) as pipe:
        for c, m in messages:
            pipe.set(_taken_key(c, m), "done", ex=ttl)
        pipe.execute()


def dequeue(classified: Iterable[Queued]) -> int:
    """The own tasks of companions this batch classified (marked `done` first), removed from the queue where they
    still wait: a worker would be handed each only for it to find its message done. One round trip; how many
    were removed (a task a worker has already fetched is not in the list, and returns at `done`)."""
    waiting = [q for q in classified if q.queue and q.raw]
    if not waiting:
        return 0
    with get_redis().pipeline(transaction=False) as pipe:
        for q in waiting:
            pipe.lrem(q.queue, 1, q.raw)
        return sum(pipe.execute())


def done(channel_id: str, wire_msg_id: str) -> bool:
    """A batch classified this message (its receipt is at tier 1): one `GET`, no query."""
    return get_redis().get(_taken_key(channel_id, wire_msg_id)) == "done"


def ready(companions: list[Queued]) -> tuple[list[Pending], list[Queued]]:
    """The companions on the plain path (see the module's docstring), with their text, to classify (one over
    its channel's rate by the offline engine only); and those left to their own tasks. One query per kind of
    check for the whole batch, and one `MGET`."""
    if not companions:
        return [], []
    left: list[Queued] = []
    accepted: dict[tuple[str, int], ChannelConfig | None] = {}
    for q in companions:
        if (q.channel_id, q.epoch) not in accepted:
            accepted[(q.channel_id, q.epoch)] = (
                ChannelConfig.objects.filter(channel_id=q.channel_id).first()
                if channels.channel_accepts(q.channel_id, q.epoch)
                else None
            )
    live = [q for q in companions if accepted[(q.channel_id, q.epoch)] is not None]
    left += [q for q in companions if accepted[(q.channel_id, q.epoch)] is None]
    by_channel: dict[str, list[Queued]] = {}
    for q in live:
        by_channel.setdefault(q.channel_id, []).append(q)
    deleted: set[tuple[str, str]] = set()
    waiting: set[tuple[str, str]] = set()
    for cid, qs in by_channel.items():
        ids = [q.wire_msg_id for q in qs]
        deleted |= {(cid, m) for m in forgetting.tombstoned(cid, ids)}
        # The webhook writes a receipt after its response (knowledge.receipts.defer_receipt): one not there yet is
        # written here, as the companion's own task would (`receipts.ensure_receipt`).
        receipts.ensure_receipts(
            [(cid, q.wire_msg_id, q.author_id, q.sent_at) for q in qs if (cid, q.wire_msg_id) not in deleted]
        )
        waiting |= {
            (cid, m)
            for m in MessageReceipt.objects.filter(
                channel_id=cid, wire_msg_id__in=ids, tier=0, outcome=MessageReceipt.Outcome.QUEUED
            ).values_list("wire_msg_id", flat=True)
        }
    plain = [q for q in live if (q.channel_id, q.wire_msg_id) in waiting - deleted]
    left += [q for q in live if (q.channel_id, q.wire_msg_id) not in waiting - deleted]
    texts = get_redis().mget([claimcheck.key_for(q.channel_id, q.wire_msg_id) for q in plain]) if plain else []
    out: list[Pending] = []
    for q, text in zip(plain, texts, strict=True):
        if text is None:
            left.append(q)  # expired: its own task counts it
        else:
            out.append(Pending(accepted[(q.channel_id, q.epoch)], q.wire_msg_id, text, q.over_rate))  # type: ignore[arg-type]
    return out, left


# --------------------------------------------------------------------------- Tier 3

EMBED_TASK = "pipeline.tasks.embed_records"


def embed_companions(limit: int) -> list[tuple[str, str]]:
    """The records of up to `limit` embed tasks waiting at the head of the embed queue, of channels still
    active in their tasks' epochs: the running embed task embeds them in its own forward pass. Their own
    tasks stay queued and, delivered later, find the vectors written (Tier 3 is idempotent per record) or,
    when this task died first, write them. Record ids only; each vector is written with its own record's
    channel. Nothing is marked taken: a second embed worker peeking at the same tasks repeats work, never
    a write."""
    client = get_redis()
    now = timezone.now()
    with client.pipeline(transaction=False) as pipe:
        for name in queue_lists(Queue.EMBED.value):
            pipe.lrange(name, -limit, -1)
        lists = pipe.execute()
    accepted: dict[tuple[str, int], bool] = {}
    out: list[tuple[str, str]] = []
    taken = 0
    for raw_list in lists:
        for raw in reversed(raw_list):
            if taken >= limit:
                return out
            kwargs = _kwargs(raw, EMBED_TASK, now)
            if kwargs is None:
                continue
            try:
                channel_id, epoch = str(kwargs["channel_id"]), int(kwargs["epoch"])
                records = [(str(kind), str(pk)) for kind, pk in kwargs["records"]]
            except (KeyError, TypeError, ValueError):
                continue
            if (channel_id, epoch) not in accepted:
                accepted[(channel_id, epoch)] = channels.channel_accepts(channel_id, epoch)
            if accepted[(channel_id, epoch)]:
                out += records
                taken += 1
    return out
