"""Deadline phrases resolved to channel-local dates, per the evalset conventions."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from pipeline.offline.deadlines import local_date, resolve

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
        ("by end of month", date(2026, 3, 31)),
        ("give me 10 mins", None),
        ("no date at all", None),
        ("", None),
    ],
)
def test_resolves_phrases_against_the_message_date(phrase: str, expected: date | None) -> None:
    assert resolve(phrase, MONDAY) == expected


def test_local_date_uses_the_channel_timezone() -> None:
    late_utc = datetime(2026, 3, 30, 22, 30, tzinfo=UTC)
    assert local_date(late_utc, "Australia/Sydney") == date(2026, 3, 31)
    assert local_date(late_utc, "America/New_York") == date(2026, 3, 30)
    assert local_date(late_utc, "Not/AZone") == date(2026, 3, 30)
