"""Staleness nudges: which actions are asked about, once a day, worded as docs/architecture.md §8 says, with
three buttons, and the answers to those buttons; then one pass through a real worker posting to a fake sidecar."""

from __future__ import annotations

import uuid
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
import redis
from django.utils import timezone

from knowledge.models import Action, ChannelConfig, ChannelState
from pipeline import staleness
from tests.conftest import WorkerProcess, service_env, wait_for
from tests.fakes.wire import FakeSidecar
from tests.wire_bridge.conftest import WIRE_SECRET, isolated_redis  # noqa: F401 - a fixture
from wire_bridge import replies, respond

LONDON = ZoneInfo("Europe/London")
NOW = datetime(2025, 3, 11, 10, 0, tzinfo=LONDON)  # a Tuesday
FRIDAY_EOD = datetime(2025, 3, 7, 23, 59, 59, tzinfo=LONDON)  # how extraction stores "by Friday"
USER = f"{uuid.uuid4()}@wire.example"


def _channel(state: str = ChannelState.ACTIVE, tz: str = "Europe/London", **kw) -> ChannelConfig:
    return ChannelConfig.objects.create(
        channel_id=f"{uuid.uuid4()}@wire.example", organisation_id="wire.example", state=state, timezone=tz, **kw
    )


def _action(ch: ChannelConfig, fid: str, description: str, *, owner: str | None = "Tom", **kw) -> Action:
    kw.setdefault("staleness_at", kw.get("deadline"))  # as knowledge.records.record_action sets it
    return Action.objects.create(
        channel=ch,
        organisation_id=ch.organisation_id,
        friendly_id=fid,
        description=description,
        owner_name=owner,
        owner_id=USER if owner else None,
        source_ref={"wire_msg_ids": [f"m-{fid}"], "timestamp_range": {"start": None, "end": None}},
        source_key=f"k-{fid}",
        **kw,
    )


def _mine(nudges: list[staleness.Nudge], *channels: ChannelConfig) -> list[staleness.Nudge]:
    ids = {c.channel_id for c in channels}
    return [n for n in nudges if n.channel_id in ids]


@pytest.mark.django_db
def test_the_nudge_reads_as_documented_with_three_buttons():
    ch = _channel()
    _action(ch, "ACT-0004", "Tom to complete the API review by Friday.", deadline=FRIDAY_EOD)

    [nudge] = _mine(staleness.due_nudges(NOW), ch)

    assert nudge.text == (
        "If I may, Tom undertook to complete the API review (ACT-0004) by Friday. That was four days ago "
        "and I haven't noted any subsequent update. Shall I mark this as still in progress, or has it been resolved?"
    )
    assert nudge.buttons == (
        ("stale:ACT-0004:open", "Still in progress"),
        ("stale:ACT-0004:done", "Done"),
        ("stale:ACT-0004:cancel", "Cancel"),
    )


@pytest.mark.django_db
def test_the_nudge_without_an_owner_a_deadline_or_a_task_phrase():
    ch = _channel()
    _action(
        ch,
        "ACT-0001",
        "Someone to send the signed contract to ACME.",
        owner=None,
        created_at=NOW - timedelta(days=10),
        staleness_at=NOW - timedelta(days=3),
    )
    _action(ch, "ACT-0002", "Update the runbook", owner="Priya", deadline=datetime(2025, 2, 20, 23, 59, tzinfo=LONDON))
    _action(ch, "ACT-0003", "Tom reviews the billing schema", deadline=NOW - timedelta(days=1))

    texts = {n.friendly_id: n.text for n in _mine(staleness.due_nudges(NOW), ch)}

    assert texts["ACT-0001"].startswith(
        "If I may, it was agreed ten days ago that someone would send the signed contract to ACME (ACT-0001), "
        "though nobody was named to it. I haven't noted any subsequent update."
    )
    assert texts["ACT-0002"].startswith(
        "If I may, Priya undertook to update the runbook (ACT-0002) by 20 February. That was 19 days ago"
    )
    assert texts["ACT-0003"].startswith(
        "If I may, ACT-0003 (placed with Tom) was to be seen to by Monday: Tom reviews the billing schema."
    )
    assert all(t.endswith(staleness.QUESTION) and "!" not in t for t in texts.values())


@pytest.mark.django_db
def test_only_overdue_unchecked_open_actions_of_active_channels_are_asked_about_once_a_day():
    active = _channel()
    quiet = [
        _channel(state=ChannelState.PAUSED),
        _channel(state=ChannelState.SECURE),
        _channel(left_at=NOW - timedelta(days=1)),
    ]
    past = NOW - timedelta(days=2)
    _action(active, "ACT-0001", "Tom to draft the spec.", deadline=past)
    _action(active, "ACT-0002", "Tom to tidy the backlog.", staleness_at=NOW - timedelta(hours=1))
    _action(active, "ACT-0003", "Tom to book the room.", deadline=NOW + timedelta(days=1))
    _action(active, "ACT-0004", "Tom to ship it.", deadline=past, status="done")
    _action(active, "ACT-0005", "Tom to ask legal.", deadline=past, last_status_check=NOW - timedelta(hours=2))
    _action(active, "ACT-0006", "Tom to renew the cert.", deadline=NOW - timedelta(days=5), last_status_check=past)
    # Answered "still in progress" yesterday: the deadline has passed, but staleness_at moved on.
    _action(active, "ACT-0007", "Tom to migrate.", deadline=past, staleness_at=NOW + timedelta(days=6))
    for ch in quiet:
        _action(ch, "ACT-0001", "Tom to draft the spec.", deadline=past)

    first = _mine(staleness.due_nudges(NOW), active, *quiet)

    assert [(n.channel_id, n.friendly_id) for n in first] == [
        (active.channel_id, "ACT-0006"),  # most overdue first
        (active.channel_id, "ACT-0001"),
        (active.channel_id, "ACT-0002"),
    ]
    checked = Action.objects.filter(channel=active, last_status_check=NOW).values_list("friendly_id", flat=True)
    assert sorted(checked) == ["ACT-0001", "ACT-0002", "ACT-0006"]
    assert _mine(staleness.due_nudges(NOW + timedelta(hours=1)), active, *quiet) == []
    # ACT-0005 was last asked about two hours before the first pass: its day is up an hour before the others'.
    later = _mine(staleness.due_nudges(NOW + timedelta(hours=23)), active, *quiet)
    assert [n.friendly_id for n in later] == ["ACT-0005"]
    again = _mine(staleness.due_nudges(NOW + timedelta(days=1)), active, *quiet)
    assert sorted(n.friendly_id for n in again) == ["ACT-0001", "ACT-0002", "ACT-0006"]


@pytest.mark.django_db
def test_the_nudge_buttons_keep_an_action_open_cancel_it_or_mark_it_done():
    ch = _channel()
    for fid in ("ACT-0001", "ACT-0002", "ACT-0003"):
        _action(ch, fid, "Tom to draft the spec.", deadline=timezone.now() - timedelta(days=2))

    still = respond.button_reply(ch.channel_id, USER, "stale:ACT-0001:open", "")
    cancelled = respond.button_reply(ch.channel_id, USER, "stale:ACT-0002:cancel", "")
    done = respond.button_reply(ch.channel_id, USER, "stale:ACT-0003:done", "")
    unknown = respond.button_reply(ch.channel_id, USER, "stale:ACT-0099:cancel", "")
    after_done = respond.button_reply(ch.channel_id, USER, "stale:ACT-0003:open", "")

    assert still.text == replies.STALE_STILL_OPEN.format(value="ACT-0001")
    assert cancelled.text == replies.STALE_CANCELLED.format(value="ACT-0002")
    assert done.text.startswith("Very good. I have marked ACT-0003 as done")
    assert unknown.text == "I'm afraid I have no record of ACT-0099 in this channel."
    assert after_done.text == "I'm afraid I cannot do that: the action is already done."
    status = dict(Action.objects.filter(channel=ch).values_list("friendly_id", "status"))
    assert status == {"ACT-0001": "open", "ACT-0002": "cancelled", "ACT-0003": "done"}
    # "Still in progress" quiets the overdue action until JEEVES_STALENESS_DAYS have passed.
    assert _mine(staleness.due_nudges(timezone.now() + timedelta(days=3)), ch) == []
    [again] = _mine(staleness.due_nudges(timezone.now() + timedelta(days=8)), ch)
    assert again.friendly_id == "ACT-0001"


# --------------------------------------------------------------------------- through a real worker


@pytest.fixture(scope="module")
def sidecar():
    with FakeSidecar(WIRE_SECRET) as fake:
        yield fake


@pytest.fixture(scope="module")
def nudge_worker(django_db_setup, django_db_blocker, isolated_redis, sidecar):  # noqa: F811
    """A worker for summarise + respond on a broker of this module's own, posting to the fake sidecar."""
    env = service_env(
        isolated_redis,
        JEEVES_WIRE_SECRET=WIRE_SECRET,
        JEEVES_WIRE_SIDECAR_URL=sidecar.url,
        JEEVES_WIRE_DEFAULT_DOMAIN="wire.example",
    )
    worker = WorkerProcess("summarise,respond", env, name="staleness")
    yield worker
    worker.stop()


@pytest.mark.django_db(transaction=True)
def test_staleness_check_through_a_worker_posts_each_nudge_once(nudge_worker, sidecar, isolated_redis):  # noqa: F811
    from pipeline.tasks import staleness_check

    ch = _channel(tz="UTC")
    yesterday = timezone.now().astimezone(ZoneInfo("UTC")).date() - timedelta(days=1)
    _action(
        ch,
        "ACT-0002",
        "Tom to complete the API review.",
        deadline=datetime.combine(yesterday, time(23, 59, 59), tzinfo=ZoneInfo("UTC")),
    )
    start = len(sidecar.messages)

    staleness_check.delay()
    [posted] = sidecar.wait_for_messages(start + 1, timeout=60)[start:]

    assert posted["type"] == "composite"
    assert posted["conversationId"]["id"] == ch.channel_id.split("@")[0]
    assert posted["text"].startswith(
        f"If I may, Tom undertook to complete the API review (ACT-0002) by {yesterday:%A}. That was yesterday"
    )
    assert [b["id"] for b in posted["buttons"]] == [f"stale:ACT-0002:{c}" for c in ("open", "done", "cancel")]
    assert Action.objects.get(channel=ch).last_status_check is not None
    assert sidecar.errors == []

    staleness_check.delay()
    # Received and succeeded, twice; a second nudge would have been published before the second success.
    wait_for(lambda: nudge_worker.log().count("pipeline.tasks.staleness_check[") >= 4, timeout=30)
    assert redis.Redis.from_url(isolated_redis).llen("respond") == 0
    assert nudge_worker.log().count("wire_bridge.tasks.send_message[") == 2
    assert len(sidecar.messages) == start + 1
