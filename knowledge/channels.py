"""Channel services: the consent state machine, context, membership flags and Roman bots (`channel_config`).

Every write to `channel_config` / `roman_bots` goes through here; the bridge decides when.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime

import psycopg
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.dispatch import Signal
from django.utils import timezone

from knowledge.models import ChannelConfig, ChannelState, ConversationType, MessageReceipt, RomanBot

logger = logging.getLogger(__name__)

CONTEXT_FIELDS: frozenset[str] = frozenset({"purpose", "context_type", "tags", "stakeholders", "related_channels"})
# What members type as a channel's context reaches model prompts (as quoted data): bounded when stored.
PURPOSE_MAX_CHARS = 500
TAG_MAX_CHARS = 40
LIST_MAX_ITEMS = 20


@dataclass(frozen=True)
class Transition:
    previous: str
    current: str
    epoch: int

    @property
    def changed(self) -> bool:
        return self.previous != self.current


def ensure_channel(
    channel_id: str,
    *,
    organisation_id: str,
    transport: str,
    name: str | None = None,
    conversation_type: str | None = None,
    tz: str | None = None,
    rejoin: bool = False,
) -> ChannelConfig:
    """The channel row, created on first sight. `rejoin` (app added) refreshes its details and clears `left_at`."""
    defaults: dict[str, object] = {"organisation_id": organisation_id, "transport": transport}
    if name is not None:
        defaults["channel_name"] = name
    if conversation_type is not None:
        defaults["conversation_type"] = conversation_type
    if tz is not None:
        defaults["timezone"] = tz
    channel, created = ChannelConfig.objects.get_or_create(channel_id=channel_id, defaults=defaults)
    if rejoin and not created:
        fields = {k: v for k, v in defaults.items() if k != "organisation_id"}
        if channel.left_at is not None:
            fields.update(left_at=None, joined_at=timezone.now())
        ChannelConfig.objects.filter(channel_id=channel_id).update(**fields)
        channel.refresh_from_db()
    return channel


# The webhook's admission, one statement: the gate (state, epoch, left, tombstone) under a share lock on the
# channel row, and the receipt written only when the gate is open. set_config(..., true) lasts for this
# transaction only. synchronous_commit off: a receipt lost to a crash in the next few milliseconds only
# weakens dedupe of a redelivery, which the tiers' natural keys cover. lock_timeout / statement_timeout: a
# state change holding the row, or a stalled server, fails the webhook with 503 within the backend timeout.
_ADMIT = f"""WITH gate AS (
  SELECT set_config('synchronous_commit', 'off', true), set_config('lock_timeout', %(budget)s, true),
         set_config('statement_timeout', %(budget)s, true),
         c.state, c.epoch, c.left_at IS NOT NULL AS left_channel,
         EXISTS (SELECT 1 FROM message_tombstones t WHERE t.channel_id = c.channel_id
                 AND t.wire_msg_id = %(msg)s AND t.expires_at > now()) AS forgotten
  FROM channel_config c WHERE c.channel_id = %(channel)s FOR SHARE OF c
), receipt AS (
  INSERT INTO {MessageReceipt._meta.db_table}
    (channel_id, wire_msg_id, author_id, sent_at, received_at, tier, categories, outcome)
  SELECT %(channel)s, %(msg)s, %(author)s, %(sent_at)s, now(), 0, '{{}}', %(queued)s FROM gate
  WHERE gate.state = %(active)s AND NOT gate.left_channel AND NOT gate.forgotten
  ON CONFLICT (channel_id, wire_msg_id) DO NOTHING RETURNING id
)
SELECT gate.state, gate.epoch, gate.left_channel, gate.forgotten, EXISTS (SELECT 1 FROM receipt) FROM gate"""


@contextmanager
def admit_message(channel_id: str, wire_msg_id: str, *, author_id: str, sent_at: datetime) -> Iterator[tuple[str, int]]:
    """Admit one message: yields (outcome, epoch) with outcome unknown | dropped | forgotten | duplicate | admitted.

    Holds a share lock on the channel row until the block ends, so a state change (an UPDATE)
    waits for admissions in flight and later ones see the new state: a secure-mode flush that
    runs after the change commits catches everything admitted before it. The receipt (no
    content) is the dedupe: a redelivered message is a `duplicate`. The block commits when it
    ends and rolls back when it raises (a failed publish leaves no receipt).

    Two round trips, this being the webhook's hot path: `BEGIN` and the admission statement travel
    in one simple query (Django's atomic() sends `BEGIN` on a round trip of its own), then `COMMIT`
    or `ROLLBACK`; nothing in the block may use the ORM, as this transaction is outside Django's
    bookkeeping. Inside a caller's transaction (a test's) it runs in a savepoint instead.
    """
    params = {
        "budget": str(int(settings.JEEVES.backend_timeout_s * 1000)),
        "msg": wire_msg_id,
        "channel": channel_id,
        "author": author_id,
        "sent_at": sent_at,
        "queued": MessageReceipt.Outcome.QUEUED,
        "active": ChannelState.ACTIVE,
    }
    if connection.in_atomic_block:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_ADMIT, params)
            yield _admission(cursor.fetchone())
        return
    with connection.cursor() as cursor:
        try:
            # Simple query protocol (Django's client-side binding cursor): several statements, one round trip.
            cursor.execute("BEGIN; " + _ADMIT, params)
            cursor.nextset()  # past BEGIN's empty result
            yield _admission(cursor.fetchone())
        except BaseException:
            if cursor.connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                with suppress(DatabaseError):  # the error being raised is the one to report
                    cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")


def _admission(row: tuple | None) -> tuple[str, int]:
    if row is None:
        return "unknown", 0
    state, epoch, left, forgotten, written = row
    if state != ChannelState.ACTIVE or left:
        return "dropped", epoch
    if forgotten:
        return "forgotten", epoch
    return ("admitted" if written else "duplicate"), epoch


# Sent once a state change (or a request for the state the channel is already in) has committed:
# `channel_id`, `transition`. The bridge answers secure with a flush of what Redis holds of the
# channel (wire_bridge/state.py); knowledge cannot reach Redis's key families itself.
state_changed = Signal()


def set_state(channel_id: str, state: ChannelState, *, by: str) -> Transition:
    """Move the channel to `state`, recording who and when: the one door for every state change
    (commands, buttons, the admin).

    Entering secure bumps `epoch` (workers drop tasks of the old epoch) and opens a
    `secure_ranges` entry; leaving secure closes it. Secure is not downgraded to paused.
    Then `state_changed` is sent (on secure: the window and pending text are flushed).
    """
    transition = _transition(channel_id, state, by=by)
    state_changed.send(sender=ChannelConfig, channel_id=channel_id, transition=transition)
    return transition


def _transition(channel_id: str, state: ChannelState, *, by: str) -> Transition:
    now = timezone.now()
    with transaction.atomic():
        channel = ChannelConfig.objects.select_for_update().get(channel_id=channel_id)
        previous = channel.state
        target = state
        if previous == ChannelState.SECURE and state == ChannelState.PAUSED:
            target = ChannelState.SECURE
        if previous == target:
            return Transition(previous=previous, current=previous, epoch=channel.epoch)
        ranges = list(channel.secure_ranges or [])
        if target == ChannelState.SECURE:
            channel.epoch += 1
            ranges.append({"start": now.isoformat(), "end": None})
        elif previous == ChannelState.SECURE:
            for entry in ranges:
                if entry.get("end") is None:
                    entry["end"] = now.isoformat()
        channel.state = target
        channel.state_changed_at = now
        channel.state_changed_by = by
        channel.secure_ranges = ranges
        channel.save(update_fields=["state", "state_changed_at", "state_changed_by", "epoch", "secure_ranges"])
    logger.info("channel state: channel=%s %s -> %s epoch=%s", channel_id, previous, target, channel.epoch)
    return Transition(previous=previous, current=target, epoch=channel.epoch)


def set_context(channel_id: str, field: str, value: str | list[str], *, by: str) -> None:
    """Set one context field (purpose, context_type, tags, stakeholders, related_channels)."""
    if field not in CONTEXT_FIELDS:
        raise ValueError(f"not a context field: {field}")
    value = bounded_context(field, value)
    ChannelConfig.objects.filter(channel_id=channel_id).update(
        **{field: value}, context_updated_at=timezone.now(), context_updated_by=by
    )


def bounded_context(field: str, value: str | list[str]) -> str | list[str]:
    """A context value as stored: the purpose at most PURPOSE_MAX_CHARS, lists at most LIST_MAX_ITEMS
    entries of at most TAG_MAX_CHARS (stakeholder ids: 256), one line each."""
    if isinstance(value, str):
        return " ".join(value.split())[:PURPOSE_MAX_CHARS]
    width = 256 if field == "stakeholders" else TAG_MAX_CHARS
    return [" ".join(v.split())[:width] for v in value if v.strip()][:LIST_MAX_ITEMS]


def members_joined(channel_id: str) -> bool:
    """Wire says people joined: whatever the conversation was, it is a group from now on (a 1:1 never
    gains members; if one seems to, the safe reading is a group). True when the type changed."""
    changed = (
        ChannelConfig.objects.filter(channel_id=channel_id)
        .exclude(conversation_type=ConversationType.GROUP)
        .update(conversation_type=ConversationType.GROUP)
    )
    if changed:
        logger.info("channel is a group: channel=%s (members joined)", channel_id)
    return bool(changed)


def settle_conversation_type(channel_id: str, human_members: int) -> None:
    """Roman's conversation data (its member list) decides a type Wire did not name: one human is a 1:1.
    Only an unknown type is settled, so a join reported meanwhile (already a group) is never undone."""
    settled = ConversationType.ONE_TO_ONE if human_members == 1 else ConversationType.GROUP
    ChannelConfig.objects.filter(channel_id=channel_id, conversation_type=ConversationType.UNKNOWN).update(
        conversation_type=settled
    )


def mark_left(channel_id: str, when: datetime | None = None) -> bool:
    """Jeeves was removed (or the conversation deleted): stop processing. True when it was not marked yet."""
    updated = ChannelConfig.objects.filter(channel_id=channel_id, left_at__isnull=True).update(
        left_at=when or timezone.now()
    )
    if updated:
        logger.info("channel left: channel=%s", channel_id)
    return bool(updated)


def get_channel(channel_id: str) -> ChannelConfig | None:
    return ChannelConfig.objects.filter(channel_id=channel_id).first()


# --------------------------------------------------------------------------- Roman bots


def store_roman_bot(bot_id: str, channel_id: str | None, token_ciphertext: str) -> None:
    """Keep a Roman bot's lifelong token (already encrypted by the caller)."""
    defaults: dict[str, object] = {"token_ciphertext": token_ciphertext, "removed_at": None}
    if channel_id is not None:
        defaults["channel_id"] = channel_id
    RomanBot.objects.update_or_create(bot_id=bot_id, defaults=defaults)


def roman_bot(bot_id: str) -> RomanBot | None:
    return RomanBot.objects.filter(bot_id=bot_id).first()


def roman_bot_for_channel(channel_id: str) -> RomanBot | None:
    return RomanBot.objects.filter(channel_id=channel_id, removed_at__isnull=True).order_by("-created_at").first()


def remove_roman_bot(bot_id: str) -> str | None:
    """Mark the bot removed; returns its channel id."""
    bot = roman_bot(bot_id)
    if bot is None:
        return None
    RomanBot.objects.filter(bot_id=bot_id).update(removed_at=timezone.now())
    return bot.channel_id


def roman_tokens() -> list[tuple[str, str]]:
    """(bot id, token ciphertext) of every Roman bot, for re-encryption under a new key."""
    return list(RomanBot.objects.order_by("bot_id").values_list("bot_id", "token_ciphertext"))


def replace_roman_token(bot_id: str, old_ciphertext: str, new_ciphertext: str) -> bool:
    """Swap the ciphertext unless it changed meanwhile (a bot re-added with a new token wins)."""
    return bool(
        RomanBot.objects.filter(bot_id=bot_id, token_ciphertext=old_ciphertext).update(token_ciphertext=new_ciphertext)
    )
