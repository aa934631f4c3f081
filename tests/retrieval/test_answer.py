"""The offline composer's shape (pure, no database): the first sentence answers in the form the question
asks for, at most three records are cited and only those close to the best, what changed is said, dates
are spoken, and a model's answer is checked. Every sentence here is written for this test."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from retrieval.answer import (
    CONTRADICTION,
    MAX_CITED,
    NO_RECORD,
    ModelAnswer,
    Setting,
    cite,
    form_of,
    listing,
    offline_answer,
    unchecked,
)
from retrieval.pack import ContextPack, approx_date, render
from retrieval.plan import QueryPlan
from retrieval.records import Record

NOW = datetime(2026, 3, 20, 12, tzinfo=UTC)
HERE = Setting(channel_id="c@x", timezone="Europe/London", now=NOW, names={"u1@x": "Nadia Okafor"})
SCAFFOLDING = ("Topic:", "confirmed the decision", "settled", "If I may, as to", "\n- ")


def rec(kind: str, n: int, text: str, *, status: str = "active", at: datetime | None = None, **detail) -> Record:
    prefix = {"decision": "DEC", "action": "ACT"}.get(kind)
    return Record(
        type=kind, id=f"{kind}-{n}", friendly_id=f"{prefix}-{n:04d}" if prefix else None, channel_id="c@x",
        channel_name="archive-team", occurred_at=at or datetime(2026, 3, 3, 10, tzinfo=UTC), confidence=0.8,
        text=text, status=status, source_ref={"wire_msg_ids": [f"m{n}"]}, detail=detail,
    )  # fmt: skip


def answer(question: str, cited: list[Record], contradictions=()) -> str:
    pack = ContextPack(question=question, layers={"all": cited}, ranked=cited)
    return offline_answer(QueryPlan(), pack, list(contradictions), cited, HERE).text


def first_sentence(text: str) -> str:
    return re.split(r"(?<=[.])\s+(?=[A-Z])", text, maxsplit=1)[0]


MIGRATE = rec(
    "action", 4, "Nadia to move the invoice archive onto cold storage", status="open",
    owner_id="u1@x", owner_name="Nadia Okafor", deadline=datetime(2026, 3, 13, 17, tzinfo=UTC),
)  # fmt: skip
KEEP = rec("decision", 2, "Invoices older than seven years are kept in cold storage", decided_by=["u1@x"])
KEEP_LONGER = rec(
    "decision", 5, "Invoices are kept for ten years, to match the auditors' rule", at=datetime(2026, 3, 9, tzinfo=UTC)
)
KEEP_OLD = rec("decision", 2, KEEP.text, status="superseded", superseded_by="DEC-0005", decided_by=["u1@x"])


def test_an_answer_resting_on_a_doubtful_record_says_so_and_a_sure_one_does_not():
    maybe = rec("decision", 7, "Archive boxes go to the basement store", decided_by=["u1@x"])
    doubtful = dataclasses.replace(maybe, confidence=0.35)
    hedged = answer("What did we decide about the archive boxes?", [doubtful])
    assert first_sentence(hedged).startswith("Archive boxes go to the basement store")
    assert "some doubt" in hedged and "merely proposed" in hedged
    assert "doubt" not in answer("What did we decide about the archive boxes?", [maybe])


def test_the_form_follows_the_question():
    assert form_of("Who is moving the archive, and by when?") == "who"
    assert form_of("Why are invoices kept for ten years?") == "why"
    assert form_of("What is holding up the archive move?") == "blocks"
    assert form_of("When is the archive move due?") == "when"
    assert form_of("Is the archive move done yet?") == "status"
    assert form_of("What did we settle on for invoice retention?") == "what"


def test_who_is_answered_by_owner_and_deadline_in_the_first_sentence():
    text = answer("Who is moving the invoice archive?", [MIGRATE])
    first = first_sentence(text)
    assert first.startswith("Nadia Okafor is to move the invoice archive onto cold storage")
    assert "the 13th of March" in first and "ACT-0004" in first


def test_a_deadline_the_task_already_names_is_not_said_twice():
    named = dataclasses.replace(MIGRATE, text="Nadia to move the invoice archive onto cold storage by Friday the 13th")
    text = answer("Who is moving the invoice archive?", [named])
    assert first_sentence(text).startswith("Nadia Okafor is to move the invoice archive onto cold storage by Friday")
    assert "the 13th of March" not in text and text.count("13th") == 1


def test_a_weekday_the_task_names_gets_the_date_beside_it_instead_of_a_second_deadline():
    named = dataclasses.replace(MIGRATE, text="Nadia to move the invoice archive onto cold storage by Friday")
    first = first_sentence(answer("Who is moving the invoice archive?", [named]))
    assert "by Friday the 13th of March" in first, first
    assert first.count("13th") == 1
    for said in ("by next Friday", "by Fri"):
        named = dataclasses.replace(MIGRATE, text=f"Nadia to move the invoice archive onto cold storage {said}")
        first = first_sentence(answer("Who is moving the invoice archive?", [named]))
        assert f"{said} the 13th of March" in first and first.count("13th") == 1, first
    other = dataclasses.replace(MIGRATE, text="Nadia to move the invoice archive onto cold storage by Monday")
    assert "by Monday (ACT-0004), by the 13th of March" in first_sentence(answer("Who is moving it?", [other]))


def test_a_deadline_said_relative_to_its_day_is_answered_with_the_date_in_its_place():
    for said in ("by end of this week", "by EOD", "today", "until the end of this month"):
        named = dataclasses.replace(MIGRATE, text=f"Nadia to move the invoice archive onto cold storage {said}")
        first = first_sentence(answer("Who is moving the invoice archive?", [named]))
        assert "onto cold storage by the 13th of March (ACT-0004)." in first, first
    named = dataclasses.replace(MIGRATE, text="Nadia to move the invoice archive onto cold storage by EOD")
    listed = listing(QueryPlan(record_types=["action"], owner_ids=["u1@x"]), [named], HERE).text
    assert "to move the invoice archive onto cold storage by the 13th of March (ACT-0004)" in listed, listed
    assert listed.count("13th") == 1
    named = dataclasses.replace(MIGRATE, text="Nadia to move the invoice archive onto cold storage by Fri")
    listed = listing(QueryPlan(record_types=["action"], owner_ids=["u1@x"]), [named], HERE).text
    assert "onto cold storage by Fri the 13th of March (ACT-0004)" in listed, listed


def test_dates_are_the_asking_channel_s_days():
    """17:00 UTC on the 13th of March is already the 14th in Auckland: an answer there says the 14th, and so
    does the pack the model reads."""
    here = dataclasses.replace(HERE, timezone="Pacific/Auckland")
    pack = ContextPack(question="Who is moving the invoice archive?", layers={"all": [MIGRATE]}, ranked=[MIGRATE])
    assert "the 14th of March" in offline_answer(QueryPlan(), pack, [], [MIGRATE], here).text
    assert "due the 14th of March" in render(MIGRATE, ZoneInfo("Pacific/Auckland"))
    assert "due the 13th of March" in render(MIGRATE)


def test_a_done_action_says_when_it_was_done():
    done = rec(
        "action", 6, "Nadia to label the archive boxes", status="done", owner_name="Nadia Okafor",
        completed_at=datetime(2026, 3, 11, 9, tzinfo=UTC),
    )  # fmt: skip
    text = answer("Has the labelling been finished?", [done])
    assert first_sentence(text).startswith("That is done: Nadia Okafor undertook to label the archive boxes")
    assert "it was done on the 11th of March" in text


def test_a_task_names_its_owner_once_whichever_part_of_the_name_they_go_by():
    """A person called by the last part of their name (a given name said last) is still the task's owner: the
    answer says "<full name> is to …", not "<full name> has it in hand: <name> to …"."""
    called = rec("action", 9, "Thu to reprint the shelf labels", status="open", owner_name="Pham Minh Thu")
    text = answer("Who is reprinting the shelf labels?", [called])
    assert first_sentence(text).startswith("Pham Minh Thu is to reprint the shelf labels"), text
    assert "has it in hand" not in text


def test_a_task_glossed_in_parentheses_takes_its_reference_inside_them():
    glossed = rec(
        "action", 7, "Nadia to sign off (the archive needs two more shelving units)", status="open",
        owner_name="Nadia Okafor",
    )  # fmt: skip
    text = answer("Who signs off the shelving?", [glossed])
    assert "to sign off (the archive needs two more shelving units; ACT-0007)" in text, text
    assert ") (" not in text


def test_a_decision_leads_with_what_was_decided_who_and_when():
    text = answer("What did we decide about old invoices?", [KEEP])
    assert text.startswith("Invoices older than seven years are kept in cold storage (DEC-0002, decided on the 3rd")
    assert "by Nadia Okafor" in first_sentence(text)


def test_asked_when_a_decision_that_names_its_day_leads_with_it():
    dated = rec("decision", 8, "The archive audit is on Tuesday 24 March, in the records room", decided_by=["u1@x"])
    text = answer("When is the archive audit?", [dated])
    assert text.startswith(
        "The archive audit is on Tuesday 24 March, in the records room (DEC-0008, decided on the 3rd"
    )
    # One that names no day of its own: the day it was decided is what there is to say.
    assert answer("When did we settle the invoice rule?", [KEEP]).startswith("That was decided on the 3rd of March")


def test_temporal_answer_gives_the_current_state_then_what_changed():
    text = answer("How long do we keep invoices now?", [KEEP_LONGER, KEEP_OLD])
    assert text.startswith("Invoices are kept for ten years, to match the auditors' rule (DEC-0005, since the 9th")
    assert "It replaced DEC-0002 of the 3rd of March: Invoices older than seven years" in text
    original = answer("What was the original retention rule?", [KEEP_OLD, KEEP_LONGER])
    assert original.startswith(
        "Originally: Invoices older than seven years are kept in cold storage (DEC-0002, the 3rd"
    )
    assert "Since the 9th of March: Invoices are kept for ten years" in original


def test_a_decision_cited_beside_another_says_whether_it_came_later_or_earlier():
    later = answer("What did we decide about invoices?", [KEEP, KEEP_LONGER])
    assert "Later, on the 9th of March: Invoices are kept for ten years" in later
    earlier = answer("What did we decide about invoices?", [KEEP_LONGER, KEEP])
    assert "Earlier, on the 3rd of March: Invoices older than seven years" in earlier
    same_day = rec("decision", 6, "Scanned invoices are shredded after upload")
    assert "Also decided, on the 3rd of March: Scanned invoices" in answer("Invoices?", [KEEP, same_day])


def test_contradicting_decisions_are_named_gently():
    rival = rec("decision", 7, "Invoices are deleted after five years", at=datetime(2026, 3, 12, tzinfo=UTC))
    text = answer("How long do we keep invoices?", [KEEP, rival], contradictions=[(rival, KEEP)])
    assert f"{CONTRADICTION} DEC-0007 (the 12th of March): Invoices are deleted after five years." in text
    assert "Both are still in force; shall I mark one of them as superseded?" in text


def test_no_scaffolding_no_bullets_no_exclamations():
    blocker = rec("signal", 9, "The cold-storage bucket is still waiting on a security review", status="blocker")
    text = answer("Who is moving the invoice archive?", [MIGRATE, blocker])
    assert "One notes a blocker on the 3rd of March: The cold-storage bucket is still waiting" in text
    assert not any(s in text for s in SCAFFOLDING) and "!" not in text
    assert answer("Who is moving the invoice archive?", []) == NO_RECORD


def test_only_records_close_to_the_best_are_cited_and_never_more_than_three():
    records = [rec("decision", n, f"Shelf {n} holds the {n}th box") for n in range(1, 7)]
    scores = {r.key: 1.0 - 0.02 * i for i, r in enumerate(records)}
    assert len(cite(records, scores, margin=0.5)) == MAX_CITED == 3
    scores = {records[0].key: 1.2, records[1].key: 1.1, records[2].key: 0.6}
    assert [r.friendly_id for r in cite(records[:3], scores, margin=0.15)] == ["DEC-0001", "DEC-0002"]
    # The decision the best one replaced is cited with it, however it scores, current first.
    scores = {KEEP_OLD.key: 1.0, MIGRATE.key: 0.95, KEEP_LONGER.key: 0.2}
    assert cite([KEEP_OLD, MIGRATE, KEEP_LONGER], scores, margin=0.15)[:2] == [KEEP_LONGER, KEEP_OLD]
    # A record saying what a cited one says (a decision and the task stored from one sentence) is left out.
    said = "From next month Priya sends the freezer temperature log here every Monday"
    twins = [
        rec("action", 5, said, status="open"),
        rec("decision", 6, said),
        rec("decision", 7, "Shelf 7 is for dry goods"),
    ]
    scores = {r.key: 1.0 - 0.01 * i for i, r in enumerate(twins)}
    assert [r.key for r in cite(twins, scores, margin=0.15)] == [twins[0].key, twins[2].key]
    # A question that is not about records gets none: what is not citable never answers.
    assert cite([rec("signal", 3, "Is the archive ready?", status="question")], {}, margin=0.15) == []


def test_dates_are_spoken():
    at = datetime(2026, 3, 1, tzinfo=UTC)
    spoken = [approx_date(at.replace(day=d), NOW) for d in (1, 2, 3, 11, 12, 13, 21, 22, 23, 31)]
    assert spoken == [
        "the 1st of March", "the 2nd of March", "the 3rd of March", "the 11th of March", "the 12th of March",
        "the 13th of March", "the 21st of March", "the 22nd of March", "the 23rd of March", "the 31st of March",
    ]  # fmt: skip
    assert approx_date(datetime(2025, 12, 24, tzinfo=UTC), NOW) == "the 24th of December 2025"


def test_a_model_answer_is_checked_against_the_pack():
    pack = ContextPack(question="q", layers={"all": [MIGRATE, KEEP]}, ranked=[MIGRATE, KEEP])
    fine = ModelAnswer(
        answer="Nadia Okafor has the archive move, due the 13th of March (ACT-0004).", cited=["ACT-0004"]
    )
    assert unchecked(fine, pack) is None
    assert unchecked(ModelAnswer(answer=NO_RECORD, cited=[]), pack) is None
    assert unchecked(fine.model_copy(update={"cited": ["ACT-0004", "DEC-0099"]}), pack) == (
        "cites a record that is not in the pack"
    )
    assert unchecked(fine.model_copy(update={"cited": []}), pack) == "cites nothing"
    quote = "As noted, invoices older than seven years are kept in cold storage for good."
    assert unchecked(ModelAnswer(answer=quote, cited=["DEC-0002"]), pack) == "quotes the records"
