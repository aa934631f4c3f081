"""The question path end to end on real Postgres: answers in voice, citations, no-record, contradictions, CLI."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import override_settings

from ground.config import SlotConfig
from knowledge.models import LlmCall
from pipeline import embedder, members
from retrieval import relevance
from retrieval.answer import CONTRADICTION, NEAREST, NO_RECORD
from retrieval.ask import ask
from tests.fakes.openai_server import answer, serving
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
    assert result.answer.startswith(d2.summary)  # the first sentence answers: the retry rule in force
    assert re.search(r"\(DEC-\d{4}, since the \d{1,2}(st|nd|rd|th) of [A-Z][a-z]+( 20\d\d)?\)", result.answer)
    assert len(result.records) <= 3
    assert "!" not in result.answer and "sorry" not in result.answer.lower()
    assert set(result.timings_ms) == {"plan", "paths", "fuse", "answer"}
    assert result.tokens > 0
    top = result.records[0]
    assert top.channel_id == ch.channel_id and top.paths and top.score > 0 and top.source_ref["wire_msg_ids"]


def test_superseded_decision_says_what_replaced_it(billing):
    ch, alice, d1, d2, _a1 = billing
    result = ask(ch.channel_id, alice, "What was the original retry plan for card payments before it changed?")
    assert result.answer.startswith(f"Originally: {d1.summary} ({d1.friendly_id}, the ")
    assert f"{d2.summary} ({d2.friendly_id})" in result.answer


def test_accountability_names_the_owner(billing):
    ch, alice, *_rest, a1 = billing
    result = ask(ch.channel_id, alice, "Who is writing the retry_attempts migration?")
    assert result.records[0].id == a1.friendly_id
    assert result.answer.startswith("Alice Martin has it in hand (ACT-")


@pytest.fixture
def hedge_below(monkeypatch):
    """Sets the fitted relevance model's hedging threshold: an answer resting on a match below it says it is only
    the nearest (1.01: every answer; 0.0: none)."""
    fitted = relevance.load()

    def set_to(threshold: float) -> None:
        monkeypatch.setattr(relevance, "load", lambda: dataclasses.replace(fitted, hedge_below=threshold))

    return set_to


def test_an_answer_resting_on_a_doubtful_match_says_it_is_only_the_nearest(billing, hedge_below):
    ch, alice, *_rest, a1 = billing
    hedge_below(1.01)
    hedged = ask(ch.channel_id, alice, "Who is writing the retry_attempts migration?")
    assert hedged.answer.startswith(f"{NEAREST} Alice Martin has it in hand (ACT-")
    assert hedged.records[0].id == a1.friendly_id
    hedge_below(0.0)
    plain = ask(ch.channel_id, alice, "Who is writing the retry_attempts migration?")
    assert plain.answer.startswith("Alice Martin has it in hand (ACT-")


def test_a_filter_questions_hits_are_never_called_the_nearest(billing, hedge_below):
    ch, alice, *_rest, a1 = billing
    hedge_below(1.01)
    mine = ask(ch.channel_id, alice, "What are my open actions?")
    assert a1.friendly_id in [r.id for r in mine.records]
    assert not mine.answer.startswith(NEAREST)


@pytest.fixture
def workload():
    """One person with four open actions (two dated) and one done, another person's open and done actions, and the
    same person's action in another channel."""
    priya, tom = f.user(), f.user()
    ch = f.channel(name="data-platform")
    elsewhere = f.channel(name="finance-ops")
    due = f.NOW + timedelta(days=5)

    def owned(text, owner=priya, name="Priya Shah", **kw):
        return f.action(ch, text, owner=owner, owner_name=name, **kw)

    soon = owned("Priya to rotate the warehouse credentials", deadline=due)
    later = owned("Priya to archive the old dashboards", deadline=due + timedelta(days=7))
    newest = owned("Priya to write up the backfill runbook", days_ago=1)
    oldest = owned("Priya to tidy the dbt model names", days_ago=3)
    done = owned("Priya to pin the connector version", status="done")
    owned("Tom to review the cost report", owner=tom, name="Tom Berg")
    owned("Tom to renew the BI licence", owner=tom, name="Tom Berg", status="done")
    f.action(elsewhere, "Priya to close the ledger export", owner=priya, owner_name="Priya Shah")
    return ch, priya, tom, [soon, later, newest, oldest], done


def test_what_someone_has_on_is_listed_by_deadline(workload):
    ch, priya, tom, (soon, later, newest, oldest), _done = workload
    result = ask(ch.channel_id, tom, "what is Priya working on?")
    assert result.answer.startswith(
        f"Priya Shah has four open actions; the three due soonest: to rotate the warehouse credentials "
        f"({soon.friendly_id}), by "
    )
    assert f"; and to write up the backfill runbook ({newest.friendly_id})." in result.answer
    assert result.answer.endswith(f"Besides them: {oldest.friendly_id}.")
    assert [r.id for r in result.records] == [soon.friendly_id, later.friendly_id, newest.friendly_id]
    assert "ledger" not in result.answer and "cost report" not in result.answer  # another channel, another person


def test_the_askers_own_and_finished_work_are_listed(workload):
    ch, priya, _tom, open_ones, done = workload
    mine = ask(ch.channel_id, priya, "what's on my plate?")
    assert mine.answer.startswith("You have four open actions; the three due soonest: to rotate ")
    finished = ask(ch.channel_id, priya, "which of my actions are done?")
    assert finished.answer == f"You have one action done: to pin the connector version ({done.friendly_id})."
    everyone = ask(ch.channel_id, priya, "list open actions")
    assert everyone.answer.startswith("There are five open actions; the three due soonest: Priya to rotate ")


def test_a_narrower_question_about_someones_work_is_not_a_list(workload):
    ch, _priya, tom, (soon, *_rest), _done = workload
    result = ask(ch.channel_id, tom, "is Priya working on the warehouse credentials?")
    assert not result.answer.startswith("Priya Shah has")


def test_what_someone_decided_is_listed_newest_first(workload):
    ch, priya, tom, *_ = workload
    older = f.decision(ch, "Nightly loads move to 02:00 UTC", by=[priya], days_ago=9)
    newer = f.decision(ch, "The staging warehouse is shut down at weekends", by=[priya, tom], days_ago=2)
    f.decision(ch, "Dashboards are owned by the analysts", by=[tom], days_ago=1)
    f.decision(ch, "Backfills run on Sundays", by=[priya], days_ago=5, status="superseded")
    result = ask(ch.channel_id, tom, "what did Priya decide?")
    assert result.answer.startswith(
        f"Priya Shah was party to two decisions in force: The staging warehouse is shut down at weekends "
        f"({newer.friendly_id}, the "
    )
    assert result.answer.index(newer.friendly_id) < result.answer.index(older.friendly_id)
    assert "analysts" not in result.answer and "Sundays" not in result.answer
    assert [r.id for r in result.records] == [newer.friendly_id, older.friendly_id]
    assert ask(ch.channel_id, priya, "my decisions").answer.startswith("You were party to two decisions in force")


def test_a_long_list_is_counted_whole_and_its_rest_named_briefly(workload):
    ch, priya, tom, *_ = workload
    rafa = f.user()
    chores = [
        f.action(ch, f"Rafa to label shelf {n}", owner=rafa, owner_name="Rafa Costa", days_ago=n) for n in range(14)
    ]
    result = ask(ch.channel_id, tom, "what is Rafa working on?")
    assert result.answer.startswith("Rafa Costa has 14 open actions; the three newest: to label shelf 0 (")
    rest = ", ".join(c.friendly_id for c in chores[3:9])
    assert result.answer.endswith(f"Besides them: {rest} and 5 more.")


def test_none_on_record_is_said_of_the_person_asked_about(workload):
    ch, priya, tom, *_ = workload
    f.action(ch, "Lena to order the spare drives", owner=f.user(), owner_name="Lena Vogel", status="done")
    assert ask(ch.channel_id, tom, "what is Lena working on?").answer == "Lena Vogel has no open actions on record."
    nothing = ask(ch.channel_id, priya, "what did Tom decide?")
    assert nothing.answer == "I have no decision in force on record that Tom Berg was party to."
    assert nothing.records == []


def test_a_member_with_nothing_on_record_is_known_by_name(workload, redis_url):
    ch, _priya, tom, *_ = workload
    oskar = f.user()
    members.add(ch.channel_id, [members.Member(oskar, name="Oskar Lindqvist", handle="oskar")])
    try:
        assert ask(ch.channel_id, tom, "what's Oskar doing?").answer == "Oskar Lindqvist has no open actions on record."
        assert ask(ch.channel_id, tom, "what did oskar decide?").answer == (
            "I have no decision in force on record that Oskar Lindqvist was party to."
        )
    finally:
        members.flush(ch.channel_id)


def test_what_is_in_the_way_is_listed_newest_first_with_who_raised_it(workload, redis_url):
    ch, priya, tom, *_ = workload
    members.add(ch.channel_id, [members.Member(priya, name="Priya Shah"), members.Member(tom, name="Tom Berg")])
    try:
        quota = f.signal(
            ch, "The staging cluster has no free quota", participants=[tom], signal_type="blocker", days_ago=6
        )
        keys = f.signal(ch, "Vendor API keys have not arrived", participants=[priya], signal_type="blocker", days_ago=2)
        f.signal(ch, "Priya shared the quarterly numbers", participants=[priya], signal_type="update")
        f.signal(f.channel(name="print-room"), "The plotter is jammed", participants=[tom], signal_type="blocker")
        every = ask(ch.channel_id, tom, "is anything blocked?")
        assert every.answer.startswith(
            "There are two blockers on record: Vendor API keys have not arrived (Priya Shah, the "
        )
        assert "; and the staging cluster has no free quota (Tom Berg, the " in every.answer
        assert "quarterly" not in every.answer and "plotter" not in every.answer  # not a blocker; another channel
        assert [r.id for r in every.records] == [str(keys.id), str(quota.id)]
        assert ask(ch.channel_id, priya, "what is Tom stuck on?").answer.startswith(
            "Tom Berg raised one blocker: the staging cluster has no free quota (the "
        )
        assert ask(ch.channel_id, priya, "am I blocked?").answer.startswith("You raised one blocker: Vendor API keys")
        # A question that names what was held up is searched, not listed.
        assert not ask(ch.channel_id, tom, "what blocked the vendor API keys?").answer.startswith("There are")
        quiet = f.channel(name="handbook")
        assert ask(quiet.channel_id, tom, "any blockers?").answer == "I have no blocker on record."
    finally:
        members.flush(ch.channel_id)
    assert ask(ch.channel_id, priya, "what's Tom blocked on?").answer.startswith("Tom Berg raised one blocker")


def test_whether_a_question_asks_for_a_list_is_read_from_its_words_not_the_models_plan(workload, settings):
    ch, _priya, tom, (soon, *_rest), _done = workload
    narrow = {
        "intent": "factual_recall",
        "keywords": ["credentials"],
        "response_format": "list",
        "record_types": ["action"],
    }
    broad = {"intent": "accountability", "keywords": ["priya"], "response_format": "direct_answer"}
    with serving(settings, {"query_analyse": "plan-model"}) as provider:
        provider.script("plan-model", answer(narrow), answer(broad))
        assert not ask(ch.channel_id, tom, "which actions touch the warehouse credentials?").answer.startswith(
            "There are"
        )
        listed = ask(ch.channel_id, tom, "what is Priya working on?")
    assert listed.answer.startswith("Priya Shah has four open actions; the three due soonest: to rotate ")
    assert len(provider.calls("plan-model")) == 2


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


def test_jeeves_ask_cli_answers_a_read_command_as_the_channel_would(billing):
    ch, alice, _d1, d2, _a1 = billing
    out = io.StringIO()
    call_command("jeeves", "ask", "--channel", ch.channel_id, "--user", alice, "decisions", stdout=out)
    assert out.getvalue().startswith("The decisions currently in force") and d2.friendly_id in out.getvalue()
    out = io.StringIO()
    call_command("jeeves", "ask", "--channel", ch.channel_id, "--user", alice, "catch me up", stdout=out)
    assert out.getvalue().startswith(("Since ", "I'm afraid nothing of note"))


def test_respond_slot_through_a_fake_provider(billing, settings):
    """A model's answer is used when it checks out; a cited id outside the pack, an empty answer or a
    ten-word quote of a record falls back to the offline composer."""
    from tests.fakes.openai_server import FakeOpenAI, answer

    ch, alice, _d1, d2, _a1 = billing
    question = "How many times do we retry a failed card payment?"
    fake = FakeOpenAI().start()
    try:
        slots = dict(settings.JEEVES.slots)
        slots["respond"] = SlotConfig(model="butler-large", fallback="local")
        jeeves = dataclasses.replace(settings.JEEVES, slots=slots, llm_base_url=fake.base_url)
        good = {"answer": f"Sorry! Three attempts now, per {d2.friendly_id}.", "cited": [d2.friendly_id]}
        fake.script(
            "butler-large",
            answer(good),
            answer({**good, "cited": [d2.friendly_id, "DEC-9999"]}),
            answer({"answer": "", "cited": []}),
            answer({"answer": "", "cited": []}),  # asked again once, then the offline composer
            answer({"answer": f"As recorded: {d2.summary}.", "cited": [d2.friendly_id]}),
        )
        with override_settings(JEEVES=jeeves):
            result = ask(ch.channel_id, alice, question)
            assert [r.id for r in result.records] == [d2.friendly_id]
            assert result.answer == f"I'm afraid. Three attempts now, per {d2.friendly_id}."
            offline = [ask(ch.channel_id, alice, question) for _ in range(3)]
        for fallback in offline:
            assert fallback.answer.startswith(d2.summary)  # the composer's answer
            assert fallback.records[0].id == d2.friendly_id
        first = fake.calls("butler-large")[0]
        prompt = json.dumps(first.body["messages"])
        assert "## Relevant Decisions" in prompt and d2.friendly_id in prompt
        assert len(fake.calls("butler-large")) == 5
        assert LlmCall.objects.filter(slot="respond", model="butler-large", outcome="ok").count() == 3
        assert LlmCall.objects.filter(slot="respond", model="butler-large", outcome="invalid").count() == 2
    finally:
        fake.stop()
