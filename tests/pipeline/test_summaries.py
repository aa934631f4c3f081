"""Daily and weekly channel summaries: due by the channel's own clock, written from records (never from
messages) through the `summarise` slot's offline template, once per period; then one run through a real worker."""

from __future__ import annotations

import json
import time as clock
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from knowledge import forgetting, verbatim
from knowledge.models import (
    Action,
    ChannelConfig,
    ChannelState,
    ConversationSignal,
    Decision,
    Embedding,
    LlmCall,
    MessageReceipt,
    Summary,
)
from pipeline import summaries, tasks, window
from tests.conftest import wait_for
from tests.fakes.openai_server import answer, raw, serving

PARIS = "Europe/Paris"
# Wednesday 12 March 2025, 07:20 UTC = 08:20 in Paris (UTC+1), 03:20 in New York, 12:50 in Kolkata.
NOW = datetime(2025, 3, 12, 7, 20, tzinfo=UTC)
TOM, ANA = f"{uuid.uuid4()}@wire.example", f"{uuid.uuid4()}@wire.example"
CANARY = "zebra-orchid-canary"
MESSAGES = [
    f"ok so after a lot of back and forth we are moving billing onto postgres next sprint {CANARY}",
    "I will finish the API review by Friday, promise, and then the migration plan after that",
    "the staging certificate expired again and nothing deploys until someone renews it today",
]


def _channel(tz: str = PARIS, **kw) -> ChannelConfig:
    return ChannelConfig.objects.create(
        channel_id=f"{uuid.uuid4()}@wire.example",
        channel_name=kw.pop("channel_name", "billing"),
        organisation_id="wire.example",
        timezone=tz,
        **kw,
    )


def _mine(written, *channels: ChannelConfig) -> list[Summary]:
    ids = {c.channel_id for c in channels}
    return [s for c, s in written if c.channel_id in ids]


def _ref(n: int, at: datetime) -> dict:
    return {"wire_msg_ids": [f"m{n}"], "timestamp_range": {"start": at.isoformat(), "end": at.isoformat()}}


def _sourced(ch: ChannelConfig, n: int, at: datetime, key: str) -> dict:
    """What every record of a day carries: its channel and organisation, the message it rests on, its source key."""
    return {"channel": ch, "organisation_id": ch.organisation_id, "source_ref": _ref(n, at), "source_key": key}


def _day_of_records(ch: ChannelConfig, at: datetime, n: int = 1) -> tuple[Decision, Action, Action]:
    """A day's business: a decision, an open and a completed action, a blocker, four receipts by two people."""
    decision = Decision.objects.create(
        friendly_id=f"DEC-{n:04d}",
        summary="The team agreed to move billing to Postgres next sprint.",
        decided_by=[ANA],
        decided_at=at,
        **_sourced(ch, n, at, f"d{n}"),
    )
    open_action = Action.objects.create(
        friendly_id=f"ACT-{2 * n - 1:04d}",
        description="Tom to finish the API review.",
        owner_id=TOM,
        owner_name="Tom",
        deadline=at + timedelta(days=2),
        created_at=at,
        **_sourced(ch, n, at, f"a{n}"),
    )
    finished = Action.objects.create(
        friendly_id=f"ACT-{2 * n:04d}",
        description="Ana to renew the staging certificate.",
        owner_id=ANA,
        owner_name="Ana",
        status="done",
        created_at=at - timedelta(days=3),
        completed_at=at + timedelta(hours=1),
        **_sourced(ch, n, at, f"b{n}"),
    )
    ConversationSignal.objects.create(
        signal_type="blocker",
        summary="Deploys were blocked by an expired staging certificate.",
        participants=[ANA],
        occurred_at=at,
        **_sourced(ch, n, at, f"s{n}"),
    )
    for i, author in enumerate([TOM, ANA, TOM, ANA]):
        MessageReceipt.objects.create(
            channel_id=ch.channel_id, wire_msg_id=f"r{n}-{i}", author_id=author, sent_at=at + timedelta(minutes=i)
        )
    return decision, open_action, finished


@pytest.mark.django_db
def test_a_channel_is_due_at_eight_in_its_own_timezone_for_the_previous_local_day_or_week():
    paris, utc, new_york = _channel(PARIS), _channel("UTC"), _channel("America/New_York")
    odd = _channel("Not/AZone")  # an unknown zone is read as UTC

    due = {c.channel_id: p for c, p in summaries.due_channels("daily", NOW) if c in (paris, utc, new_york, odd)}
    assert list(due) == [paris.channel_id]
    period = due[paris.channel_id]
    assert (period.start.isoformat(), period.end.isoformat()) == (
        "2025-03-11T00:00:00+01:00",
        "2025-03-12T00:00:00+01:00",
    )
    assert [c for c, _ in summaries.due_channels("weekly", NOW) if c == paris] == []  # a Wednesday

    monday = datetime(2025, 3, 10, 7, 30, tzinfo=UTC)  # 08:30 in Paris
    [(_, week)] = [(c, p) for c, p in summaries.due_channels("weekly", monday) if c == paris]
    assert (week.start.isoformat(), week.end.isoformat()) == ("2025-03-03T00:00:00+01:00", "2025-03-10T00:00:00+01:00")
    at_eight_utc = NOW.replace(hour=8, minute=5)
    assert {c.channel_id for c, _ in summaries.due_channels("daily", at_eight_utc)} >= {utc.channel_id, odd.channel_id}


@pytest.mark.django_db
def test_a_daily_summary_is_written_once_from_the_days_records_and_never_from_a_message():
    ch = _channel()
    yesterday_noon = datetime(2025, 3, 11, 11, 0, tzinfo=UTC)
    decision, open_action, finished = _day_of_records(ch, yesterday_noon)
    _day_of_records(ch, yesterday_noon - timedelta(days=2), n=2)  # the day before: not this period
    for i, text in enumerate(MESSAGES):
        window.push(ch.channel_id, window.WindowMessage(id=f"w{i}", author_id=TOM, ts=yesterday_noon, text=text))

    try:
        [summary] = _mine(summaries.summarise_due("daily", NOW), ch)
    finally:
        window.flush(ch.channel_id)

    assert (summary.scope_type, summary.scope_id, summary.granularity) == ("channel", ch.channel_id, "daily")
    assert summary.period_start == datetime(2025, 3, 10, 23, 0, tzinfo=UTC)
    assert summary.period_end == datetime(2025, 3, 11, 23, 0, tzinfo=UTC)
    assert summary.key_decisions == [decision.id]
    assert set(summary.key_actions) == {open_action.id, finished.id}
    assert summary.message_count == 4
    assert sorted(summary.participants) == sorted([TOM, ANA])
    assert summary.sentiment == "blocked"
    assert summary.model_version == "local (summarise-v2)"
    assert LlmCall.objects.filter(slot="summarise", channel_id=ch.channel_id, outcome="ok").count() == 1
    assert summary.summary == (
        "billing, Tuesday 11 March: four messages from two participants; I noted one decision, two actions "
        "and one other matter.\n"
        "Decisions:\n"
        "- DEC-0001: The team agreed to move billing to Postgres next sprint.\n"
        "Actions still open:\n"
        "- ACT-0001 (Tom, due 13 March): Tom to finish the API review.\n"
        "Completed: ACT-0002.\n"
        "Of note:\n"
        "- A blocker: Deploys were blocked by an expired staging certificate.\n"
        "One notes that the day ended with a matter blocked."
    )
    assert CANARY not in summary.summary and "!" not in summary.summary
    verbatim.guard_text(summary.summary, MESSAGES)  # raises on a run of ten words of a message

    assert _mine(summaries.summarise_due("daily", NOW + timedelta(minutes=30)), ch) == []
    assert Summary.objects.filter(scope_id=ch.channel_id).count() == 1
    assert LlmCall.objects.filter(slot="summarise", channel_id=ch.channel_id).count() == 1


@pytest.mark.django_db
def test_a_summary_that_retold_a_deleted_message_is_written_again_without_it():
    ch = _channel()
    yesterday_noon = datetime(2025, 3, 11, 11, 0, tzinfo=UTC)
    _day_of_records(ch, yesterday_noon)  # every record of it rests on m1
    Decision.objects.create(
        channel=ch, organisation_id=ch.organisation_id, friendly_id="DEC-0007", decided_by=[TOM],
        summary="The team agreed to keep the invoice template as it is.", decided_at=yesterday_noon,
        source_ref=_ref(7, yesterday_noon), source_key="d7",
    )  # fmt: skip
    [before] = _mine(summaries.summarise_due("daily", NOW), ch)
    assert "DEC-0001" in before.summary and "DEC-0007" in before.summary

    forgotten = forgetting.forget_message(ch.channel_id, "m1")
    assert not Summary.objects.filter(pk=before.pk).exists()
    tasks.resummarise(  # the task's body, as the summarise worker runs it
        ch.channel_id,
        [[p.granularity, p.period_start.isoformat(), p.period_end.isoformat()] for p in forgotten.summaries],
    )
    after = Summary.objects.get(scope_id=ch.channel_id, granularity="daily")
    assert (after.period_start, after.period_end) == (before.period_start, before.period_end)
    assert "DEC-0007" in after.summary and "DEC-0001" not in after.summary and "ACT-" not in after.summary
    assert len(after.key_decisions) == 1


@pytest.mark.django_db
def test_a_quiet_day_a_paused_channel_and_a_one_to_one_get_no_summary():
    quiet = _channel()
    MessageReceipt.objects.create(
        channel_id=quiet.channel_id, wire_msg_id="r", author_id=TOM, sent_at=datetime(2025, 3, 11, 11, tzinfo=UTC)
    )
    paused, secure, personal = _channel(state=ChannelState.PAUSED), _channel(state=ChannelState.SECURE), _channel()
    personal.conversation_type = "ONE_TO_ONE"
    personal.save(update_fields=["conversation_type"])
    for ch in (paused, secure, personal):
        _day_of_records(ch, datetime(2025, 3, 11, 11, 0, tzinfo=UTC))

    assert _mine(summaries.summarise_due("daily", NOW), quiet, paused, secure, personal) == []
    assert not Summary.objects.filter(scope_id__in=[quiet.pk, paused.pk, secure.pk, personal.pk]).exists()


@pytest.mark.django_db
def test_a_weekly_summary_is_written_from_the_dailies():
    ch = _channel()
    _day_of_records(ch, datetime(2025, 3, 10, 11, 0, tzinfo=UTC), n=1)  # Monday
    _day_of_records(ch, datetime(2025, 3, 12, 11, 0, tzinfo=UTC), n=2)  # Wednesday
    dailies = []
    for day in (11, 13):  # the mornings after
        dailies += _mine(summaries.summarise_due("daily", datetime(2025, 3, day, 7, 10, tzinfo=UTC)), ch)
    assert len(dailies) == 2

    next_monday = datetime(2025, 3, 17, 7, 5, tzinfo=UTC)
    [weekly] = _mine(summaries.summarise_due("weekly", next_monday), ch)

    assert weekly.granularity == "weekly"
    assert weekly.period_start == datetime(2025, 3, 9, 23, 0, tzinfo=UTC)
    assert weekly.period_end == datetime(2025, 3, 16, 23, 0, tzinfo=UTC)
    assert weekly.message_count == 8
    assert weekly.key_decisions == [d for s in dailies for d in s.key_decisions]
    assert weekly.sentiment == "blocked"
    lines = weekly.summary.splitlines()
    assert lines[0] == (
        "billing, the week of 10 March: two days with business on record, eight messages from two participants; "
        "I noted two decisions and four actions."
    )
    assert lines[1:3] == [
        "- Monday: four messages, one decision, two actions (blocked).",
        "- Wednesday: four messages, one decision, two actions (blocked).",
    ]
    assert "- DEC-0002: The team agreed to move billing to Postgres next sprint." in lines
    assert _mine(summaries.summarise_due("weekly", next_monday + timedelta(minutes=40)), ch) == []


@pytest.fixture
def provider(settings):
    with serving(settings, {"summarise": "summary-model"}, llm_timeout_ms=3000) as server:
        yield server


@pytest.mark.django_db
def test_a_model_summarises_from_the_records_only_and_invalid_output_falls_back_to_the_template(provider):
    chans = [_channel(), _channel()]
    for ch in chans:
        _day_of_records(ch, datetime(2025, 3, 11, 11, 0, tzinfo=UTC))
    provider.script(
        "summary-model",
        answer({"summary": "A quiet Tuesday: DEC-0001 was agreed and ACT-0001 remains with Tom."}),
        raw("not JSON"),
        raw("still not JSON"),
    )
    # Channels are summarised in channel-id order: the first meets the answer, the second the invalid output.
    by_model, by_template = sorted(_mine(summaries.summarise_due("daily", NOW), *chans), key=lambda s: s.scope_id)

    assert by_model.summary == "A quiet Tuesday: DEC-0001 was agreed and ACT-0001 remains with Tom."
    assert by_model.model_version == "summary-model (summarise-v2)"
    assert by_template.model_version == "local (summarise-v2)"
    assert by_template.summary.startswith("billing, Tuesday 11 March: four messages")
    sent = provider.calls("summary-model")[0].body["messages"]
    given = json.loads(sent[1]["content"])
    assert [d["id"] for d in given["decisions"]] == ["DEC-0001"]
    assert given["message_count"] == 4 and given["period"] == {"from": "2025-03-11", "until_before": "2025-03-12"}
    assert not any(m[:30] in sent[1]["content"] for m in MESSAGES)


# --------------------------------------------------------------------------- through a real worker


def _zone_at_eight(now: datetime) -> str:
    """A fixed-offset zone in which it is now the 08:00 hour (Etc/GMT signs are inverted)."""
    offset = (8 - now.hour) % 24
    offset = offset - 24 if offset > 14 else offset
    return "Etc/GMT" if offset == 0 else f"Etc/GMT{-offset:+d}"


@pytest.mark.django_db(transaction=True)
def test_summarise_due_channels_through_a_worker_writes_and_embeds_once(celery_worker_process):
    from pipeline.tasks import summarise_due_channels

    now = timezone.now()
    if now.minute == 59 and now.second > 45:
        clock.sleep(16)  # not across the hour between choosing the zone and the worker's clock
        now = timezone.now()
    ch = _channel(_zone_at_eight(now))
    local_now = now.astimezone(summaries.channel_zone(ch.timezone))
    period = summaries.period_for("daily", local_now)
    _day_of_records(ch, period.start + timedelta(hours=12))
    runs = celery_worker_process.log().count("pipeline.tasks.summarise_due_channels[")

    summarise_due_channels.delay("daily")
    summary = wait_for(lambda: Summary.objects.filter(scope_id=ch.channel_id).first(), timeout=60)

    assert summary.period_start == period.start and summary.granularity == "daily"
    assert summary.summary.startswith("billing, ") and "DEC-0001" in summary.summary
    wait_for(lambda: Embedding.objects.filter(source_type="summary", source_id=summary.id).exists(), timeout=90)

    summarise_due_channels.delay("daily")
    wait_for(lambda: celery_worker_process.log().count("pipeline.tasks.summarise_due_channels[") >= runs + 4)
    assert Summary.objects.filter(scope_id=ch.channel_id).count() == 1
