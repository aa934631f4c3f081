"""The personal digest: what `my week` lists (overdue first) in a 1:1 and in a group channel, the Monday 08:00
note for subscribers under a frozen clock (once per Monday, only in a 1:1 that is still one, never while
paused), and `digest on/off`. Its scope is also in the leak property test (tests/retrieval/test_leak.py)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from knowledge import channels, proactive
from knowledge.models import ChannelConfig, ChannelState, DigestSubscription
from pipeline import claimcheck
from retrieval import digest
from retrieval.scope import RetrievalScope
from tests.retrieval import factory as f
from wire_bridge import replies, respond
from wire_bridge.commands import Command, Kind, parse

pytestmark = pytest.mark.django_db

MONDAY_8 = datetime(2025, 3, 10, 2, 40, tzinfo=UTC)  # Monday 10 March 2025, 08:10 in Kolkata (no DST)


@pytest.fixture
def world():
    alice, bob = f.user(), f.user()
    billing, design = f.channel(name="billing"), f.channel(name="design")
    other_org = f.channel(org="northwind.example", name="elsewhere")
    one_to_one = f.channel(personal=True, name=None)
    now = f.NOW
    overdue = f.action(billing, "Alice to renew the staging certificate", owner=alice, deadline=now - timedelta(days=2))
    later = f.action(design, "Alice to draft the icon brief", owner=alice, deadline=now + timedelta(days=3))
    soon = f.action(billing, "Alice to book the review", owner=alice, deadline=now + timedelta(days=1))
    undated = f.action(design, "Alice to tidy the colour tokens", owner=alice)
    f.action(billing, "Alice to ship the old thing", owner=alice, status="done", deadline=now - timedelta(days=9))
    f.action(billing, "Bob to update the runbook", owner=bob, deadline=now - timedelta(days=1))
    f.action(other_org, "Someone else's chore", owner=alice.replace("wire.example", "northwind.example"))
    named = f.decision(design, "Icons use a two-pixel stroke", by=[alice, bob], days_ago=2)
    f.decision(design, "Buttons are rounded", by=[bob], days_ago=1)
    f.decision(billing, "Retries stay at three", by=[alice], days_ago=20)
    return locals()


def test_my_week_in_a_1to1_lists_the_askers_open_actions_overdue_first_across_channels(world):
    w = world
    scope = RetrievalScope.for_asker(w["one_to_one"].channel_id, w["alice"])

    found = digest.build(scope, f.NOW)

    order = [w[k].friendly_id for k in ("overdue", "soon", "later", "undated")]
    assert found.actions == [str(w[k].id) for k in ("overdue", "soon", "later", "undated")]
    assert found.decisions == [str(w["named"].id)]
    text = found.text
    assert [text.index(fid) for fid in order] == sorted(text.index(fid) for fid in order)
    assert text.startswith("Your week, if I may, as of ")
    assert "Overdue:\n- " + order[0] + " (billing, was due " in text
    assert "Coming up:" in text and "(design, due " in text and "Without a deadline:" in text
    assert "Decisions of the past week that name you:\n- " + w["named"].friendly_id + " (design, " in text
    for absent in ("ship the old thing", "runbook", "Someone else", "rounded", "Retries stay"):
        assert absent not in text
    assert "!" not in text


def test_my_week_in_a_group_channel_is_that_channels_only(world):
    w = world
    found = digest.build(RetrievalScope.for_asker(w["billing"].channel_id, w["alice"]), f.NOW)

    assert found.actions == [str(w["overdue"].id), str(w["soon"].id)]
    assert found.decisions == []
    assert "(was due " in found.text and "billing," not in found.text


def test_with_nothing_on_record_the_digest_says_so(world):
    nobody = f.user()
    found = digest.build(RetrievalScope.for_asker(world["one_to_one"].channel_id, nobody), f.NOW)
    assert found.text.startswith("I have nothing on record for you this week, I'm pleased to say")
    assert found.actions == found.decisions == []


def test_the_commands_parse():
    assert parse("my week").kind == Kind.MY_WEEK
    assert parse("Digest on please").kind == Kind.DIGEST_ON
    assert parse("digest off.").kind == Kind.DIGEST_OFF


def test_digest_on_and_off_only_in_a_1to1(world):
    w = world
    alice, personal, group = w["alice"], w["one_to_one"].channel_id, w["billing"].channel_id

    refused = respond.build_reply(group, alice, "c1", Command(Kind.DIGEST_ON), [])
    on = respond.build_reply(personal, alice, "c2", Command(Kind.DIGEST_ON), [])
    subscription = DigestSubscription.objects.get(user_id=alice)
    off = respond.build_reply(personal, alice, "c3", Command(Kind.DIGEST_OFF), [])
    week = respond.build_reply(personal, alice, "c4", Command(Kind.MY_WEEK), [])

    assert refused.text == replies.DIGEST_PRIVATE_ONLY
    assert on.text == replies.DIGEST_ON and subscription.channel_id == personal and subscription.enabled
    assert off.text == replies.DIGEST_OFF and not DigestSubscription.objects.get(user_id=alice).enabled
    assert week.text.startswith("Your week, if I may") and w["overdue"].friendly_id in week.text


def _sent(redis_client, channel_id: str) -> list[str]:
    """Texts of the digests queued for `channel_id` (send_message tasks on the respond queue)."""
    texts = []
    for raw in redis_client.lrange("respond", 0, -1):
        envelope = json.loads(raw)
        _, kwargs, _ = json.loads(base64.b64decode(envelope["body"]))
        if kwargs.get("channel_id") == channel_id and kwargs["message_ref"].startswith("digest:"):
            texts.append(redis_client.get(claimcheck.key_for(channel_id, kwargs["message_ref"])))
    return texts


def test_subscribers_get_the_monday_8am_note_once_in_their_1to1(world, redis_client):
    w = world
    personal = w["one_to_one"]
    personal.timezone = "Asia/Kolkata"
    personal.save(update_fields=["timezone"])
    proactive.set_digest(personal, w["alice"], True)
    quiet = f.channel(personal=True)
    proactive.set_digest(quiet, w["bob"], False)
    redis_client.delete("respond")

    def sent_at(moment: datetime) -> int:
        with time_machine.travel(moment, tick=False):
            return digest.send_due()

    assert sent_at(MONDAY_8 - timedelta(hours=1)) == 0  # 07:10
    assert sent_at(MONDAY_8) == 1
    assert sent_at(MONDAY_8 + timedelta(minutes=30)) == 0  # once per Monday
    assert sent_at(MONDAY_8 + timedelta(days=1)) == 0  # Tuesday 08:10
    [text] = _sent(redis_client, personal.channel_id)
    assert text.startswith("Your week, if I may, as of the 10th of March:")
    channels.set_state(personal.channel_id, ChannelState.PAUSED, by=w["alice"])
    assert sent_at(MONDAY_8 + timedelta(days=7)) == 0  # paused means paused
    channels.set_state(personal.channel_id, ChannelState.ACTIVE, by=w["alice"])
    channels.members_joined(personal.channel_id)  # a group now: a personal note no longer belongs here
    assert sent_at(MONDAY_8 + timedelta(days=14)) == 0
    ChannelConfig.objects.filter(channel_id=personal.channel_id).update(conversation_type="ONE_TO_ONE")
    assert sent_at(MONDAY_8 + timedelta(days=21)) == 1
    redis_client.delete("respond")
