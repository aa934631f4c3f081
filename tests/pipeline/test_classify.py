"""pipeline/classify.py, Tier 1 in process over real Postgres and Redis, the model a real HTTP server with
scripted answers (tests/fakes/openai_server.py): what the model is shown, and where each kind of message is
routed (receipt only, one gist signal, a debounced extract run)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from ground import keys
from ground.config import SlotConfig
from ground.redis import get_redis
from jeeves.celery import app as celery_app
from knowledge import channels, receipts
from knowledge.models import ChannelConfig, ConversationSignal, MessageReceipt, PipelineCounter
from pipeline import classify, debounce, members, window
from pipeline.members import Member
from tests.fakes.openai_server import answer, pointed_at

pytestmark = pytest.mark.django_db

ORG = "lighthouse.example"
CH = f"5c0ffee0-keepers@{ORG}"
BOT = f"b0b0b0b0-jeeves@{ORG}"
MARA, YUSUF = f"u-mara@{ORG}", f"u-yusuf@{ORG}"
T0 = datetime(2026, 5, 20, 9, 0, tzinfo=UTC)
MODEL = "tier1-model"


def _result(categories: list[str], gist: str = "", high: bool = False) -> dict:
    return {"categories": categories, "confidence": 0.8, "entities": [], "is_high_signal": high, "gist": gist}


@pytest.fixture
def provider(fake, settings):
    fake.reset()
    with pointed_at(
        fake,
        settings,
        {"classify": SlotConfig(model=MODEL, fallback="local")},
        llm_timeout_ms=5000,
        wire_app_id=BOT,
        extract_debounce_s=3600.0,  # a run is scheduled, never due during the test
        extract_batch=1000,
    ):
        yield fake


@pytest.fixture
def channel(provider):
    ChannelConfig.objects.create(channel_id=CH, organisation_id=ORG, channel_name="keepers")
    channels.set_context(CH, "purpose", "Running the  lighthouse\n" + "x" * 900, by=MARA)
    members.replace_all(
        CH,
        [
            Member(MARA, name="Mara Quint", handle="mara"),
            Member(YUSUF, name="Yusuf Adeyemi", handle="yusuf"),
            Member(BOT, name="Jeeves", handle="jeeves"),
        ],
    )
    yield ChannelConfig.objects.get(channel_id=CH)
    # A debounced extract run was published to the session's broker: no worker here, it must not outlive us.
    celery_app.control.purge()
    for flush in (debounce.flush, window.flush, members.flush):
        flush(CH)


def _arrive(n: int, text: str, author: str = MARA, mentions: tuple[str, ...] = ()) -> str:
    """What the bridge does for a message: its receipt, and the message in the channel's window."""
    msg_id = f"k{n:03d}"
    sent = T0 + timedelta(minutes=n)
    receipts.record_receipt(CH, msg_id, author_id=author, sent_at=sent)
    window.push(CH, window.WindowMessage(msg_id, author, sent, text, mentions=list(mentions)))
    return msg_id


def _receipt(msg_id: str) -> MessageReceipt:
    return MessageReceipt.objects.get(channel_id=CH, wire_msg_id=msg_id)


def test_the_model_reads_the_channel_and_three_messages_before_and_routine_leaves_a_receipt_only(channel, provider):
    for n, text in enumerate(["lamp lit at dusk", "wind picking up", "swell from the west", "barometer falling"]):
        _arrive(n, text, author=YUSUF if n % 2 else MARA)
    msg = _arrive(9, "cheers @yusuf", mentions=(YUSUF,))
    provider.script(MODEL, answer(_result(["routine"])))

    got = classify.classify_message(channel, msg, "cheers @yusuf")

    assert (got.model, got.outcome) == (MODEL, MessageReceipt.Outcome.ROUTINE)
    [request] = provider.calls(MODEL)
    shown = json.loads(request.body["messages"][1]["content"])
    assert shown["message"] == {"author": "Mara Quint", "mentions": ["Yusuf Adeyemi"], "text": "cheers @yusuf"}
    before = shown["previous_messages"]
    assert [m["text"] for m in before] == ["wind picking up", "swell from the west", "barometer falling"]
    assert [m["author"] for m in before] == ["Yusuf Adeyemi", "Mara Quint", "Yusuf Adeyemi"]
    assert {m["id"] for m in shown["context"]["members"]} == {MARA, YUSUF}  # never Jeeves itself
    purpose = shown["context"]["typed_by_members"]["purpose"]
    assert purpose.startswith("Running the lighthouse x") and len(purpose) == 500  # stored bounded, one line
    receipt = _receipt(msg)
    assert (receipt.tier, receipt.outcome, receipt.categories) == (1, "routine", ["routine"])
    assert msg in debounce.pending(CH)  # the next run covers it
    assert not get_redis().exists(keys.EXTRACT_LOCK.key(CH))  # but none is scheduled for it
    assert not ConversationSignal.objects.exists()


def test_a_high_signal_message_waits_for_one_debounced_run(channel, provider):
    provider.default(MODEL, answer(_result(["action", "question"])))  # high by category, not by the flag
    asks = ["@yusuf could you order two spare bulbs for the main lantern?", "and a spare fuse for the fog signal"]
    first = _arrive(1, asks[0], mentions=(YUSUF,))
    second = _arrive(2, asks[1])

    for msg, text in ((first, asks[0]), (second, asks[1])):
        assert classify.classify_message(channel, msg, text).outcome == MessageReceipt.Outcome.PENDING_EXTRACT
        assert _receipt(msg).outcome == "pending_extract"

    assert debounce.pending(CH) == {first, second}
    assert get_redis().ttl(keys.EXTRACT_LOCK.key(CH)) > 0  # one run scheduled; the second message rides on it
    assert debounce.request_extract(CH, channel.epoch) == "covered"


def test_an_update_leaves_one_gist_signal_and_a_copied_gist_is_refused_and_counted(channel, provider):
    text = "Update: the fog signal compressor was serviced and holds six bar again since this morning."
    provider.script(
        MODEL,
        answer(_result(["update"], gist="Fog signal compressor serviced; pressure restored.")),
        answer(_result(["discussion"], gist="The keepers talk about the paint colour.")),
        answer(_result(["update"], gist=text)),
    )
    serviced = _arrive(1, text, author=YUSUF)
    opinion = "I still think the gallery rail should be dark green, not white"
    chat = _arrive(2, opinion)
    copied = _arrive(3, text)

    assert classify.classify_message(channel, serviced, text).outcome == MessageReceipt.Outcome.SIGNAL
    [signal] = ConversationSignal.objects.filter(channel=channel)
    assert (signal.signal_type, signal.summary) == ("update", "Fog signal compressor serviced; pressure restored.")
    assert signal.participants == [YUSUF] and signal.extraction_model == MODEL
    assert signal.source_ref["wire_msg_ids"] == [serviced]

    # A discussion is low signal but keeps no gist; a gist that repeats the message is not stored.
    assert classify.classify_message(channel, chat, opinion).outcome == MessageReceipt.Outcome.SIGNAL
    assert classify.classify_message(channel, copied, text).outcome == MessageReceipt.Outcome.SIGNAL
    assert ConversationSignal.objects.filter(channel=channel).count() == 1
    assert PipelineCounter.objects.get(channel_id=CH, name="verbatim_rejected").value == 1
    assert {_receipt(m).tier for m in (serviced, chat, copied)} == {1}


def test_a_message_over_its_channels_rate_is_classified_offline_without_a_model_call(channel, provider):
    provider.default(MODEL, answer(_result(["decision"], high=True)))
    msg = _arrive(1, "ok, noted")
    got = classify.classify_message(channel, msg, "ok, noted", offline_only=True)
    assert got.model == "local" and provider.calls(MODEL) == []
    assert _receipt(msg).tier == 1


def test_typed_context_is_bounded_again_when_it_reaches_a_prompt():
    typed = classify.typed_by_members("p" * 700, "team", tuple(f"{n}-" + "t" * 60 for n in range(30)))
    assert len(typed["purpose"]) == 500 and typed["type"] == "team"
    assert len(typed["tags"]) == 20 and {len(tag) for tag in typed["tags"]} == {40}
    assert classify.typed_by_members(None, None, ()) == {"purpose": None, "type": None, "tags": []}
