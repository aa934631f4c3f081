"""knowledge/proactive.py on real Postgres: which stale actions a nudge claims (once a day, active channels
only, most overdue first), channel summaries written once per period and guarded, and whose Monday digest
is due in their own timezone."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from knowledge import proactive, records, sources
from knowledge.models import Action, ActionStatus, ChannelConfig, ChannelState, ConversationType, Summary

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 5, 20, 14, 0, tzinfo=UTC)
ORG = "lighthouse.example"


def _channel(channel_id: str, **fields) -> ChannelConfig:
    return ChannelConfig.objects.create(channel_id=f"{channel_id}@{ORG}", organisation_id=ORG, **fields)


def _action(channel: ChannelConfig, key: str, *, overdue_h: float | None, deadline_h: float | None = None) -> Action:
    action = records.record_action(
        channel,
        records.ActionDraft(
            description=f"Yusuf to check the fog signal log ({key}).",
            owner_id=f"u-yusuf@{ORG}",
            owner_name="Yusuf",
            deadline=NOW - timedelta(hours=deadline_h) if deadline_h is not None else None,
            status=ActionStatus.OPEN,
            confidence=0.8,
        ),
        source=sources.source_ref([(f"{key}-m", NOW - timedelta(days=9))]),
        sources_text=[],
        key=key,
    ).record
    staleness = NOW - timedelta(hours=overdue_h) if overdue_h is not None else None
    Action.objects.filter(pk=action.pk).update(staleness_at=staleness)
    return action


def _claimed(at: datetime, **kwargs) -> list[str]:
    return [a.source_key for a in proactive.claim_stale_actions(at, **kwargs)]


def test_stale_actions_are_claimed_most_overdue_first_once_a_day_in_active_channels_only():
    active, paused, left = _channel("a1"), _channel("p1", state=ChannelState.PAUSED), _channel("l1", left_at=NOW)
    _action(active, "two-days", overdue_h=48)
    _action(active, "one-hour", overdue_h=1)
    _action(active, "by-deadline", overdue_h=None, deadline_h=5)  # no staleness_at: the deadline counts
    _action(active, "not-yet", overdue_h=-48)
    done = _action(active, "done", overdue_h=30)
    Action.objects.filter(pk=done.pk).update(status=ActionStatus.DONE)
    _action(paused, "paused", overdue_h=40)
    _action(left, "left", overdue_h=40)

    assert _claimed(NOW, limit=2) == ["two-days", "by-deadline"]
    assert Action.objects.get(source_key="two-days").last_status_check == NOW
    assert _claimed(NOW) == ["one-hour"]  # the rest; the first two were stamped
    assert _claimed(NOW + timedelta(hours=12)) == []  # asked today already
    # The same beat slot a day later may fire a little early and still asks again.
    assert _claimed(NOW + timedelta(hours=23, minutes=55)) == ["two-days", "by-deadline", "one-hour"]


def _summary(channel: ChannelConfig, text: str, start: datetime) -> proactive.SummaryFields:
    return proactive.SummaryFields(
        channel=channel,
        granularity="daily",
        period_start=start,
        period_end=start + timedelta(days=1),
        summary=text,
        sentiment="neutral",
        message_count=12,
        model_version="local",
        participants=[f"u-yusuf@{ORG}", f"u-mara@{ORG}", f"u-yusuf@{ORG}"],
    )


def test_a_summary_is_written_once_per_period_with_its_layout_and_no_opaque_tokens():
    channel = _channel("s1")
    day = datetime(2026, 5, 19, tzinfo=UTC)
    text = "Keepers agreed on a new watch rota.\n\n- Lamp room key a1b2c3d4e5f6a7b8 is with Mara\n- Oil delivery due"
    assert not proactive.summary_exists(channel.channel_id, "daily", day)
    written = proactive.record_summary(_summary(channel, text, day))
    assert written.summary == "Keepers agreed on a new watch rota.\n- Lamp room key is with Mara\n- Oil delivery due"
    assert written.participants == [f"u-yusuf@{ORG}", f"u-mara@{ORG}"]
    assert proactive.summary_exists(channel.channel_id, "daily", day)
    assert proactive.record_summary(_summary(channel, "A rerun of the same day.", day)) is None
    assert proactive.record_summary(_summary(channel, "The next day.", day + timedelta(days=1))) is not None
    assert Summary.objects.filter(scope_id=channel.channel_id).count() == 2


def _one_to_one(name: str, tz: str) -> ChannelConfig:
    return _channel(name, conversation_type=ConversationType.ONE_TO_ONE, timezone=tz)


def test_a_digest_is_due_at_monday_eight_in_the_conversations_own_timezone_and_sent_once():
    lisbon, tokyo = _one_to_one("d-lis", "Europe/Lisbon"), _one_to_one("d-tyo", "Asia/Tokyo")
    nowhere = _one_to_one("d-bad", "Mars/Olympus_Mons")  # an unknown zone reads as UTC
    quiet, off = _one_to_one("d-quiet", "UTC"), _one_to_one("d-off", "UTC")
    for channel in (lisbon, tokyo, nowhere, quiet, off):
        proactive.set_digest(channel, f"u-{channel.channel_id[:5]}@{ORG}", True)
    proactive.set_digest(off, f"u-{off.channel_id[:5]}@{ORG}", False)
    ChannelConfig.objects.filter(pk=quiet.pk).update(state=ChannelState.SECURE)

    def due(at: datetime) -> list[tuple[str, date]]:
        return sorted((s.channel_id, day) for s, day in proactive.claim_due_digests(at))

    monday = date(2026, 5, 25)
    assert due(datetime(2026, 5, 24, 23, 30, tzinfo=UTC)) == [(tokyo.channel_id, monday)]  # 08:30 in Tokyo
    assert due(datetime(2026, 5, 25, 7, 10, tzinfo=UTC)) == [(lisbon.channel_id, monday)]  # 08:10 in Lisbon
    assert due(datetime(2026, 5, 25, 7, 50, tzinfo=UTC)) == []  # Lisbon's Monday is stamped
    assert due(datetime(2026, 5, 25, 8, 5, tzinfo=UTC)) == [(nowhere.channel_id, monday)]
    assert due(datetime(2026, 6, 1, 7, 5, tzinfo=UTC)) == [(lisbon.channel_id, date(2026, 6, 1))]
