"""Offline Tier 2 on small hand-written windows: decisions, actions, owners, deadlines, no copies."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.context import ChannelContext
from pipeline.members import Member
from pipeline.offline import extract
from pipeline.offline.verbatim import longest_common_run
from pipeline.window import WindowMessage

ANA = Member("a1@acme.example", name="Ana Lopez", handle="ana")
BEN = Member("b2@acme.example", name="Ben Okafor", handle="ben")
CARA = Member("c3@acme.example", name="Cara Singh", handle="cara")
BOT = Member("j0@acme.example", name="Jeeves", handle="jeeves")
CTX = ChannelContext(
    channel_id="chan@acme.example",
    organisation_id="acme.example",
    name="ops",
    purpose=None,
    context_type=None,
    tags=(),
    timezone="Europe/London",
    members=(ANA, BEN, CARA, BOT),
    bot_ids=(BOT.user_id,),
    known_entities=(),
)
START = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)  # a Monday


def window(*lines: tuple[Member, str]) -> list[WindowMessage]:
    out = []
    for i, (author, text) in enumerate(lines, start=1):
        mentions = [m.user_id for m in CTX.members if m.handle and f"@{m.handle}" in text]
        out.append(WindowMessage(f"m{i}", author.user_id, START + timedelta(minutes=i), text, mentions))
    return out


def test_a_commitment_with_agreement_is_one_decision_with_both_messages() -> None:
    msgs = window(
        (BEN, "the nightly export keeps timing out on the reporting cluster"),
        (ANA, "ok let's go with moving the nightly export onto the batch-worker, starting next week"),
        (CARA, "👍 works for me"),
    )
    result = extract(msgs, CTX)
    assert len(result.decisions) == 1
    decision = result.decisions[0]
    assert decision.source_msg_ids == ["m2", "m3"]
    assert set(decision.decided_by) == {ANA.user_id, CARA.user_id}
    assert "batch-worker" in decision.summary
    assert longest_common_run(decision.summary, [m.text for m in msgs]) < 10


def test_an_approval_of_a_proposal_is_a_decision_resting_on_the_proposal() -> None:
    msgs = window(
        (BEN, "what if we cap the retry budget at three attempts per card?"),
        (ANA, "yes, happy with that"),
    )
    result = extract(msgs, CTX)
    assert [d.source_msg_ids for d in result.decisions] == [["m1", "m2"]]
    assert "retry budget" in result.decisions[0].summary


def test_proposals_and_leanings_are_not_decisions() -> None:
    msgs = window(
        (BEN, "I'm leaning towards going with the managed queue"),
        (CARA, "maybe we could try the managed queue for a month?"),
    )
    assert extract(msgs, CTX).decisions == []


def test_a_request_and_its_acknowledgement_are_one_action_with_owner_and_deadline() -> None:
    msgs = window(
        (ANA, "@ben can you write the runbook for the failover by Friday?"),
        (BEN, "yep on it"),
        (CARA, "I'll update the status page once it's out"),
    )
    result = extract(msgs, CTX)
    by_owner = {a.owner_id: a for a in result.actions}
    assert set(by_owner) == {BEN.user_id, CARA.user_id}
    ben = by_owner[BEN.user_id]
    assert ben.source_msg_ids == ["m1", "m2"]
    assert ben.deadline == date(2026, 5, 8)
    assert ben.description.startswith("Ben to write the runbook")
    assert by_owner[CARA.user_id].description.startswith("Cara to update the status page")


def test_one_message_assigning_two_people_gives_two_actions() -> None:
    msgs = window((ANA, "@ben you take the TLS cert, @cara the DNS records"))
    owners = sorted(a.owner_id for a in extract(msgs, CTX).actions)
    assert owners == sorted([BEN.user_id, CARA.user_id])


def test_only_pending_anchors_are_emitted_and_bot_talk_is_never_evidence() -> None:
    msgs = window(
        (ANA, "I'll renew the certificate tomorrow"),
        (BEN, "@jeeves what did we decide about the certificate?"),
        (CARA, "I'll ping the vendor about the auto-renew fix"),
    )
    result = extract(msgs, CTX, pending_ids={"m2", "m3"})
    assert [a.source_msg_ids for a in result.actions] == [["m3"]]
    assert all("m2" not in r.source_msg_ids for r in [*result.actions, *result.decisions, *result.signals])


def test_entities_include_members_and_service_names() -> None:
    msgs = window((BEN, "blocked on the billing-api deploy, @ana can you approve the Terraform change?"))
    result = extract(msgs, CTX)
    names = {e.name: e.type for e in result.entities}
    assert names.get("billing-api") == "service"
    assert names.get("Ana Lopez") == "person"
    assert any(s.signal_type == "blocker" for s in result.signals)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(st.text(max_size=300), min_size=1, max_size=6), big=st.booleans())
def test_extract_never_crashes_and_never_copies(texts: list[str], big: bool) -> None:
    if big:
        texts = [*texts, "I'll do the thing by Friday and " * 400, "😀" * 50, "\u200d\ufe0f\x00 @ben ?"]
    authors = [ANA, BEN, CARA]
    msgs = window(*[(authors[i % 3], t) for i, t in enumerate(texts)])
    result = extract(msgs, CTX)
    sources = [m.text for m in msgs]
    ids = {m.id for m in msgs}
    for record in [*result.decisions, *result.actions, *result.signals]:
        assert set(record.source_msg_ids) <= ids
        text = getattr(record, "summary", None) or getattr(record, "description", "")
        assert longest_common_run(text, sources) < 10


def test_a_blocker_signal_says_what_is_blocked_with_the_thread_topic_and_copies_no_run() -> None:
    msgs = window(
        (ANA, "the app store review for the 4.12 release came back this morning"),
        (
            BEN,
            "rejected: missing privacy manifest for the third-party analytics SDK, apple tightened the rules for "
            "every app that ships that SDK and we need a new build with the updated version before resubmitting",
        ),
    )
    result = extract(msgs, CTX)
    blocker = next(s for s in result.signals if s.signal_type == "blocker")
    assert blocker.source_msg_ids == ["m2"]
    assert blocker.summary.startswith("Ben reported a blocker:")
    assert "privacy manifest" in blocker.summary
    assert "Topic:" in blocker.summary
    assert longest_common_run(blocker.summary, [m.text for m in msgs]) < 10


def test_an_update_signal_restates_what_was_reported_in_the_third_person() -> None:
    msgs = window(
        (CARA, "who is sorting transport to the venue?"),
        (BEN, "fyi I booked the coach: Oxford station 09:30 on the 14th, back at 16:30 on the 15th"),
    )
    result = extract(msgs, CTX, pending_ids={"m2"})
    update = next(s for s in result.signals if s.signal_type == "update")
    assert update.summary.startswith("Ben posted an update:")
    assert "coach" in update.summary and "Oxford" in update.summary
    assert " I " not in f" {update.summary} " and "fyi" not in update.summary.lower()
    assert longest_common_run(update.summary, [m.text for m in msgs]) < 10


def test_extract_logs_no_message_text(caplog) -> None:
    canary = "zebra-canary-4417"
    msgs = window(
        (ANA, f"blocked on the {canary} migration, I don't have write access"),
        (BEN, f"fyi the {canary} export finished overnight"),
        (CARA, f"ok let's go with the {canary} plan, @ben can you ship it by Friday?"),
    )
    with caplog.at_level("DEBUG"):
        result = extract(msgs, CTX)
    assert result.signals
    assert canary not in caplog.text
    for m in msgs:
        assert m.text not in caplog.text


def test_an_answer_that_settles_a_question_about_the_teams_course_is_a_decision_naming_the_question() -> None:
    msgs = window(
        (BEN, "for the mobile beta, do we invite every customer or just the pilot accounts?"),
        (ANA, "pilot accounts only, everyone else joins at general availability"),
        (CARA, "👍"),
    )
    result = extract(msgs, CTX)
    assert len(result.decisions) == 1
    decision = result.decisions[0]
    assert decision.source_msg_ids[0] == "m2" and "m1" not in decision.source_msg_ids
    assert decision.decided_by[0] == ANA.user_id
    assert "beta" in decision.summary and "pilot accounts only" in decision.summary
    assert longest_common_run(decision.summary, [m.text for m in msgs]) < 10


def test_answers_that_report_hedge_or_confirm_an_old_plan_are_not_decisions() -> None:
    cases = [
        ("do we know why the cache header was so long?", "yep, nobody changed it since the old CDN"),
        ("are we doing a webinar or just the blog post?", "webinar imo, the blog alone is too quiet"),
        ("can I just rerun the import or is there a catch?", "catch: the import only keeps one day"),
        ("are we still good for the Thursday cutover?", "yep, go/no-go call at noon"),
        ("is it every tenant or only the EU one?", "looks like only the EU tenant, the US one is fine"),
    ]
    for question, answer in cases:
        result = extract(window((BEN, question), (ANA, answer)), CTX)
        assert result.decisions == [], (question, answer)


def test_accepting_an_offer_gives_the_offerer_the_task_with_the_acceptances_deadline() -> None:
    msgs = window(
        (BEN, "the onboarding emails all look different, it's a mess"),
        (CARA, "I can put together a shared email template, should take a day"),
        (ANA, "yes please, by Friday"),
    )
    result = extract(msgs, CTX)
    assert len(result.actions) == 1
    action = result.actions[0]
    assert action.owner_id == CARA.user_id
    assert action.source_msg_ids == ["m3"]
    assert action.description.startswith("Cara to put together a shared email template")
    assert action.deadline == date(2026, 5, 8)
    assert longest_common_run(action.description, [m.text for m in msgs]) < 10


def test_a_please_with_no_offer_before_it_is_not_an_action() -> None:
    msgs = window((BEN, "the onboarding emails all look different"), (ANA, "yes please, that would help"))
    assert extract(msgs, CTX).actions == []
