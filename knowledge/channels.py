"""Channel services: the consent state machine, context, membership flags and Roman bots (`channel_config`).

Every write to `channel_config` / `roman_bots` goes through here; the bridge decides when.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from knowledge import gate
from knowledge.models import ChannelConfig, ChannelState, ConversationType, RomanBot

logger = logging.getLogger(__name__)


def channel_zone(name: str | None) -> ZoneInfo:
    """A channel's timezone (IANA name, as Wire's app_added gave it); UTC when unknown."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        logger.warning("unknown channel timezone %r; using UTC", name)
        return ZoneInfo("UTC")


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
    if created:
        gate.forget(channel_id)  # a purged channel's id back: whatever its gate said is gone with its row
    if rejoin and not created:
        fields = {k: v for k, v in defaults.items() if k != "organisation_id"}
        rejoined = channel.left_at is not None
        if rejoined:
            fields.update(left_at=None, joined_at=timezone.now())
        with transaction.atomic():
            ChannelConfig.objects.filter(channel_id=channel_id).update(**fields)
            if rejoined:
                gate.forget(channel_id)  # under the row's lock, before the commit (knowledge/gate.py)
        channel.refresh_from_db()
    return channel


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
        # Under the row's lock, before the commit: from now on the webhook admits in Postgres, which waits for
        # this change and reads it (knowledge/gate.py).
        gate.forget(channel_id)
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
    with transaction.atomic():
        updated = ChannelConfig.objects.filter(channel_id=channel_id, left_at__isnull=True).update(
            left_at=when or timezone.now()
        )
        if updated:
            gate.forget(channel_id)  # under the row's lock, before the commit (knowledge/gate.py)
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


def channel_accepts(channel_id: str, epoch: int) -> bool:
    """Consent check for workers: the channel is still active and still in the epoch the task was queued in."""
    return ChannelConfig.objects.active().filter(channel_id=channel_id, epoch=epoch).exists()
