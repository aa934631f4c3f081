"""Ingest: what the bridge does with each internal event, before anything is queued.

A text message: ephemeral → ignored; addressed to Jeeves → command (state commands applied here, the
reply on the `respond` queue); otherwise one Redis script, one round trip (`_ADMIT`): the channel's gate
(state, epoch, deleted messages; knowledge/gate.py) → dedupe (a marker of the message id) → window push →
claim-check → the token bucket → `classify` queued with `expires`. A missing gate sends the message to
Postgres (`receipts.admit_message`, under the channel row's share lock), which fills the gate from what it
read. Returns a short outcome word for the webhook's answer; never logs text.

Accepted means queued: the answer follows the script, and a failed script answers 503 with nothing written
(no dedupe marker either), so Wire's retry is admitted afresh. The receipt, the record that the publish
happened, is written after the response (`receipts.defer_receipt`); when the classify worker gets there
first, or the web process died in between, the worker writes it (`receipts.ensure_receipt`). A message is
therefore published at least once and classified once (the worker skips what is past tier 0).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import weakref
from collections.abc import Callable
from typing import Any

from celery import current_app
from django.conf import settings
from django.utils import timezone
from redis import Redis
from redis.client import Pipeline
from redis.commands.core import Script

from ground import broker, keys
from ground.queues import LOW_PRIORITY, Queue
from ground.redis import get_redis
from knowledge import channels, forgetting, gate, receipts
from knowledge.models import ChannelConfig, MessageReceipt
from pipeline import claimcheck, members, window
from pipeline.tasks import classify_message, purge_left_channels
from wire_bridge import commands, state, tasks
from wire_bridge.events import (
    AppAdded,
    ButtonClicked,
    ConversationDeleted,
    Event,
    Member,
    MessageDeleted,
    TextMessage,
    UserJoined,
    UserLeft,
)

logger = logging.getLogger(__name__)

# Events may arrive out of order. A conversation Wire deleted is gone for good: its tombstone (under this id,
# which no Wire message id takes) makes a late `app_added` a no-op. A `user_joined` for a conversation not yet
# known waits here (member ids and names, an hour) for the `app_added` that will introduce it.
CONVERSATION_DELETED = "#conversation-deleted"


# Fairness: a token bucket per channel (JEEVES_CHANNEL_RATE messages/s, JEEVES_CHANNEL_BURST), on Redis' clock;
# its key expires after keys.BUCKET's TTL (ARGV[3]: the time the bucket takes to fill, and a minute).
def _bucket_lua(key: str, rate: str, burst: str, ttl: str) -> str:
    """Take a token from the bucket at `key` as Lua statements: `allowed` (the caller's local, 1) becomes 0
    when the bucket is empty."""
    return f"""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rate, burst = tonumber({rate}), tonumber({burst})
local held = redis.call('HMGET', {key}, 'tokens', 'at')
local tokens = tonumber(held[1]) or burst
local at = tonumber(held[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
if tokens >= 1 then tokens = tokens - 1 else allowed = 0 end
redis.call('HSET', {key}, 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('EXPIRE', {key}, {ttl})
"""


_TOKEN_BUCKET = "local allowed = 1\n" + _bucket_lua("KEYS[1]", "ARGV[1]", "ARGV[2]", "ARGV[3]") + "return allowed\n"


def handle(event: Event) -> str:
    """The event handed to its handler (`_HANDLERS`, at the end of this module); the handler's outcome."""
    handler = _HANDLERS.get(type(event))
    if handler is None:
        raise AssertionError(f"unhandled event {type(event).__name__}")
    if handler is not handle_text:
        # A text message touches the database only in `receipts.admit_message`, which reads first what the
        # previous request left unread (the request started without waiting for it: receipts.UNWAITED_PATHS).
        receipts.settle()
    return handler(event)


# --------------------------------------------------------------------------- text messages


def handle_text(event: TextMessage) -> str:
    if event.expires_after_ms is not None:
        # The author asked for this message to disappear: no receipt, no window, no task.
        return "ephemeral"
    body = commands.addressed_body(event.text, event.mentions, event.bot_id, settings.JEEVES.wire_handle)
    if body is not None:
        receipts.settle()  # the database is free (see `handle`)
        return _command(event, body)
    outcome = _admit(event)
    if outcome == "unknown":
        _ensure_channel(event)
        outcome = _admit(event)
    if outcome == "queued":
        logger.info("queued classify: channel=%s msg=%s", event.channel_id, event.message_id)
    return outcome


# The admission in Redis, one script and one round trip (knowledge/gate.py): the channel's gate (state and epoch,
# its deleted messages), the dedupe (the message id's `keys.SEEN` marker, set last), then the window push, the
# claim check, the channel's token bucket and the classify task, none of it when the gate refuses. The task's epoch
# is the one this process last saw (`_EPOCHS`); the gate answers with its own when they differ and the message is
# sent again. A missing gate answers "cold": the message is admitted in Postgres (`_admit_cold`), which fills it
# ("fill+admit", or "fill" alone for a refused message) before the row's share lock is released.
# KEYS: gate, seen, window, claim check, bucket, the within-rate and over-rate lists.
# ARGV: mode, expected gate, message id, window entry, window size, window TTL, window cutoff, text, text TTL, seen
# TTL, rate (0: no bucket), burst, bucket TTL, the two task messages, the fill's gate and TTL, its tombstones.
_ADMIT = (
    """
local gate = KEYS[1]
local mode = ARGV[1]
if mode ~= 'admit' and redis.call('EXISTS', gate) == 0 then
  redis.call('HSET', gate, 'g', ARGV[16])
  for i = 18, #ARGV do redis.call('HSET', gate, 't:' .. ARGV[i], '1') end
  redis.call('EXPIRE', gate, ARGV[17])
end
if mode == 'fill' then return {'filled'} end
local g = redis.call('HGET', gate, 'g')
if not g then return {'cold'} end
if g ~= ARGV[2] then
  if string.sub(g, 1, 7) == 'active:' then return {'epoch', string.sub(g, 8)} end
  return {'dropped'}
end
if redis.call('HEXISTS', gate, 't:' .. ARGV[3]) == 1 then return {'forgotten'} end
if redis.call('EXISTS', KEYS[2]) == 1 then return {'duplicate'} end
"""
    + window.push_lua("KEYS[3]", "ARGV[4]", "ARGV[5]", "ARGV[6]", "ARGV[7]")
    + """redis.call('SET', KEYS[4], ARGV[8], 'EX', ARGV[9])
local allowed = 1
if tonumber(ARGV[11]) > 0 then
"""
    + _bucket_lua("KEYS[5]", "ARGV[11]", "ARGV[12]", "ARGV[13]")
    + """end
if allowed == 1 then redis.call('LPUSH', KEYS[6], ARGV[14]) else redis.call('LPUSH', KEYS[7], ARGV[15]) end
-- The dedupe marker last: a script that fails half-way (it writes what it ran) leaves the retry admitted.
redis.call('SET', KEYS[2], '1', 'EX', ARGV[10])
return {'queued', allowed}
"""
)
# The epoch of each channel this process last admitted a message of (what its tasks carry); a wrong one costs
# one more round trip, never a wrong task: the script queues only under the gate's own epoch.
_EPOCHS: dict[str, int] = {}
_EPOCHS_MAX = 10_000


class _Refused(Exception):
    """The Redis step refused a message Postgres admitted (a duplicate admitted in Redis before): roll back."""

    def __init__(self, outcome: str) -> None:
        super().__init__(outcome)
        self.outcome = outcome


def _admit(event: TextMessage) -> str:
    """Admit, window, park and publish in one Redis round trip; in Postgres when the gate is cold."""
    client = get_redis()
    if not _joins_pipeline(client):
        return _admit_in_postgres(event)
    cid = event.channel_id
    received = timezone.now()
    epoch = _EPOCHS.get(cid, 0)
    answer: list = ["cold"]
    for _ in range(2):
        answer = _gate(client, event, epoch, "admit")
        if answer[0] != "epoch":
            break
        epoch = _remember_epoch(cid, int(answer[1]))
        answer = ["cold"]  # moved on twice meanwhile: ask Postgres
    if answer[0] == "cold":
        return _admit_cold(client, event)
    if answer[0] == "queued":
        receipts.defer_receipt(
            cid, event.message_id, author_id=event.sender.qualified, sent_at=event.timestamp, received_at=received
        )
    return answer[0]


def _remember_epoch(channel_id: str, epoch: int) -> int:
    if len(_EPOCHS) >= _EPOCHS_MAX:
        _EPOCHS.clear()
    _EPOCHS[channel_id] = epoch
    return epoch


def _admit_cold(client, event: TextMessage) -> str:
    """The gate is missing: admitted in Postgres (the receipt written there) and the gate filled from that read."""
    cid = event.channel_id
    try:
        with receipts.admit_message(
            cid, event.message_id, author_id=event.sender.qualified, sent_at=event.timestamp, commit_unread=True
        ) as admission:
            if admission.outcome == "unknown":
                return "unknown"
            if admission.outcome != "admitted":
                _gate(client, event, admission.epoch, "fill", admission)
                return admission.outcome
            _remember_epoch(cid, admission.epoch)
            answer = _gate(client, event, admission.epoch, "fill+admit", admission)
            if answer[0] != "queued":
                raise _Refused(answer[0])
            return "queued"
    except _Refused as refused:
        if refused.outcome in ("cold", "epoch"):  # a gate that disagrees with Postgres under the share lock
            gate.forget(cid)
            raise RuntimeError("the admission gate disagreed with Postgres") from None
        return refused.outcome


def _gate(client, event: TextMessage, epoch: int, mode: str, fill: receipts.Admission | None = None) -> list:
    """Run the admission script (`_ADMIT`) for `event` under `epoch`; its answer. The task queued is announced."""
    cfg = settings.JEEVES
    cid = event.channel_id
    within = _classify_message(event, epoch, over_rate=False)
    over = _classify_message(event, epoch, over_rate=True) if cfg.channel_rate > 0 else within
    entry = _window_entry(event)
    args = [
        mode,
        gate.value("active", epoch, False),
        event.message_id,
        entry.to_json(),
        cfg.window_size,
        keys.WINDOW.ttl_s(),
        repr(entry.received_at - cfg.window_max_age_s),
        event.text,
        keys.CLAIM_CHECK.ttl_s(),
        keys.SEEN.ttl_s(),
        cfg.channel_rate,
        cfg.channel_burst,
        keys.BUCKET.ttl_s(),
        within.payload,
        over.payload,
    ]
    if fill is not None:
        args += [fill.gate, keys.GATE.ttl_s(), *fill.tombstones]
    answer = _admit_script(client)(
        keys=(
            gate.key_for(cid),
            keys.SEEN.key(cid, event.message_id),
            window.key_for(cid),
            claimcheck.key_for(cid, event.message_id),
            keys.BUCKET.key(cid),
            within.list_key,
            over.list_key,
        ),
        args=args,
    )
    if answer[0] == "queued":
        (within if answer[1] == 1 else over).announce()
    return answer


_scripts: weakref.WeakKeyDictionary[object, Script] = weakref.WeakKeyDictionary()


def _admit_script(client) -> Script:
    """`_ADMIT` registered on the client (EVALSHA; loaded again after a restart)."""
    script = _scripts.get(client)
    if script is None:
        script = _scripts[client] = client.register_script(_ADMIT)
    return script


def _admit_in_postgres(event: TextMessage) -> str:
    """Where the broker cannot join the webhook's Redis step (another transport or server): admitted in Postgres,
    then window, claim check and the publish."""
    cid = event.channel_id
    author = event.sender.qualified
    # The COMMIT's answer is read after the response (receipts.settle): nothing below uses the connection.
    with receipts.admit_message(
        cid, event.message_id, author_id=author, sent_at=event.timestamp, commit_unread=True
    ) as admission:
        if admission.outcome != "admitted":
            return admission.outcome
        # Still under the channel's share lock: a secure flush cannot run between these and the check.
        # A retry after a failed publish pushes the message again; window.read keeps one entry per id.
        # Window, claim check, the channel's token bucket and the publish in one Redis round trip.
        pipe = get_redis().pipeline(transaction=False)
        window.push(cid, _window_entry(event), pipe)
        claimcheck.park(cid, event.message_id, event.text, pipe)
        _publish_classify(event, admission.epoch, pipe)  # executes the pipeline (and the publish)
        return "queued"


def _window_entry(event: TextMessage) -> window.WindowMessage:
    return window.WindowMessage(
        id=event.message_id,
        author_id=event.sender.qualified,
        ts=event.timestamp,
        text=event.text,
        mentions=[m.user.qualified for m in event.mentions],
        quoted_id=event.quoted_message_id,
    )


# Per Redis connection pool: whether the classify task can be queued on the webhook's own pipeline
# (`broker.joins_pipelines`: the broker is Jeeves' kombu transport on the same server and database). A process's
# broker and Redis are fixed; a test that points them elsewhere replaces the pool too (tests/conftest.py).
_joins: weakref.WeakKeyDictionary[object, bool] = weakref.WeakKeyDictionary()


def _joins_pipeline(pipe: Pipeline | Redis) -> bool:
    """Whether the classify task can go on Jeeves' own Redis (`pipe`'s pool: found out once per pool)."""
    pool = pipe.connection_pool
    joins = _joins.get(pool)
    if joins is None:
        with current_app.producer_or_acquire() as producer:
            joins = _joins[pool] = broker.joins_pipelines(getattr(producer, "channel", None), pipe)
    return joins


def _publish_classify(event: TextMessage, epoch: int, pipe: Pipeline) -> None:
    """Publish Tier 1 for an admitted message, before its receipt commits (see the module's docstring),
    and execute `pipe`: the task goes last on it when it can (`_joins_pipeline`), else the publish
    follows the pipeline. Either way the text is parked before a worker can see the task.

    On the pipeline the task is a `broker.TaskMessage`: the message Celery would queue, built without
    Celery's per-call machinery. With the channel's token bucket (JEEVES_CHANNEL_RATE > 0) it is an
    `EVAL` that takes a token and queues one of the message's two variants by the answer, in the same
    round trip: within the rate, at the default priority; over it, at the lowest priority (Redis serves
    the other channels' messages first) and marked for the offline classifier (no model spend): a
    flooding channel delays itself, not the others. The expiry allows for the clocks' tolerated skew
    (JEEVES_CLOCK_SKEW_S); the text's own TTL, on Redis' clock, stays JEEVES_QUEUE_TTL_S.

    The task carries the receipt's fields (ids and a timestamp, never text) so that the worker can
    write the receipt when the web process died before committing it.
    """
    cfg = settings.JEEVES
    bucket = None
    if cfg.channel_rate > 0:
        bucket = broker.Gate(
            _TOKEN_BUCKET,
            (keys.BUCKET.key(event.channel_id),),
            (cfg.channel_rate, cfg.channel_burst, keys.BUCKET.ttl_s()),
        )
    if not _joins_pipeline(pipe):
        within_rate = 1
        if bucket is not None:
            within_rate = get_redis().eval(bucket.script, len(bucket.keys), *bucket.keys, *bucket.args)
        pipe.execute()
        classify_message.apply_async(**_classify_options(event, epoch, not within_rate))
        return
    within = _classify_message(event, epoch, over_rate=False)
    if bucket is None:
        pipe.lpush(within.list_key, within.payload)
        pipe.execute()
        within.announce()
        return
    over = _classify_message(event, epoch, over_rate=True)
    bucket.push_one(pipe, within, over)
    answer = pipe.execute()[-1]
    (within if answer == 1 else over).announce()


def _classify_kwargs(event: TextMessage, epoch: int, over_rate: bool) -> dict[str, object]:
    kwargs: dict[str, object] = {
        "channel_id": event.channel_id,
        "wire_msg_id": event.message_id,
        "epoch": epoch,
        "author_id": event.sender.qualified,
        "sent_at": event.timestamp.isoformat(),
    }
    if over_rate:
        kwargs["over_rate"] = True
    return kwargs


def _classify_message(event: TextMessage, epoch: int, over_rate: bool) -> broker.TaskMessage:
    cfg = settings.JEEVES
    kwargs = _classify_kwargs(event, epoch, over_rate)
    # The arguments' representation (what Flower shows) is given: ids only (Celery's own saferepr is slow).
    return broker.TaskMessage.build(
        classify_message,
        kwargs,
        kwargsrepr=repr(kwargs),
        expires_s=cfg.queue_ttl_s + cfg.clock_skew_s,
        priority=LOW_PRIORITY if over_rate else 0,
    )


def _classify_options(event: TextMessage, epoch: int, over_rate: bool) -> dict[str, object]:
    """`apply_async`'s options for the same task, where it cannot join the pipeline."""
    kwargs = _classify_kwargs(event, epoch, over_rate)
    options: dict[str, object] = {"priority": LOW_PRIORITY} if over_rate else {}
    cfg = settings.JEEVES
    # declare=[]: Celery would declare the queue (bind a copy of it to the channel, then find it declared)
    # on every publish; the publish goes to the queue's list by name and the workers declare their queues.
    options.update(
        kwargs=kwargs,
        expires=cfg.queue_ttl_s + cfg.clock_skew_s,
        argsrepr="()",
        kwargsrepr=repr(kwargs),
        declare=[],
    )
    return options


def _ensure_channel(event: TextMessage) -> ChannelConfig:
    return channels.ensure_channel(
        event.channel_id, organisation_id=event.conversation.domain, transport=event.transport
    )


def _first_sight(channel_id: str, key: str) -> bool:
    """A Redis marker for events without a receipt (commands, clicks): False on redelivery."""
    return bool(get_redis().set(keys.SEEN.key(channel_id, key), 1, nx=True, ex=keys.SEEN.ttl_s()))


def _forget_sight(channel_id: str, key: str) -> None:
    get_redis().delete(keys.SEEN.key(channel_id, key))


def _command(event: TextMessage, body: str) -> str:
    cid = event.channel_id
    command = commands.parse(body)
    if not _first_sight(cid, event.message_id):
        return "duplicate"
    try:
        return _run_command(event, body, command)
    except Exception:
        _forget_sight(cid, event.message_id)  # let the sender's redelivery try again
        raise


def _run_command(event: TextMessage, body: str, command: commands.Command) -> str:
    cid = event.channel_id
    channel = channels.get_channel(cid) or _ensure_channel(event)
    if channel.left_at is not None:
        return "dropped"
    if channel.is_active and receipts.record_receipt(
        cid, event.message_id, author_id=event.sender.qualified, sent_at=event.timestamp
    ):
        # Only an active channel keeps a receipt (never any text); paused/secure record nothing.
        receipts.mark_receipt(cid, event.message_id, outcome=MessageReceipt.Outcome.COMMAND)
    outcome = ""
    if command.kind in commands.STATE_KINDS:
        outcome = state.apply(cid, command.kind, by=event.sender.qualified)
    others = [m.user.qualified for m in event.mentions if m.user.qualified != event.bot_id]
    payload: dict[str, object] = {"body": body, "mentions": others}
    if command.kind == commands.Kind.CONTEXT_STAKEHOLDERS:
        blanked = commands.blank_mentions(event.text, event.mentions, event.bot_id)
        payload["plain"] = commands.addressed_body(blanked, event.mentions, event.bot_id, settings.JEEVES.wire_handle)
    claimcheck.park(cid, event.message_id, json.dumps(payload, ensure_ascii=False))
    tasks.publish_command(cid, event.message_id, event.sender.qualified, command.kind, outcome)
    logger.info("command: channel=%s msg=%s kind=%s %s", cid, event.message_id, command.kind, outcome)
    return "command"


# --------------------------------------------------------------------------- buttons


def handle_button(event: ButtonClicked) -> str:
    cid = event.channel_id
    channel = channels.get_channel(cid)
    if channel is None or channel.left_at is not None:
        return "ignored"
    seen = f"button:{event.dedupe_key}"
    if not _first_sight(cid, seen):
        return "duplicate"
    try:
        outcome = ""
        kind = tasks.button_command(event.button_id)
        if kind in commands.STATE_KINDS:
            outcome = state.apply(cid, kind, by=event.sender.qualified)
        tasks.publish_button(cid, event, outcome)
    except Exception:
        _forget_sight(cid, seen)
        raise
    logger.info("button: channel=%s ref=%s button=%s", cid, event.referenced_message_id, event.button_id)
    return "button"


# --------------------------------------------------------------------------- membership


def _cache_member(m: Member) -> members.Member:
    return members.Member(user_id=m.user.qualified, role=m.role, name=m.name, handle=m.handle)


def handle_app_added(event: AppAdded) -> str:
    cid = event.channel_id
    if forgetting.tombstoned(cid, [CONVERSATION_DELETED]):
        return "ignored"  # its conversation_deleted overtook it: the conversation is gone
    channels.ensure_channel(
        cid,
        organisation_id=event.conversation.domain,
        transport=event.transport,
        name=event.name,
        conversation_type=event.conversation_type,
        tz=event.timezone,
        rejoin=True,
    )
    members.replace_all(cid, [_cache_member(m) for m in event.members])
    _apply_early_joins(cid, event.bot_id)
    if event.transport == "roman":
        # Roman names only the requester and no conversation type; its REST API's member list (off the
        # request path) fills the cache and settles the type.
        tasks.publish_member_sync(cid)
    logger.info("app added: channel=%s members=%d", cid, len(event.members))
    return "joined"


def handle_user_joined(event: UserJoined) -> str:
    cid = event.channel_id
    if channels.get_channel(cid) is None:
        # It overtook the app_added introducing the conversation: kept for it, so the end state is the same.
        key = keys.EARLY_JOINS.key(cid)
        pipe = get_redis().pipeline()
        for m in event.members:
            pipe.rpush(key, json.dumps(dataclasses.asdict(_cache_member(m))))
        pipe.expire(key, keys.EARLY_JOINS.ttl_s())
        pipe.execute()
        return "members"
    members.add(cid, [_cache_member(m) for m in event.members])
    if any(m.user.qualified != event.bot_id for m in event.members):
        channels.members_joined(cid)
    return "members"


def _apply_early_joins(channel_id: str, bot_id: str | None) -> None:
    key = keys.EARLY_JOINS.key(channel_id)
    pipe = get_redis().pipeline()
    pipe.lrange(key, 0, -1)
    pipe.delete(key)
    raw, _ = pipe.execute()
    joined = [members.Member(**json.loads(r)) for r in raw]
    if joined:
        members.add(channel_id, joined)
        if any(m.user_id != bot_id for m in joined):
            channels.members_joined(channel_id)


def handle_user_left(event: UserLeft) -> str:
    cid = event.channel_id
    if event.bot_id in {u.qualified for u in event.users}:
        _leave(cid)
        return "left"
    # A group that shrinks to one person stays a group: only Wire's conversation type makes a 1:1.
    members.remove(cid, [u.qualified for u in event.users])
    return "members"


def handle_conversation_deleted(event: ConversationDeleted) -> str:
    forgetting.tombstone(event.channel_id, CONVERSATION_DELETED)
    _leave(event.channel_id)
    return "left"


def _leave(channel_id: str) -> None:
    """Out of every scope now; purged after JEEVES_RETENTION_AFTER_LEAVE_DAYS (0: at once) by the summarise worker."""
    channels.mark_left(channel_id)
    state.forget_recent(channel_id)
    members.flush(channel_id)
    if settings.JEEVES.retention_after_leave_days == 0:
        purge_left_channels.apply_async(expires=3600)


# --------------------------------------------------------------------------- the author's wishes


def handle_message_deleted(event: MessageDeleted) -> str:
    cid = event.channel_id
    # First, so the message is dropped wherever it is: not yet arrived, queued, or being extracted.
    forgetting.tombstone(cid, event.message_id)
    window.remove(cid, event.message_id)
    claimcheck.discard(claimcheck.key_for(cid, event.message_id))
    if channels.get_channel(cid) is None:
        return "ignored"
    current_app.send_task(
        "pipeline.tasks.forget_message",
        kwargs={"channel_id": cid, "wire_msg_id": event.message_id},
        queue=Queue.EXTRACT.value,
    )
    logger.info("message deleted: channel=%s msg=%s", cid, event.message_id)
    return "forgotten"


# Each internal event type's handler.
_HANDLERS: dict[type, Callable[[Any], str]] = {
    TextMessage: handle_text,
    AppAdded: handle_app_added,
    UserJoined: handle_user_joined,
    UserLeft: handle_user_left,
    ConversationDeleted: handle_conversation_deleted,
    ButtonClicked: handle_button,
    MessageDeleted: handle_message_deleted,
}
