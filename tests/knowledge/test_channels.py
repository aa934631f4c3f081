"""knowledge/channels.py on real Postgres: the channel row, the consent state machine (epochs, secure ranges),
context bounds, conversation type, leaving, Roman bots and the workers' consent check."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from knowledge import channels
from knowledge.models import ChannelConfig, ChannelState, ConversationType, RomanBot

pytestmark = pytest.mark.django_db

ORG = "harbour.example"
CH = f"7b1e0c52-quay@{ORG}"


@pytest.fixture
def channel() -> ChannelConfig:
    return channels.ensure_channel(CH, organisation_id=ORG, transport="sidecar", name="dock-ops")


@pytest.fixture
def sent():
    """What `state_changed` announced, in order."""
    seen: list[tuple[str, channels.Transition]] = []

    def receive(sender, channel_id, transition, **kwargs):
        seen.append((channel_id, transition))

    channels.state_changed.connect(receive, weak=False)
    yield seen
    channels.state_changed.disconnect(receive)


def test_a_channel_is_made_once_and_a_rejoin_refreshes_it(channel):
    again = channels.ensure_channel(CH, organisation_id="other.example", transport="roman", name="renamed")
    assert (again.channel_name, again.transport, again.organisation_id) == ("dock-ops", "sidecar", ORG)

    channels.mark_left(CH)
    left = channels.get_channel(CH)
    assert left.left_at is not None
    back = channels.ensure_channel(
        CH,
        organisation_id="other.example",
        transport="roman",
        name="dock-ops-2",
        conversation_type=ConversationType.GROUP,
        tz="Europe/Lisbon",
        rejoin=True,
    )
    assert back.left_at is None and back.joined_at > left.joined_at
    assert (back.channel_name, back.transport, back.timezone) == ("dock-ops-2", "roman", "Europe/Lisbon")
    assert back.conversation_type == ConversationType.GROUP
    assert back.organisation_id == ORG  # a conversation never moves to another organisation
    assert channels.get_channel("nowhere@nowhere.example") is None


def test_pause_secure_and_back_bump_the_epoch_once_and_record_the_secure_range(channel, sent):
    paused = channels.set_state(CH, ChannelState.PAUSED, by="u-rosa")
    assert (paused.previous, paused.current, paused.epoch, paused.changed) == ("active", "paused", 0, True)

    secure = channels.set_state(CH, ChannelState.SECURE, by="u-rosa")
    assert (secure.current, secure.epoch) == ("secure", 1)
    row = channels.get_channel(CH)
    assert row.state_changed_by == "u-rosa" and row.state_changed_at is not None
    [opened] = row.secure_ranges
    assert opened["start"] and opened["end"] is None

    # Secure is not downgraded to paused, and asking for the state it is in changes nothing.
    for asked in (ChannelState.PAUSED, ChannelState.SECURE):
        same = channels.set_state(CH, asked, by="u-tomas")
        assert (same.current, same.epoch, same.changed) == ("secure", 1, False)
    assert channels.get_channel(CH).state_changed_by == "u-rosa"

    active = channels.set_state(CH, ChannelState.ACTIVE, by="u-tomas")
    assert (active.previous, active.current, active.epoch) == ("secure", "active", 1)
    [closed] = channels.get_channel(CH).secure_ranges
    assert closed["start"] == opened["start"] and closed["end"] >= closed["start"]

    # Every request is announced, the ones that changed nothing too (the bridge answers each).
    assert [(cid, t.current, t.changed) for cid, t in sent] == [
        (CH, "paused", True),
        (CH, "secure", True),
        (CH, "secure", False),
        (CH, "secure", False),
        (CH, "active", True),
    ]


def test_workers_accept_tasks_only_of_an_active_channel_in_the_current_epoch(channel):
    assert channels.channel_accepts(CH, 0)
    channels.set_state(CH, ChannelState.SECURE, by="u-rosa")
    channels.set_state(CH, ChannelState.ACTIVE, by="u-rosa")
    assert not channels.channel_accepts(CH, 0)  # queued before secure
    assert channels.channel_accepts(CH, 1)
    channels.set_state(CH, ChannelState.PAUSED, by="u-rosa")
    assert not channels.channel_accepts(CH, 1)
    channels.set_state(CH, ChannelState.ACTIVE, by="u-rosa")
    assert channels.mark_left(CH, timezone.now() - timedelta(minutes=1))
    assert not channels.mark_left(CH)  # once
    assert not channels.channel_accepts(CH, 1)
    assert not channels.channel_accepts("nowhere@nowhere.example", 0)


def test_context_is_stored_bounded_and_on_one_line(channel):
    channels.set_context(CH, "purpose", "  berth\tplanning\n\nfor the " + "north quay " * 80, by="u-ines")
    channels.set_context(CH, "tags", ["  cranes  ", "", "x" * 90, *[f"t{n}" for n in range(30)]], by="u-ines")
    channels.set_context(CH, "stakeholders", ["s" * 300], by="u-ines")
    row = channels.get_channel(CH)
    assert row.purpose.startswith("berth planning for the north quay north quay")
    assert len(row.purpose) == channels.PURPOSE_MAX_CHARS and "\n" not in row.purpose
    assert row.tags[:2] == ["cranes", "x" * channels.TAG_MAX_CHARS]
    assert len(row.tags) == channels.LIST_MAX_ITEMS
    assert row.stakeholders == ["s" * 256]
    assert (row.context_updated_by, row.context_updated_at is not None) == ("u-ines", True)
    with pytest.raises(ValueError, match="not a context field"):
        channels.set_context(CH, "state", "active", by="u-ines")


def test_a_join_makes_a_group_and_roman_settles_only_an_unknown_type(channel):
    channels.settle_conversation_type(CH, human_members=1)
    assert channels.get_channel(CH).conversation_type == ConversationType.ONE_TO_ONE
    assert channels.members_joined(CH) is True
    assert channels.members_joined(CH) is False  # already a group
    channels.settle_conversation_type(CH, human_members=1)  # Roman's late member list does not undo the join
    assert channels.get_channel(CH).conversation_type == ConversationType.GROUP

    other = channels.ensure_channel(f"c-2@{ORG}", organisation_id=ORG, transport="roman")
    channels.settle_conversation_type(other.channel_id, human_members=4)
    assert channels.get_channel(other.channel_id).conversation_type == ConversationType.GROUP


def test_roman_bots_are_kept_removed_and_their_tokens_swapped_only_when_unchanged(channel):
    channels.store_roman_bot("bot-b", CH, "cipher-b1")
    channels.store_roman_bot("bot-a", None, "cipher-a1")
    assert channels.roman_bot_for_channel(CH).bot_id == "bot-b"
    assert channels.roman_tokens() == [("bot-a", "cipher-a1"), ("bot-b", "cipher-b1")]

    assert channels.replace_roman_token("bot-b", "cipher-b1", "cipher-b2") is True
    assert channels.replace_roman_token("bot-b", "cipher-b1", "cipher-b3") is False  # changed meanwhile
    assert channels.roman_bot("bot-b").token_ciphertext == "cipher-b2"

    assert channels.remove_roman_bot("bot-b") == CH
    assert channels.roman_bot_for_channel(CH) is None
    assert channels.remove_roman_bot("bot-never") is None
    channels.store_roman_bot("bot-b", None, "cipher-b4")  # re-added: live again, channel kept
    bot = RomanBot.objects.get(bot_id="bot-b")
    assert (bot.removed_at, bot.channel_id, bot.token_ciphertext) == (None, CH, "cipher-b4")
