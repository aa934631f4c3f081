"""Deadline phrases resolved to channel-local dates, per the evalset conventions."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from pipeline.offline.deadlines import known, local_date, moves, resolve

MONDAY = date(2026, 3, 2)


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("I'll have it done today", date(2026, 3, 2)),
        ("by EOD", date(2026, 3, 2)),
        ("before the 2pm run", date(2026, 3, 2)),
        ("tomorrow morning", date(2026, 3, 3)),
        ("the revised figures by end of day tomorrow", date(2026, 3, 3)),
        ("tomorrow EOD at the latest", date(2026, 3, 3)),
        ("signed copy back to them by COB", date(2026, 3, 2)),
        ("before close of business please", date(2026, 3, 2)),
        ("by lunchtime", date(2026, 3, 2)),
        ("by Friday?", date(2026, 3, 6)),
        ("draft by Weds", date(2026, 3, 4)),
        ("sometime this week", date(2026, 3, 6)),
        ("by next Friday", date(2026, 3, 13)),
        ("end of next week", date(2026, 3, 13)),
        ("Wednesday next week", date(2026, 3, 11)),
        ("by the 13th", date(2026, 3, 13)),
        ("before the 14th", date(2026, 3, 13)),
        ("before May 1", date(2026, 4, 30)),
        ("the numbers before the steering call on the 20th", date(2026, 3, 19)),
        ("ahead of the 9 April audit", date(2026, 4, 8)),
        ("sign-off before the launch on the 11th", date(2026, 3, 10)),
        ("until Apr 16 for the page", date(2026, 4, 16)),
        # A month named between "before" and the day is that month's day, not this month's.
        ("hoping to wrap the audit trail up before June 5th", date(2026, 6, 4)),
        ("the banners printed well before the 3rd of April", date(2026, 4, 2)),
        ("by end of month", date(2026, 3, 31)),
        # A weekday with "a" or "every" names no date.
        ("let's grab a standing Wednesday slot for the demo", None),
        ("the window cleaners come every Thursday", None),
        ("I'll get a Thursday draft to you by Wednesday", date(2026, 3, 4)),
        # A time of day after (or before) a day belongs to that day.
        ("the slides by Thursday EOD please", date(2026, 3, 5)),
        ("could be Tuesday noon at a push", date(2026, 3, 3)),
        ("EOD Wednesday works for the budget sheet", date(2026, 3, 4)),
        ("the deck goes to finance tomorrow by 17h, I'll send it", date(2026, 3, 3)),
        # A weekday with its day of the month is that date.
        ("their new cutoff is fri the 13th for the catalogue", date(2026, 3, 13)),
        ("engineers rebooked for tue 24, 07:00", date(2026, 3, 24)),
        # Same-day phrases of an incident.
        ("I can have the patch in by 4", date(2026, 3, 2)),
        ("rolling it back within the hour", date(2026, 3, 2)),
        ("I'll restart the queue after lunch", date(2026, 3, 2)),
        # The first date said as a deadline, else the first date, in the order they are said.
        ("the report is reviewed by the 9th, so the board sees it before the 16th", date(2026, 3, 9)),
        ("clear the cache today, the audit is tomorrow", date(2026, 3, 2)),
        ("the venue opens on 20 March; the flyers have to be printed by end of month", date(2026, 3, 31)),
        # What is no deadline: negated, possessive, past, a start, a lower bound, a condition.
        ("the invoices tonight please, not tomorrow morning", date(2026, 3, 2)),
        ("can we rehearse tomorrow's demo this afternoon?", date(2026, 3, 2)),
        ("tomorrow's standup is cancelled", None),
        # ... but a possessive date the task has to be in, or be ready for, is when it is due.
        ("the fix should ship in tomorrow's release", date(2026, 3, 3)),
        ("the handouts ready for Thursday's workshop", date(2026, 3, 5)),
        # A weekday said with its day of the month names the month where they agree.
        ("could we aim for Thursday the 2nd?", date(2026, 4, 2)),
        ("the van is booked for Sat 14th", date(2026, 3, 14)),
        # Today's own date, said with its month, is today (not a year on).
        ("the payroll file goes to the bank on 2 March", date(2026, 3, 2)),
        ("a dozen tickets since Friday", None),
        ("I will begin on Wednesday", None),
        ("the vendor says next week at the earliest", None),
        ("if the data lands by Tuesday I can publish Thursday", date(2026, 3, 5)),
        # "before then": the day before the date just named.
        ("the auditors arrive on the 12th, I need the ledger before then", date(2026, 3, 11)),
        # "now" is today, as the conventions say; not "for now", "from now on", "just now" or a sentence's "Now, ...".
        ("rebooking the courier now", date(2026, 3, 2)),
        ("ring the landlord now please", date(2026, 3, 2)),
        ("leave the old rota in place for now", None),
        ("from now on the gate code changes monthly", None),
        ("the invoice landed just now", None),
        ("Now, the catering question", None),
        # An hour of the day said for doing it is today; a figure after "at" is no hour.
        ("switching the old site off at 6 and I'll confirm", date(2026, 3, 2)),
        ("the call with the printers at 3:30pm", date(2026, 3, 2)),
        ("prices rise at 4% a year", None),
        # "before 6" is an hour as "by 6" is; a figure with a unit after it is none.
        ("I'll have the rota printed before 6", date(2026, 3, 2)),
        ("the queue was quiet before 6 weeks of promotions", None),
        ("give me 10 mins", None),
        ("cut the budget by 5 percent", None),
        ("no date at all", None),
        ("", None),
    ],
)
def test_resolves_phrases_against_the_message_date(phrase: str, expected: date | None) -> None:
    assert resolve(phrase, MONDAY) == expected


SPRINTS = [("heads-up for planning: sprint 8 runs Mar 2-13, sprint 9 is 16 to 27 March", MONDAY)]


@pytest.mark.parametrize(
    ("phrase", "said_before", "expected"),
    [
        # A sprint said as a date, once the channel stated the sprints' dates: its last working day.
        ("can the import be wrapped up by end of sprint?", SPRINTS, date(2026, 3, 13)),
        ("let's push the badge redesign to next sprint", SPRINTS, date(2026, 3, 27)),
        ("everything merged at the end of sprint 9", SPRINTS, date(2026, 3, 27)),
        ("the migration cost us a sprint", SPRINTS, None),
        ("can the import be wrapped up by end of sprint?", [], None),
        ("in the next sprint then", [("FYI the next sprint is 16-27 March", MONDAY)], date(2026, 3, 27)),
        ("by sprint end please", [("sprint 12 ends Friday Mar 13", MONDAY)], date(2026, 3, 13)),
        ("before sprint 4 closes", [("sprint 4 runs Mar 2 to Mar 15", MONDAY)], date(2026, 3, 13)),
        # A bare day of the month is the one the channel just named with its month.
        ("I'll have the badges printed by the 9th", [("the new hires join on 9 April", MONDAY)], date(2026, 4, 9)),
        ("I'll have the badges printed by the 9th", [], date(2026, 3, 9)),
        ("the floor plan before he joins on the 6th", [("his first day is Apr 6", MONDAY)], date(2026, 4, 5)),
    ],
)
def test_resolves_phrases_against_what_the_channel_said_before(phrase, said_before, expected) -> None:
    assert resolve(phrase, MONDAY, known=known(said_before)) == expected


def test_only_dates_said_as_deadlines_when_asked_for() -> None:
    assert resolve("the fair runs on 20 March", MONDAY) == date(2026, 3, 20)
    assert resolve("the fair runs on 20 March", MONDAY, marked_only=True) is None
    assert resolve("the posters are due by Wednesday", MONDAY, marked_only=True) == date(2026, 3, 4)


@pytest.mark.parametrize(
    ("text", "moved"),
    [
        ("the vendor audit slips to the 20th", True),
        ("not done yet, sorry. Tuesday.", True),
        ("new deadline for the survey is Friday", True),
        ("survey results attached", False),
    ],
)
def test_a_message_that_moves_a_date(text: str, moved: bool) -> None:
    assert moves(text) is moved


def test_local_date_uses_the_channel_timezone() -> None:
    late_utc = datetime(2026, 3, 30, 22, 30, tzinfo=UTC)
    assert local_date(late_utc, "Australia/Sydney") == date(2026, 3, 31)
    assert local_date(late_utc, "America/New_York") == date(2026, 3, 30)
    assert local_date(late_utc, "Not/AZone") == date(2026, 3, 30)
