"""Deadline phrases → channel-local calendar dates, resolved against the local date of the message.

Follows the evalset conventions (today/EOD/tonight → same day, "by Friday" → next such weekday,
"this week" → Friday, "next Friday"/"end of next week" → the following week, "before the 14th"
(or "before the review on the 14th", "ahead of the 14 May launch")
→ the 13th, "end of month" → its last day); explicit dates go through `dateparser`.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_WEEKDAYS = {
    "mon": 0,
    "tue": 1,
    "tues": 1,
    "wed": 2,
    "weds": 2,
    "thu": 3,
    "thur": 3,
    "thurs": 3,
    "fri": 4,
    "sat": 5,
    "sun": 6,
}
_WD = r"(?:mon|tue|tues|wed|weds|thu|thur|thurs|fri|sat|sun)(?:day|nesday|sday|rsday|urday)?\b"
_MONTHS = (
    r"(?:jan|january|feb|february|mar|march|apr|april|may|jun|june|jul|july|aug|august"
    r"|sep|sept|september|oct|october|nov|november|dec|december)\b"
)
_ORD = r"(\d{1,2})(?:st|nd|rd|th)"

_SAME_DAY = re.compile(
    r"\b(today|tonight|eod|end of (the )?day|this (morning|afternoon|evening)|before the \d{1,2}(:\d\d)? ?(am|pm)\b"
    r"|by \d{1,2}(:\d\d)? ?(am|pm)|by lunch(time)?|(by )?close of (play|business)|cop|cob|eob)\b"
)
_TOMORROW = re.compile(r"\b(tomorrow|tmrw|tmr)\b")
_NEXT_WEEKDAY = re.compile(rf"\b(next {_WD}|{_WD} next week|end of next week|next week)\b")
_THIS_WEEK = re.compile(r"\b(this week|end of (the )?week|eow)\b")
_END_OF_MONTH = re.compile(r"\b(end of (the )?month|eom|month[- ]end)\b")
# "before the 14th", "before the review on the 14th", "ahead of go-live on 3 May": the day before.
_BEFORE = r"\b(?:before|ahead of)(?: (?![\d])[\w'-]+){0,4}?(?: on| by)?"
_BEFORE_ORD = re.compile(rf"{_BEFORE} (the )?{_ORD}\b")
_BEFORE_DATE = re.compile(rf"{_BEFORE} (?:the )?({_MONTHS} \d{{1,2}}|\d{{1,2}} {_MONTHS})\b")
_EXPLICIT = re.compile(
    rf"\b(?:by|until|till|on|due|for|before|deadline|from)?\s*(?:{_WD} )?(?:the )?({_MONTHS} \d{{1,2}}(?:st|nd|rd|th)?"
    rf"|\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTHS})\b"
)
_BY_ORD = re.compile(rf"\b(?:by|until|till|on|due|for) (?:{_WD} )?the {_ORD}\b")
_WEEKDAY = re.compile(rf"\b(?:by |on |until |till |before |for )?({_WD})")


def local_date(ts: datetime, timezone: str) -> date:
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        zone = ZoneInfo("UTC")
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=ZoneInfo("UTC"))
    return ts.astimezone(zone).date()


def _weekday_index(token: str) -> int | None:
    token = token.lower()
    for prefix in sorted(_WEEKDAYS, key=len, reverse=True):
        if token.startswith(prefix):
            return _WEEKDAYS[prefix]
    return None


def _next_weekday(today: date, weekday: int) -> date:
    ahead = (weekday - today.weekday()) % 7
    return today + timedelta(days=ahead or 7)


def _following_week(today: date, weekday: int) -> date:
    monday_next = today - timedelta(days=today.weekday()) + timedelta(days=7)
    return monday_next + timedelta(days=weekday)


def _month_day(today: date, day: int) -> date | None:
    """The next date with that day of month, this month if still ahead (or today)."""
    year, month = today.year, today.month
    for _ in range(3):
        if day <= calendar.monthrange(year, month)[1]:
            candidate = date(year, month, day)
            if candidate >= today:
                return candidate
        month += 1
        if month > 12:
            year, month = year + 1, 1
    return None


def _parse_explicit(phrase: str, today: date) -> date | None:
    import dateparser

    parsed = dateparser.parse(
        phrase,
        languages=["en"],
        settings={"PREFER_DATES_FROM": "future", "RELATIVE_BASE": datetime(today.year, today.month, today.day)},
    )
    if parsed is None:
        return None
    result = parsed.date()
    # A date well in the past with no year given means next year's.
    if result < today - timedelta(days=60):
        result = result.replace(year=result.year + 1)
    return result


def resolve(text: str, today: date) -> date | None:
    """The deadline `text` states, as a local date, or None when it states none."""
    lowered = (text or "").lower().replace("\u2019", "'")
    if not lowered.strip():
        return None
    if m := _BEFORE_ORD.search(lowered):
        day = _month_day(today, int(m.group(2)))
        return day - timedelta(days=1) if day else None
    if m := _BEFORE_DATE.search(lowered):
        parsed = _parse_explicit(m.group(1), today)
        return parsed - timedelta(days=1) if parsed else None
    if m := _BY_ORD.search(lowered):
        return _month_day(today, int(m.group(1)))
    if m := _EXPLICIT.search(lowered):
        parsed = _parse_explicit(m.group(1), today)
        if parsed:
            return parsed
    if _END_OF_MONTH.search(lowered):
        return date(today.year, today.month, calendar.monthrange(today.year, today.month)[1])
    if m := _NEXT_WEEKDAY.search(lowered):
        phrase = m.group(0)
        named = re.search(_WD, phrase)
        weekday = _weekday_index(named.group(0)) if named else 4
        return _following_week(today, 4 if weekday is None else weekday)
    if _TOMORROW.search(lowered):  # "end of day tomorrow", "tomorrow EOD": tomorrow
        return today + timedelta(days=1)
    if _SAME_DAY.search(lowered):
        return today
    if _THIS_WEEK.search(lowered):
        friday = today - timedelta(days=today.weekday()) + timedelta(days=4)
        return friday if friday >= today else today
    if m := _WEEKDAY.search(lowered):
        weekday = _weekday_index(m.group(1))
        if weekday is not None:
            return _next_weekday(today, weekday)
    return None
