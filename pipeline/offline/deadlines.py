"""Deadline phrases → channel-local calendar dates, resolved against the local date of the message.

Follows the evalset conventions (today/EOD/tonight → same day, "by Friday" → next such weekday,
"this week" → Friday, "next Friday"/"end of next week" → the following week, "before the 14th"
(or "before the review on the 14th", "ahead of the 14 May launch")
→ the 13th, "end of month" → its last day); explicit dates go through `dateparser`.

A message can name several dates; `phrases` finds every one with where it stands, and `resolve`
picks: the first one said as a deadline ("by …", "before …", "… at the latest", "EOD"), else the
first one. General English decides what is no deadline: a negated date ("tonight, not tomorrow"),
a possessive ("tomorrow's session"), a past one ("since Friday", "last Tuesday", "two days ago"), a
start or a lower bound ("starting Monday", "next week at the earliest"), and the condition of
another date ("if I get it by Wednesday I can ship Thursday"). A time of day after a day belongs to
that day ("Wednesday EOD", "Thursday noon", "fri 5pm"). With `marked_only`, only dates said as a
deadline count (for the parts of a message that are not the task itself).

What the channel said before a message (`known`) settles what the message alone cannot: a sprint's end
("by end of sprint", "next sprint", "end of sprint 32", once the sprints' dates were stated: its last
working day), and the month of a bare day of the month ("ahead of his first day on the 9th" after "he
joins on 9 March"). A weekday said with its day of the month names the month where they agree ("Saturday
the 24th" in a month whose 24th is a Thursday is the next month's).
"""

from __future__ import annotations

import calendar
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
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
_HOUR = r"\d{1,2}(?::\d\d)?\s*(?:am|pm|h\b)|noon|midday"

# Same local day. "by 3", "before 6" (an hour, nothing after it that makes it a quantity) and "in an hour" too.
_SAME_DAY = re.compile(
    r"\b(?:today|tonight|eod|end of (?:the )?day|this (?:morning|afternoon|evening)"
    r"|before the \d{1,2}(?::\d\d)? ?(?:am|pm)\b"
    rf"|(?:by|before|until|till) (?:{_HOUR})"
    r"|(?:by|before) \d{1,2}(?::\d\d)?(?=\s*(?:$|[.,!?;)]|and\b|or\b|latest\b|at the latest))"
    r"|(?:by |after )lunch(?:time)?|(?:by )?close of (?:play|business)|cop|cob|eob"
    r"|(?:with)?in (?:an|the next|the|one|two|three|a couple of|\d{1,2}) (?:hours?|hrs?|minutes|mins)"
    r"|within the hour|right now|now now"
    # "read-only at 5", "on it at 4:30pm", "at noon": an hour of the day said for doing it, nothing after it that
    # makes it a quantity ("at 5%", "at 5 stores").
    rf"|at (?:{_HOUR}|\d{{1,2}}(?::\d\d)?(?=\s*(?:$|[.,!?;)]|and\b|or\b|today\b|tonight\b|sharp\b)))"
    # "doing it now", "call them now pls": at once, today. Not a sentence's "Now, …", nor "for now" (meanwhile),
    # "from now on", "just now" / "until now" (the past), "by now", "now that …".
    r"|(?<=\w )(?<!for )(?<!from )(?<!just )(?<!until )(?<!till )(?<!by )(?<!as of )now(?! that\b| on\b| and then\b))\b"
)
_TOMORROW = re.compile(r"\b(?:tomorrow|tmrw|tmr)\b")
_NEXT_WEEKDAY = re.compile(rf"\b(?:next {_WD}|{_WD} next week|end of next week|next week)")
_THIS_WEEK = re.compile(r"\b(?:this week|end of (?:the )?week|eow)\b")
_END_OF_MONTH = re.compile(r"\b(?:end of (?:the )?month|eom|month[- ]end)\b")
# "before the 14th", "before the review on the 14th", "ahead of go-live on 3 May": the day before.
# The words between are not a month's name: "before April 10th" is the 9th of April, not of this month.
_BEFORE = rf"\b(?:before|ahead of)(?: (?![\d]|{_MONTHS})[\w'-]+){{0,4}}?(?: on| by)?"
_BEFORE_ORD = re.compile(rf"{_BEFORE} (?:the )?{_ORD}\b")
_BEFORE_DATE = re.compile(
    rf"{_BEFORE} (?:the )?({_MONTHS} \d{{1,2}}(?:st|nd|rd|th)?|\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTHS})\b"
)
_BEFORE_THEN = re.compile(r"\b(?:before|ahead of) (?:then|that)\b")
_EXPLICIT = re.compile(
    rf"\b(?:{_WD},? )?(?:the )?({_MONTHS} \d{{1,2}}(?:st|nd|rd|th)?(?!\d)|\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTHS})"
)
_BY_ORD = re.compile(rf"\b(?:by|until|till|on|due|for) (?:{_WD} )?the {_ORD}\b")
# "wed the 20th", "Friday the 17th", "mon 20": that day of the month.
_WEEKDAY_ORD = re.compile(rf"\b{_WD},? (?:the )?(\d{{1,2}})(?:st|nd|rd|th)?\b(?!\s*(?::|\.\d|am|pm|h\b|%|x\b))")
_WEEKDAY = re.compile(rf"\b({_WD})")

# Said as a deadline: one of these words before it (a few characters before, or "by the end of" right before), or
# "at the latest" after it.
_DEADLINE_WORDS = r"by|before|until|till|due|deadline|cut-?off|latest|ahead of|no later than|in time for"
_MARK_BEFORE = re.compile(
    rf"(?:\b(?:{_DEADLINE_WORDS})\b[^.!?;,]{{0,12}}|\b(?:by|due|until|till)\s+(?:the\s+)?(?:end of\s+)?)$"
)
_MARK_AFTER = re.compile(r"^\W{0,3}(?:at the latest|latest|tops|max)\b")
_MARKED_ITSELF = re.compile(r"^(?:eod|eob|cob|cop|end of|close of|before|ahead of|by\b|this week)")
# What makes a date no deadline.
_NEGATED = re.compile(r"\b(?:not|no|instead of|rather than|never)\s+(?:on\s+|by\s+|until\s+)?$")
_PAST = re.compile(r"\b(?:since|last|from last|until last|earlier)\s+(?:on\s+)?$|\byesterday\b[^.!?]{0,10}$")
_START = re.compile(
    r"\b(?:start|starts|starting|started|begin|begins|beginning|kick(?:s|ing)? off)\b(?:\W+\w+){0,3}?\W+(?:on\s+)?$"
    r"|\bfrom\s+$"
)
# An indefinite weekday is no date: "a Tuesday slot", "every Friday", "a standing Monday call".
_INDEFINITE = re.compile(r"\b(?:an?|every|each|any)\s+(?:(?:standing|regular|recurring|weekly|usual|normal)\s+)?$")
_AFTER_NOT = re.compile(r"^\W{0,3}(?:ago|at the earliest|earliest|onwards?)\b")
# A possessive date after these words is when the task is due: "the fix goes into Friday's release".
_IN_TIME_FOR = re.compile(r"\b(?:in|into|for|by|before|ahead of|in time for)\s+$")
_CONDITION = re.compile(r"\b(?:if|once|as soon as|assuming|provided)\b[^.!?;,]*$")


@dataclass(frozen=True)
class Phrase:
    """A date a text names: where it stands, the day, whether it is said as a deadline."""

    start: int
    end: int
    day: date
    marked: bool


@dataclass(frozen=True)
class Sprint:
    """A sprint whose dates the channel stated: its number if it has one, its first day if said, its last."""

    number: int | None
    start: date | None
    end: date


@dataclass(frozen=True)
class Known:
    """What the channel said before a message that its phrases may refer to: sprints' dates, and the dates
    it named with their month ("go-live is 14 May")."""

    sprints: tuple[Sprint, ...] = ()
    dates: tuple[date, ...] = ()


NOTHING_KNOWN = Known()

_SPRINT_NAMED = re.compile(r"\b(?:(?:the|next|this|current)\s+)?sprint(?:\s*#?(\d+))?\b")
_DASH = r"\s*(?:-|\u2013|\u2014|to|until|till|through|thru)\s*"
# "runs Mar 2-13", "is 16 March to 27 March", ": 2\u201313 March", "(May 4 - May 15)": a range after the sprint.
_LEAD = r"^[\s:=(,-]*(?:(?:runs?|running|is|will|be|goes|going|from|dates?|are|will run)\s+){0,3}"
_RANGE_MONTH_FIRST = re.compile(
    rf"{_LEAD}(?P<m1>{_MONTHS})\.? (?P<d1>\d{{1,2}})(?:st|nd|rd|th)?{_DASH}"
    rf"(?:(?P<m2>{_MONTHS})\.? )?(?P<d2>\d{{1,2}})(?!\d)"
)
_RANGE_DAY_FIRST = re.compile(
    rf"{_LEAD}(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?(?: (?:of )?(?P<m1>{_MONTHS}))?{_DASH}"
    rf"(?P<d2>\d{{1,2}})(?:st|nd|rd|th)? (?:of )?(?P<m2>{_MONTHS})"
)
_ENDS = re.compile(rf"^[\s,]*(?:ends|finishes|closes|wraps(?: up)?)\s+(?:on\s+)?(?:{_WD},?\s+)?(?:the\s+)?")
# A sprint said as a date: its end ("by end of sprint", "the sprint end", "end of sprint 32", "next sprint").
_SPRINT_DATE = re.compile(
    r"\b(?:(?:the\s+)?end of\s+(?:the\s+)?)?(?:(?P<rel>next|this|current)\s+)?sprint(?:\s*#?(?P<n>\d+))?"
    r"(?P<tail>'s end|\s+end)?\b"
)


def _month_number(token: str) -> int:
    return [m.lower() for m in calendar.month_abbr[1:]].index(token[:3].lower()) + 1


def _day_in(said_on: date, month: int, day: int) -> date | None:
    """That day of that month, the year the statement was made in (the next one if it lies well before it)."""
    for year in (said_on.year, said_on.year + 1):
        try:
            found = date(year, month, day)
        except ValueError:
            return None
        if found >= said_on - timedelta(days=60):
            return found
    return None


def _sprint_range(tail: str, said_on: date) -> tuple[date | None, date] | None:
    """The first and last day of a sprint stated at the start of `tail`, or only the last ("ends Friday Jun 12")."""
    for pattern in (_RANGE_MONTH_FIRST, _RANGE_DAY_FIRST):
        if m := pattern.match(tail):
            m2 = m.group("m2") or m.group("m1")
            m1 = m.group("m1") or m2
            end = _day_in(said_on, _month_number(m2), int(m.group("d2")))
            start = _day_in(said_on, _month_number(m1), int(m.group("d1")))
            if end is None or start is None:
                return None
            if start > end:
                start = start.replace(year=start.year - 1) if start.month > end.month else None
            return start, end
    if m := _ENDS.match(tail):
        explicit = _EXPLICIT.match(tail, m.end())
        if explicit and explicit.start() == m.end():
            end = _parse_explicit(explicit.group(1), said_on)
            return (None, end) if end else None
    return None


def known(said: Iterable[tuple[str, date]]) -> Known:
    """What messages said before one (text and local date each, oldest first) tell its phrases: the sprints
    whose dates they state ("sprint 7 runs Mar 2-13", "the next sprint is 16-27 March", "sprint 8 ends
    Friday Mar 27"; a later statement of the same sprint replaces an earlier one), and the dates they name
    with their month."""
    sprints: dict[object, Sprint] = {}
    dates: list[date] = []
    for text, said_on in said:
        one = _known_in((text or "").lower().replace("\u2019", "'"), said_on)
        sprints.update({s.number if s.number is not None else s.end: s for s in one.sprints})
        dates.extend(one.dates)
    return Known(tuple(sorted(sprints.values(), key=lambda s: s.end)), tuple(dates))


@functools.lru_cache(maxsize=4096)
def _known_in(lowered: str, said_on: date) -> Known:
    """What one message says (`known`), in the order it says it."""
    sprints: list[Sprint] = []
    for m in _SPRINT_NAMED.finditer(lowered):
        stop = _SPRINT_NAMED.search(lowered, m.end())
        found = _sprint_range(lowered[m.end() : stop.start() if stop else None], said_on)
        if found is not None:
            sprints.append(Sprint(int(m.group(1)) if m.group(1) else None, found[0], found[1]))
    dates = [day for m in _EXPLICIT.finditer(lowered) if (day := _parse_explicit(m.group(1), said_on)) is not None]
    return Known(tuple(sprints), tuple(dates))


def _last_working_day(day: date) -> date:
    return day - timedelta(days=max(0, day.weekday() - 4))


def _sprint_end(m: re.Match, today: date, known: Known) -> date | None:
    """The last working day of the sprint `m` names: its number's, the next one's, or the one under way."""
    said_end = m.group(0).startswith(("end of", "the end of")) or m.group("tail")
    if not (m.group("rel") or m.group("n") or said_end):
        return None  # "a sprint", "the sprint" alone: no date
    sprints = known.sprints
    if m.group("n"):
        found = [s for s in sprints if s.number == int(m.group("n"))]
    elif m.group("rel") == "next":
        current = [s for s in sprints if s.start is not None and s.start <= today <= s.end]
        numbered = current[0].number + 1 if current and current[0].number is not None else None
        found = [s for s in sprints if s.number is not None and s.number == numbered] or [
            s for s in sprints if s.start is not None and s.start > today
        ]
    else:
        found = [s for s in sprints if (s.start is None or s.start <= today) and today <= s.end]
    return _last_working_day(found[0].end) if found else None


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


def _month_day(today: date, day: int, weekday: int | None = None, known: Known = NOTHING_KNOWN) -> date | None:
    """The next date with that day of month, this month if still ahead (or today): the one the channel named
    with its month if it did ("Nov 2", then "the 2nd"), else the first whose weekday is the one said with it
    ("Saturday the 24th"), else the first."""
    named = [d for d in known.dates if d.day == day and today <= d <= today + timedelta(days=92)]
    named = [d for d in named if weekday is None or d.weekday() == weekday] or named
    if named:
        return min(named)
    year, month = today.year, today.month
    ahead = []
    for _ in range(3):
        if day <= calendar.monthrange(year, month)[1]:
            candidate = date(year, month, day)
            if candidate >= today:
                ahead.append(candidate)
        month += 1
        if month > 12:
            year, month = year + 1, 1
    agreeing = [d for d in ahead if weekday is None or d.weekday() == weekday]
    return (agreeing or ahead or [None])[0]


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
    # A date well in the past with no year given means next year's; today's own date is today, not a year on.
    if result < today - timedelta(days=60):
        result = result.replace(year=result.year + 1)
    elif (result.month, result.day) == (today.month, today.day) and not re.search(r"\b\d{4}\b", phrase):
        result = today
    return result


def _said_weekday(span: str) -> int | None:
    named = re.match(_WD, span.split(" the ")[-1]) or re.search(rf"\b{_WD}", span)
    return _weekday_index(named.group(0)) if named else None


def _candidates(text: str, today: date, known: Known = NOTHING_KNOWN) -> list[tuple[int, int, date | None, str]]:
    """Every date-like span as (start, end, day, kind); the day is None where it cannot be resolved."""
    out: list[tuple[int, int, date | None, str]] = []
    for m in _BEFORE_ORD.finditer(text):
        day = _month_day(today, int(m.group(1)), known=known)
        out.append((m.start(), m.end(), day - timedelta(days=1) if day else None, "before"))
    for m in _BEFORE_DATE.finditer(text):
        parsed = _parse_explicit(m.group(1), today)
        out.append((m.start(), m.end(), parsed - timedelta(days=1) if parsed else None, "before"))
    for m in _BEFORE_THEN.finditer(text):
        out.append((m.start(), m.end(), None, "before_then"))
    for m in _BY_ORD.finditer(text):
        day = _month_day(today, int(m.group(1)), _said_weekday(m.group(0)), known)
        out.append((m.start(), m.end(), day, "ordinal"))
    for m in _WEEKDAY_ORD.finditer(text):
        if 1 <= int(m.group(1)) <= 31:
            day = _month_day(today, int(m.group(1)), _said_weekday(m.group(0)), known)
            out.append((m.start(), m.end(), day, "ordinal"))
    if known.sprints:
        for m in _SPRINT_DATE.finditer(text):
            if _sprint_range(text[m.end() :], today) is None:  # not a statement of its dates
                out.append((m.start(), m.end(), _sprint_end(m, today, known), "sprint"))
    for m in _EXPLICIT.finditer(text):
        out.append((m.start(), m.end(), _parse_explicit(m.group(1), today), "explicit"))
    for m in _END_OF_MONTH.finditer(text):
        last = calendar.monthrange(today.year, today.month)[1]
        out.append((m.start(), m.end(), date(today.year, today.month, last), "month"))
    for m in _NEXT_WEEKDAY.finditer(text):
        named = re.search(_WD, m.group(0))
        weekday = _weekday_index(named.group(0)) if named else 4
        out.append((m.start(), m.end(), _following_week(today, 4 if weekday is None else weekday), "next"))
    for m in _TOMORROW.finditer(text):
        out.append((m.start(), m.end(), today + timedelta(days=1), "tomorrow"))
    for m in _SAME_DAY.finditer(text):
        out.append((m.start(), m.end(), today, "today"))
    for m in _THIS_WEEK.finditer(text):
        friday = today - timedelta(days=today.weekday()) + timedelta(days=4)
        out.append((m.start(), m.end(), friday if friday >= today else today, "week"))
    for m in _WEEKDAY.finditer(text):
        weekday = _weekday_index(m.group(1))
        if weekday is not None:
            out.append((m.start(), m.end(), _next_weekday(today, weekday), "weekday"))
    return out


def _clause_start(text: str, at: int) -> int:
    cut = max(text.rfind(c, 0, at) for c in ".!?;\n")
    return cut + 1


_BESIDE = re.compile(r"[\s,]*(?:at|by|around|before|on)?\s*")
_DEADLINE_WORD = re.compile(r"(?:by|before|until|till|eod|eob|cob|cop|end of|close of)\b")


def _spans(text: str, today: date, known: Known = NOTHING_KNOWN) -> list[tuple[int, int, date | None, str, bool]]:
    """The candidates of `text` in order, one per place (the longest match wins over those inside it),
    a time of day joined to the day beside it ("Wednesday EOD", "by end of day tomorrow"): then the
    day's, said as a deadline when the time was ("tomorrow by 5pm")."""
    found = sorted(_candidates(text, today, known), key=lambda c: (c[0], -(c[1] - c[0])))
    spans: list[tuple[int, int, date | None, str]] = []
    for cand in found:
        if not any(s <= cand[0] and cand[1] <= e for s, e, _, _ in spans):
            spans.append(cand)
    out: list[tuple[int, int, date | None, str, bool]] = []
    k = 0
    while k < len(spans):
        start, end, day, kind = spans[k]
        nxt = spans[k + 1] if k + 1 < len(spans) else None
        if kind == "today" and nxt and nxt[3] != "today" and _BESIDE.fullmatch(text[end : nxt[0]]):
            marked = bool(_DEADLINE_WORD.match(text[start:end]))
            out.append((start, nxt[1], nxt[2], nxt[3], marked))  # the time, then its day
            k += 2
            continue
        if kind == "today" and out and out[-1][3] != "today" and _BESIDE.fullmatch(text[out[-1][1] : start]):
            if _DEADLINE_WORD.match(text[start:end]):
                out[-1] = (*out[-1][:4], True)  # the day, then its time
            k += 1
            continue
        out.append((start, end, day, kind, False))
        k += 1
    return out


def _rules_out(text: str, start: int, end: int, kind: str) -> bool:
    """Is the date at text[start:end] no deadline: negated, possessive, past, a start or a lower bound?"""
    before, after = text[:start], text[end:]
    if _NEGATED.search(before) or _PAST.search(before) or _AFTER_NOT.match(after):
        return True
    if after.startswith("'s") and not _IN_TIME_FOR.search(before):
        return True  # "tomorrow's session" is no deadline; "in tomorrow's build", "ready for Friday's demo" are
    if kind == "weekday" and _INDEFINITE.search(before):
        return True
    return kind not in ("before", "before_then") and bool(_START.search(before[_clause_start(text, start) :]))


def phrases(text: str, today: date, known: Known = NOTHING_KNOWN) -> list[Phrase]:
    """The deadline-shaped dates `text` names, in order, without the ones general English rules out; `known`:
    what the channel said before it (`known()`)."""
    lowered = (text or "").lower().replace("\u2019", "'")
    if not lowered.strip():
        return []
    kept: list[Phrase] = []
    for start, end, day, kind, time_marked in _spans(lowered, today, known):
        if kind == "before_then":
            day = kept[-1].day - timedelta(days=1) if kept else None
        if day is None or day < today or _rules_out(lowered, start, end, kind):
            continue
        marked = (
            time_marked
            or kind in ("before", "before_then", "month", "week")
            or bool(_MARKED_ITSELF.match(lowered[start:end]))
            or bool(_MARK_BEFORE.search(lowered[max(0, start - 40) : start]))
            or bool(_MARK_AFTER.match(lowered[end:]))
        )
        kept.append(Phrase(start, end, day, marked))
    # The condition of another date in its sentence is not the deadline ("if I get X by Wed I ship Thu").
    out = []
    for k, p in enumerate(kept):
        later = [q for q in kept[k + 1 :] if not re.search(r"[.!?;\n]", lowered[p.end : q.start])]
        if later and _CONDITION.search(lowered[_clause_start(lowered, p.start) : p.start]):
            continue
        out.append(p)
    return out


def resolve(text: str, today: date, *, marked_only: bool = False, known: Known = NOTHING_KNOWN) -> date | None:
    """The deadline `text` states, as a local date, or None when it states none: its first date said
    as a deadline, else (unless `marked_only`) its first date."""
    found = phrases(text, today, known)
    marked = [p for p in found if p.marked]
    if marked:
        return marked[0].day
    if marked_only or not found:
        return None
    return found[0].day


def moved_to(text: str, today: date, known: Known = NOTHING_KNOWN) -> date | None:
    """The date a message that moves a date moves it to: its date said as a deadline, else the last one it
    names ("Friday is tight, Wednesday week then": the later one)."""
    found = phrases(text, today, known)
    said = [p for p in found if p.marked] or found[-1:]
    return said[0].day if said else None


# A later message that moves a date: general English for rescheduling.
_MOVE = re.compile(
    r"\b(?:slip(?:s|ped|ping)?|mov(?:e|es|ed|ing)|push(?:es|ed|ing)?|postpon\w*|delay\w*|reschedul\w*|rebook\w*"
    r"|brought forward|bring (?:it )?forward|new (?:date|deadline|cut-?off|eta|target)|instead|not yet|won'?t make"
    r"|can'?t make|sorry|change of plan|now (?:due|by|on)|will be|extend\w*)\b"
)


def moves(text: str) -> bool:
    """Does `text` move a date (a slip, a postponement, a new date, "not yet, sorry")?"""
    return bool(_MOVE.search((text or "").lower().replace("\u2019", "'")))
