"""Knowledge-reading commands: decisions, actions (mine), status, catch me up, a question. (The commands that
write, done ACT-n and supersede, are tested with the bridge's command table: tests/wire_bridge/test_dispatch.py.)"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from knowledge.models import MessageReceipt
from retrieval import commands
from retrieval.pack import approx_date
from tests.retrieval import factory as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def channel():
    return f.release_channel()


def test_decisions_lists_recent_active_with_ids(channel):
    c = channel
    reply = commands.list_decisions(c["ch"].channel_id, c["alice"])
    assert reply.index(c["d2"].friendly_id) < reply.index(c["d1"].friendly_id)
    assert c["old"].friendly_id not in reply and "another channel" not in reply
    assert "!" not in reply


def test_actions_and_actions_mine(channel):
    c = channel
    everyone = commands.list_actions(c["ch"].channel_id, c["bob"], mine=False)
    assert c["a1"].friendly_id in everyone and c["a2"].friendly_id in everyone
    assert "Old chore" not in everyone and "Another channel" not in everyone
    assert "due " in everyone
    mine = commands.list_actions(c["ch"].channel_id, c["alice"], mine=True)
    assert c["a1"].friendly_id in mine and c["a2"].friendly_id not in mine


def test_status(channel):
    c = channel
    f.summary(c["ch"], "A day of releases", start_days_ago=2, end_days_ago=1)
    reply = commands.channel_status(c["ch"].channel_id, c["alice"])
    assert "attending" in reply and "2 decisions in force" in reply and "2 open actions" in reply
    assert "last summary" in reply


def test_question_path(channel):
    c = channel
    reply = commands.answer_question(c["ch"].channel_id, c["alice"], "Who is submitting 4.12 to the App Store?")
    assert c["a1"].friendly_id in reply and "Alice" in reply


# --------------------------------------------------------------------------- catch me up


def _spoke(ch, user: str, msg: str, at) -> None:
    MessageReceipt.objects.create(channel_id=ch.channel_id, wire_msg_id=msg, author_id=user, sent_at=at)


def test_catch_me_up_starts_at_the_askers_last_message_before_the_command():
    alice, bob = f.user(), f.user()
    ch = f.channel(name="launch")
    _spoke(ch, alice, "a1", f.NOW - timedelta(days=7))  # back after a week
    # The command's own receipt (written at ingest) is her latest message: the period must not start there.
    _spoke(ch, alice, "cmd", timezone.now())
    _spoke(ch, bob, "b1", f.NOW - timedelta(hours=1))
    week_old = f.decision(ch, "The launch moves to the Tuesday", days_ago=6)
    older = f.decision(ch, "The launch is on a Monday", days_ago=8)
    task = f.action(ch, "Bob to brief the press", owner=bob, owner_name="Bob")

    reply = commands.catch_me_up(ch.channel_id, alice, "cmd")

    assert reply.startswith(f"Since {approx_date(f.NOW - timedelta(days=7))}, if I may:")
    assert week_old.friendly_id in reply and task.friendly_id in reply and "(Bob)" in reply
    assert older.friendly_id not in reply


def test_catch_me_up_says_which_actions_are_done():
    ch = f.channel()
    alice, bob = f.user(), f.user()
    shipped = f.action(ch, "Bob to crate the spare monitors", owner=bob, owner_name="Bob", status="done", days_ago=0.2)
    waiting = f.action(ch, "Bob to label the crates", owner=bob, owner_name="Bob", days_ago=0.1)

    reply = commands.catch_me_up(ch.channel_id, alice, "cmd")

    assert f"- Done, {shipped.friendly_id} (Bob): Bob to crate the spare monitors" in reply
    assert f"- To do, {waiting.friendly_id} (Bob): Bob to label the crates" in reply


def test_catch_me_up_for_someone_who_never_spoke_covers_the_last_day():
    ch = f.channel()
    recent = f.decision(ch, "Stand-ups move to 9:30", days_ago=0.5)
    stale = f.decision(ch, "Stand-ups are at 9:00", days_ago=2)

    reply = commands.catch_me_up(ch.channel_id, f.user(), "cmd")

    assert recent.friendly_id in reply and stale.friendly_id not in reply


def test_catch_me_up_in_a_quiet_channel():
    ch = f.channel()
    alice = f.user()
    _spoke(ch, alice, "a1", f.NOW - timedelta(days=3))
    f.decision(ch, "Something decided before she last spoke", days_ago=4)

    reply = commands.catch_me_up(ch.channel_id, alice, "cmd")

    assert reply == f"I'm afraid nothing of note has been recorded since {approx_date(f.NOW - timedelta(days=3))}."


def test_lists_speak_the_channel_s_days_not_utc_s():
    """A deadline at the end of a Tuesday in Chicago is already Wednesday in UTC: the list says Tuesday's date."""
    alice = f.user()
    ch = f.channel(name="field-ops")
    ch.timezone = "America/Chicago"
    ch.save(update_fields=["timezone"])
    end_of_tuesday = timezone.datetime(2026, 4, 7, 23, 59, tzinfo=timezone.get_fixed_timezone(-5 * 60))
    f.action(ch, "Recalibrate the pressure gauges", owner=alice, owner_name="Alice", deadline=end_of_tuesday)
    reply = commands.list_actions(ch.channel_id, alice, mine=True)
    assert "due the 7th of April" in reply and "8th of April" not in reply


def test_an_action_s_own_full_stop_does_not_run_into_its_due_date():
    alice = f.user()
    ch = f.channel(name="field-ops")
    f.action(ch, "Order spare fuses for the van.", owner=alice, owner_name="Alice", deadline=f.NOW + timedelta(days=2))
    reply = commands.list_actions(ch.channel_id, alice, mine=True)
    assert "Order spare fuses for the van, due the" in reply and ".," not in reply
