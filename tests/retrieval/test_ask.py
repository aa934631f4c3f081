"""The question path end to end on real Postgres: answers in voice, citations, no-record, contradictions, CLI."""

from __future__ import annotations

import dataclasses
import io
import json
import re

import pytest
from django.core.management import call_command
from django.test import override_settings

from jeeves.config import SlotConfig
from knowledge.models import LlmCall
from pipeline import embedder
from retrieval.answer import CONTRADICTION, NO_RECORD
from retrieval.ask import ask
from tests.retrieval import factory as f

pytestmark = pytest.mark.django_db


def _embed_all(*records):
    texts = [getattr(r, "summary", None) or r.description for r in records]
    for record, vector in zip(records, embedder.embed(texts), strict=True):
        f.embed(record, vector)


@pytest.fixture
def billing():
    alice = f.user()
    ch = f.channel(name="billing-platform")
    d1 = f.decision(ch, "Failed card payments are retried five times over 72 hours", by=[alice], days_ago=6)
    d2 = f.decision(
        ch,
        "Card payment retries are cut to three attempts over 72 hours because of card-scheme rules",
        by=[alice],
        days_ago=4,
        rationale="Card-scheme rules penalise more than three retries",
    )
    d1.status, d1.superseded_by = "superseded", d2
    d1.save()
    a1 = f.action(ch, "Write the retry_attempts table migration", owner=alice, owner_name="Alice Martin")
    _embed_all(d1, d2, a1)
    return ch, alice, d1, d2, a1


def test_answer_cites_channel_date_and_ids_in_voice(billing):
    ch, alice, d1, d2, a1 = billing
    result = ask(ch.channel_id, alice, "How many times do we retry a failed card payment?")
    assert result.answer != NO_RECORD
    ids = [r.id for r in result.records]
    assert d2.friendly_id in ids[:2]
    assert d2.friendly_id in result.answer and "billing-platform" in result.answer
    assert re.search(r"around \d{1,2} \w+ 20\d\d", result.answer)
    assert "!" not in result.answer and "sorry" not in result.answer.lower()
    assert set(result.timings_ms) == {"plan", "paths", "fuse", "answer"}
    assert result.tokens > 0
    top = result.records[0]
    assert top.channel_id == ch.channel_id and top.paths and top.score > 0 and top.source_ref["wire_msg_ids"]


def test_superseded_decision_says_what_replaced_it(billing):
    ch, alice, d1, d2, _a1 = billing
    result = ask(ch.channel_id, alice, "What was the original retry plan for card payments before it changed?")
    assert d1.friendly_id in result.answer
    assert f"superseded by {d2.friendly_id}" in result.answer


def test_accountability_names_the_owner(billing):
    ch, alice, *_rest, a1 = billing
    result = ask(ch.channel_id, alice, "Who is writing the retry_attempts migration?")
    assert result.records[0].id == a1.friendly_id
    assert "Alice Martin" in result.answer


def test_nothing_found_is_the_exact_sentence_and_no_model_call(billing):
    ch, alice, *_ = billing
    result = ask(ch.channel_id, alice, "Which PSP did we agree to move to?")
    assert result.answer == NO_RECORD
    assert result.records == []
    assert not LlmCall.objects.filter(slot__in=["respond", "complex"]).exists()


def test_another_channels_decision_is_no_record(billing):
    _ch, alice, *_ = billing
    elsewhere = f.channel(name="cs-tooling")
    result = ask(elsewhere.channel_id, alice, "How many times do we retry a failed card payment?")
    assert result.answer == NO_RECORD


def test_contradicting_active_decisions_are_flagged():
    ch = f.channel(name="support-escalations")
    d1 = f.decision(ch, "P1 tickets get a first response within four business hours", days_ago=5)
    d2 = f.decision(ch, "P1 tickets get a first response within one hour at any time", days_ago=1)
    _embed_all(d1, d2)
    result = ask(ch.channel_id, f.user(), "What is the first response target for P1 tickets?")
    assert CONTRADICTION in result.answer
    assert d1.friendly_id in result.answer and d2.friendly_id in result.answer


def test_jeeves_ask_cli_json(billing):
    ch, alice, _d1, d2, _a1 = billing
    out = io.StringIO()
    call_command(
        "jeeves",
        "ask",
        "--channel",
        ch.channel_id,
        "--user",
        alice,
        "--json",
        "Why did we cut the retry limit?",
        stdout=out,
    )
    data = json.loads(out.getvalue())
    assert set(data) == {"answer", "records", "tokens", "timings_ms"}
    assert data["records"][0]["id"] == d2.friendly_id
    assert set(data["records"][0]) == {"id", "type", "channel_id", "paths", "score", "source_ref"}
    assert "card-scheme" in data["answer"].lower()
    plain = io.StringIO()
    call_command("jeeves", "ask", "--channel", ch.channel_id, "--user", alice, "Which PSP?", stdout=plain)
    assert plain.getvalue().strip() == NO_RECORD


def test_respond_slot_through_a_fake_provider(billing, settings):
    from tests.fakes.openai_server import FakeOpenAI, answer

    ch, alice, _d1, d2, _a1 = billing
    fake = FakeOpenAI().start()
    try:
        slots = dict(settings.JEEVES.slots)
        slots["respond"] = SlotConfig(model="butler-large", fallback="local")
        jeeves = dataclasses.replace(settings.JEEVES, slots=slots, llm_base_url=fake.base_url)
        fake.script(
            "butler-large",
            answer(
                {
                    "answer": f"Sorry! Three attempts, per {d2.friendly_id} in billing-platform.",
                    "cited": [d2.friendly_id, "DEC-9999"],
                }
            ),
        )
        with override_settings(JEEVES=jeeves):
            result = ask(ch.channel_id, alice, "How many times do we retry a failed card payment?")
        assert [r.id for r in result.records] == [d2.friendly_id]
        assert "!" not in result.answer and "Sorry" not in result.answer
        [call] = fake.calls("butler-large")
        prompt = json.dumps(call.body["messages"])
        assert "## Relevant Decisions" in prompt and d2.friendly_id in prompt
        assert LlmCall.objects.filter(slot="respond", model="butler-large", outcome="ok").exists()
    finally:
        fake.stop()
