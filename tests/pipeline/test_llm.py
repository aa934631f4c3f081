"""The LLM slot layer against a fake OpenAI-compatible HTTP server: litellm's Router for real
(retry once, fallback model, then the offline engine), llm_calls rows without content, invalid
JSON retried once then a failure, and a failed extraction leaving one discussion signal."""

from __future__ import annotations

import dataclasses

import pytest
from django.test import override_settings

from jeeves.config import SlotConfig
from knowledge import services
from knowledge.models import ChannelConfig, ConversationSignal, Decision, LlmCall
from pipeline import classify, extract, llm, members, window
from pipeline.schemas import ClassifyResult
from tests.fakes.openai_server import FakeOpenAI, answer, error, raw, slow
from tests.pipeline import evalset

pytestmark = pytest.mark.django_db

BOT = "3531c6e3-2811-58c8-aa49-5621c2d47635@wire.example"
CLASSIFIED = {"categories": ["decision"], "confidence": 0.9, "entities": [], "is_high_signal": True, "gist": "x"}
OFFLINE = ClassifyResult(categories=["routine"], confidence=0.5, is_high_signal=False)


@pytest.fixture(scope="module")
def fake():
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def provider(fake, settings):
    fake.reset()
    slots = {
        **settings.JEEVES.slots,
        "classify": SlotConfig(model="primary-model", fallback="fallback-model"),
        "extract": SlotConfig(model="primary-model", fallback="local"),
    }
    cfg = dataclasses.replace(
        settings.JEEVES,
        llm_base_url=fake.base_url,
        llm_api_key="test-key",
        llm_timeout_ms=1500,
        slots=slots,
        wire_app_id=BOT,
        extract_debounce_s=3600.0,
        extract_batch=1000,
    )
    llm._router.cache_clear()
    with override_settings(JEEVES=cfg):
        yield fake
    llm._router.cache_clear()


def _ask() -> llm.Answer:
    return llm.structured("classify", [{"role": "user", "content": "hello"}], ClassifyResult, lambda: OFFLINE)


def test_a_good_answer_is_validated_and_recorded_without_content(provider):
    provider.script("primary-model", answer(CLASSIFIED))
    got = _ask()
    assert got.model == "primary-model" and not got.fallback_used
    assert got.value.categories == ["decision"]
    [call] = LlmCall.objects.all()
    assert (call.slot, call.model, call.outcome, call.fallback_used) == ("classify", "primary-model", "ok", False)
    assert call.prompt_tokens == 120 and call.completion_tokens == 40
    # The request went out in JSON mode.
    assert provider.calls("primary-model")[0].body["response_format"] == {"type": "json_object"}


def test_503_is_retried_once_then_the_fallback_model_answers(provider):
    provider.script("primary-model", error(503), error(503))
    provider.script("fallback-model", answer(CLASSIFIED))
    got = _ask()
    assert got.model == "fallback-model" and got.fallback_used
    assert len(provider.calls("primary-model")) == 2
    rows = list(LlmCall.objects.order_by("attempt").values_list("model", "outcome", "fallback_used"))
    assert rows == [
        ("primary-model", "error", False),
        ("primary-model", "error", False),
        ("fallback-model", "ok", True),
    ]


def test_timeouts_and_429s_everywhere_end_on_the_offline_engine(provider):
    provider.script("primary-model", slow(3), slow(3))
    provider.script("fallback-model", error(429), error(429))
    got = _ask()
    assert got.model == "local" and got.value == OFFLINE
    outcomes = list(LlmCall.objects.order_by("id").values_list("outcome", flat=True))
    assert outcomes[:2] == ["timeout", "timeout"]
    assert outcomes[-1] == "ok" and LlmCall.objects.filter(model="local", fallback_used=True).count() == 1


def test_invalid_json_is_asked_again_once_then_fails(provider):
    provider.script("primary-model", raw("this is not json"), answer({"categories": []}))
    with pytest.raises(llm.SlotFailure):
        _ask()
    assert list(LlmCall.objects.values_list("outcome", flat=True)) == ["invalid", "invalid"]


def test_invalid_json_then_a_valid_answer_succeeds(provider):
    provider.script("primary-model", raw("{nope"), answer(CLASSIFIED))
    assert _ask().value.is_high_signal


def test_extraction_failure_leaves_one_discussion_signal(provider, redis_client):
    conv = evalset.load("conv-001")
    ch = conv["channel"]
    channel = ChannelConfig.objects.create(channel_id=ch["id"], organisation_id=ch["org"], timezone=ch["timezone"])
    members.replace_all(channel.channel_id, evalset.members(conv, BOT))
    # Tier 1 answers through the provider; Tier 2's answers are invalid twice.
    provider.default("primary-model", answer(CLASSIFIED))
    for message in conv["messages"][8:12]:
        wm = evalset.window_message(conv, message, BOT)
        services.record_receipt(channel.channel_id, wm.id, author_id=wm.author_id, sent_at=wm.ts)
        window.push(channel.channel_id, wm)
        classify.classify_message(channel, wm.id, wm.text)
    provider.default("primary-model", raw("I'm sorry, I cannot produce JSON"))

    report = extract.run(channel)

    assert report.failed
    [signal] = ConversationSignal.objects.filter(channel=channel)
    assert signal.signal_type == "discussion" and signal.confidence == 0.3
    assert signal.source_ref["wire_msg_ids"] == ["m009", "m010", "m011", "m012"]
    assert not Decision.objects.exists()
    assert LlmCall.objects.filter(slot="extract", outcome="invalid").count() == 2
    # The pipeline goes on: the watermark moved, a second run has nothing to do.
    assert extract.run(channel).pending == 0
