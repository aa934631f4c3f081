"""Query analysis: a question becomes a validated QueryPlan (intent, entities, time range, paths, format).

The slot `query_analyse` may write the plan; the offline engine (model `local`) builds it from
keywords, dates (`dateparser`) and the entity names known in the asker's scope. Either way the
plan only steers the search: scope is never part of it.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

from django.conf import settings
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from ground.config import LOCAL_MODEL
from retrieval.config import PATHS

logger = logging.getLogger(__name__)

Intent = Literal["factual_recall", "temporal_context", "accountability", "dependency", "institutional", "cross_channel"]
PathName = Literal["structured", "semantic", "fulltext", "graph", "summary"]
ResponseFormat = Literal["direct_answer", "summary", "list", "comparison"]


class TimeRange(BaseModel):
    model_config = ConfigDict(extra="ignore")
    start: datetime | None = None
    end: datetime | None = None


def _first(limit: int) -> BeforeValidator:
    # A model's over-long list is cut, not trusted: it goes into SQL parameters.
    return BeforeValidator(lambda value: value[:limit] if isinstance(value, list) else value)


class QueryPlan(BaseModel):
    """What to look for. Produced by a model or by the offline engine; validated (and bounded) either way."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    intent: Intent = "factual_recall"
    entities: Annotated[list[Annotated[str, Field(max_length=120)]], _first(10)] = []
    keywords: Annotated[list[Annotated[str, Field(max_length=60)]], _first(20)] = []
    time_range: TimeRange | None = None
    paths: list[PathName] = list(PATHS)
    response_format: ResponseFormat = "direct_answer"
    complexity: Annotated[float, Field(ge=0.0, le=1.0)] = 0.3
    # Structured filters
    owner_ids: Annotated[list[Annotated[str, Field(max_length=256)]], _first(10)] = []
    record_types: Annotated[list[Literal["decision", "action", "signal"]], _first(2)] = []
    statuses: Annotated[list[Annotated[str, Field(max_length=20)]], _first(5)] = []
    friendly_ids: Annotated[list[Annotated[str, Field(pattern=r"^(DEC|ACT)-\d{1,6}$")]], _first(10)] = []


@dataclass(frozen=True)
class PlanContext:
    """What the planner may know about the asker's scope: names, never records."""

    now: datetime
    asker_id: str
    entity_names: dict[str, str]  # lower-cased surface form (name or alias) -> canonical name
    members: dict[str, str]  # lower-cased name/handle/first name -> qualified user id
    tags: frozenset[str] = frozenset()


# Words that frame a question rather than say what it is about; they would match everything.
_FRAMING = frozenset(
    """
    what whats which who whos whom whose when where why how did do does we our us you i me my am is are was were
    be been being the a an of to in on for at by with about from into any anything there this that these those
    decide decided decision decisions agree agreed agreement plan planned now still currently current again
    go going get got have has had will would shall should can could may might need needs so and or not
    it its they them their he she his her team someone somebody anyone ever yet also just
    up out over off many much often long if happen happens happened make making made doing done using used
    original originally before after during since happening thing things right way
    block blocks blocked blocking held hold holding holds depend depends depended depending stopped stop
    stopping broke broken stuck waiting slip slipped slipping moved move change changed changes
    """.split()
)
# Words in the list above after "team ... just" only frame the question (its intent is read from them by
# _INTENT_CUES, before keywords are taken): a record need not repeat them to answer it.

_INTENT_CUES: list[tuple[Intent, re.Pattern[str]]] = [
    ("cross_channel", re.compile(r"\b(other|another|all|every) (channel|team)s?\b|\bacross\b", re.I)),
    ("accountability", re.compile(r"\b(who|whose|owner|owns|responsible|assigned|mine|my actions)\b", re.I)),
    (
        "dependency",
        re.compile(r"\b(block\w*|held up|holding|hold\w* up|depend\w*|waiting on|stopp?ed|broke|stuck)\b", re.I),
    ),
    ("institutional", re.compile(r"\b(why|reason|rationale|rule|policy|allowed)\b", re.I)),
    (
        "temporal_context",
        re.compile(
            r"\b(when|original(ly)?|before|changed?|still|since|slip\w*|mov(e|ed)|replac\w*|history|previous)\b",
            re.I,
        ),
    ),
]

_FRIENDLY = re.compile(r"\b(DEC|ACT)-(\d{1,6})\b", re.I)
_DATEISH = re.compile(
    r"\b(\d{1,2}(st|nd|rd|th)?|jan\w*|feb\w*|mar(ch)?|apr\w*|june?|july?|aug\w*|sep\w*|oct\w*|nov\w*|dec(ember)?"
    r"|yesterday|today|tonight|last (week|month)|this (week|month)|ago|monday|tuesday|wednesday|thursday|friday"
    r"|saturday|sunday)\b",
    re.I,
)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*[A-Za-z0-9]|[A-Za-z0-9]")
_OPEN = re.compile(r"\b(open|outstanding|pending|still to do|to-?do)\b", re.I)
_DONE = re.compile(r"\b(done|finished|completed)\b", re.I)
_SELF = re.compile(r"\b(my|mine|i own|am i|assigned to me|on me)\b", re.I)


def _time_range(question: str, now: datetime) -> TimeRange | None:
    # dateparser is slow and eager ("may", "now"); only ask it when a date-like word is there.
    if not _DATEISH.search(question):
        return None
    from dateparser.search import search_dates

    lowered = question.lower()
    if "last week" in lowered or "this week" in lowered:
        start = now - timedelta(days=7 if "last" in lowered else now.weekday())
        return TimeRange(start=start.replace(hour=0, minute=0, second=0, microsecond=0), end=now)
    if "last month" in lowered:
        return TimeRange(start=now - timedelta(days=31), end=now)
    found = search_dates(
        question,
        languages=["en"],
        settings={
            "RELATIVE_BASE": now.replace(tzinfo=None),
            "PREFER_DATES_FROM": "past",
            "RETURN_AS_TIMEZONE_AWARE": True,
            "TIMEZONE": "UTC",
            "REQUIRE_PARTS": ["day"],
        },
    )
    if not found:
        return None
    days = sorted(d.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0) for _, d in found)
    return TimeRange(start=days[0], end=days[-1] + timedelta(days=1))


def _match_names(question: str, names: dict[str, str]) -> list[str]:
    lowered = f" {question.lower()} "
    found: dict[str, None] = {}
    # Longest surface forms first so "payments-db" wins over "payments".
    for surface in sorted(names, key=len, reverse=True):
        if len(surface) < 3:
            continue
        if re.search(rf"(?<![\w-]){re.escape(surface)}(?![\w-])", lowered):
            found[names[surface]] = None
    return list(found)


# What the question asks for, read from its wording (general question words, not evalset phrases).
_FORMS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("who", re.compile(r"\b(who|whom|whose|owner|owns|responsible|assigned)\b", re.I)),
    ("why", re.compile(r"\b(why|reason|reasons|rationale)\b", re.I)),
    ("blocks", re.compile(r"\b(block\w*|held up|hold\w* (\w+ )?up|waiting (on|for)|stuck|depend\w*)\b", re.I)),
    ("when", re.compile(r"^\W*when\b|\b(by when|what (date|day|time)|deadline|due)\b", re.I)),
    ("status", re.compile(r"\b(status|done|finished|completed?|yet|progress|still)\b", re.I)),
)


def form_of(question: str) -> str:
    """The shape the first sentence takes: who, why, blocks, when, status, or what (the record itself)."""
    for form, cue in _FORMS:
        if cue.search(question):
            return form
    return "what"


def words_of(text: str) -> list[str]:
    return _WORD.findall(text)


def keywords_of(question: str) -> list[str]:
    words = [w for w in _WORD.findall(question)]
    kept: dict[str, None] = {}
    for word in words:
        low = word.lower().strip(".-")
        if len(low) == 1 and low.isalpha():  # the s of "what's", the t of "isn't"
            continue
        if low and low not in _FRAMING and not _FRIENDLY.fullmatch(word):
            kept[low] = None
    return list(kept)[:12]


# What a person has on: "what is Sam doing?", "what's on my plate?", "Maya's open tasks", "list open actions". Such
# a question names no subject of its own; its answer is the person's (or everyone's) actions, listed.
_WORKLOAD = re.compile(
    r"\b(doing|working|plate|busy|assigned|owes?|tasks?|actions?|to-?dos?|open|outstanding|pending|have on|got on"
    r"|done|finished|completed)\b",
    re.I,
)
_WORKLOAD_WORDS = frozenset(
    "doing working work plate busy assigned owe owes task tasks action actions todo todos to-do to-dos open "
    "outstanding pending list all responsible mine finished completed".split()
)


# What a person decided: "what did Chris decide?", "my decisions", "which decisions did Ana make?".
_DECIDING = re.compile(r"\b(decid\w*|decisions?|agreed|settled)\b", re.I)


# What is in the way: "is anything blocked?", "any blockers?", "what is Ana stuck on?". Asked of no subject of its
# own, its answer is the blockers raised (signals of that kind), listed; "what blocked the release?" names one and
# is searched as any question is.
_BLOCKING = re.compile(r"\b(block(ed|ers?|ing)|stuck|impediments?|held up)\b", re.I)
_BLOCKING_WORDS = frozenset("blocker blockers impediment impediments list all open outstanding pending".split())


def _asks_for_a_list(
    question: str,
    keywords: list[str],
    names: list[str],
    cue: re.Pattern[str] = _WORKLOAD,
    words: frozenset[str] = _WORKLOAD_WORDS,
) -> bool:
    """Whether `question` asks what someone has on (or which actions are open; with `_DECIDING`, what someone
    decided; with `_BLOCKING` and its words, what is in someone's way) and nothing narrower: every content word is
    a name of the person asked about or one of `words`."""
    if not cue.search(question):
        return False
    named = {w.lower() for surface in names for w in words_of(surface)}
    return all(k in words or k in named for k in keywords)


def _paths(intent: Intent, entities: list[str], time_range: TimeRange | None) -> list[PathName]:
    """The paths an offline plan takes: always the structured, semantic and full-text ones; the graph when the
    question names an entity; the summaries for a time range, a change over time or several channels."""
    paths: list[PathName] = ["structured", "semantic", "fulltext"]
    if entities:
        paths.append("graph")
    if time_range is not None or intent in ("temporal_context", "cross_channel"):
        paths.append("summary")
    return paths


def offline_plan(question: str, ctx: PlanContext) -> QueryPlan:
    """The offline engine's plan: cue words for intent, dateparser for time, scope names for entities."""
    intent: Intent = "factual_recall"
    for name, cue in _INTENT_CUES:
        if cue.search(question):
            intent = name
            break
    friendly = [f"{kind.upper()}-{int(num):04d}" for kind, num in _FRIENDLY.findall(question)]
    entities = _match_names(question, ctx.entity_names)
    owner_ids = list(dict.fromkeys(ctx.members[n] for n in _match_names_raw(question, ctx.members)))
    if _SELF.search(question):
        owner_ids.append(ctx.asker_id)
    statuses: list[str] = []
    if _OPEN.search(question):
        statuses.append("open")
    elif _DONE.search(question) and intent != "accountability":
        statuses.append("done")
    record_types: list[Literal["decision", "action", "signal"]] = []
    lowered = question.lower()
    if re.search(r"\b(actions?|tasks?|to-?dos?)\b", lowered):
        record_types.append("action")
    if re.search(r"\bdecisions?\b", lowered):
        record_types.append("decision")
    time_range = _time_range(question, ctx.now)
    keywords = keywords_of(question)
    response_format: ResponseFormat = "direct_answer"
    named = _match_names_raw(question, ctx.members)
    if not record_types and _asks_for_a_list(question, keywords, named, _BLOCKING, _BLOCKING_WORDS):
        response_format, record_types, statuses = "list", ["signal"], []
    elif "action" not in record_types and owner_ids and _asks_for_a_list(question, keywords, named, _DECIDING):
        response_format, record_types, statuses = "list", ["decision"], ["active"]
    elif (owner_ids or statuses or record_types == ["action"]) and _asks_for_a_list(question, keywords, named):
        response_format, record_types = "list", ["action"]
        statuses = statuses or (["done"] if _DONE.search(question) else ["open"])
    elif intent == "temporal_context":
        response_format = "comparison"
    # Rough complexity: several entities, a comparison over time, or a long question.
    complexity = min(1.0, 0.2 + 0.15 * len(entities) + (0.3 if intent == "temporal_context" else 0.0))
    complexity = min(1.0, complexity + (0.2 if len(keywords) > 8 else 0.0))
    return QueryPlan(
        intent=intent,
        entities=entities,
        keywords=keywords,
        time_range=time_range,
        paths=_paths(intent, entities, time_range),
        response_format=response_format,
        complexity=round(complexity, 2),
        owner_ids=owner_ids,
        record_types=record_types,
        statuses=statuses,
        friendly_ids=friendly,
    )


def _match_names_raw(question: str, names: dict[str, str]) -> list[str]:
    """Surface forms (not canonical values) of `names` present in the question."""
    lowered = question.lower()
    return [s for s in names if len(s) >= 3 and re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", lowered)]


PLAN_PROMPT = """You plan a search of a team's records for one question. Reply with one JSON object:
{"intent": one of factual_recall|temporal_context|accountability|dependency|institutional|cross_channel,
 "entities": [names from KNOWN ENTITIES the question is about],
 "keywords": [up to 8 content words of the question, no question words],
 "time_range": {"start": ISO date or null, "end": ISO date or null} or null,
 "paths": subset of ["structured","semantic","fulltext","graph","summary"],
 "response_format": one of direct_answer|summary|list|comparison,
 "complexity": 0..1 (how much synthesis the answer needs),
 "statuses": [], "record_types": [], "friendly_ids": []}
Today is {today}. KNOWN ENTITIES: {entities}"""


@dataclass(frozen=True)
class OfflinePlanRow:
    """The offline plan's `llm_calls` row, not yet written: call it to write it (`record_offline_plan`), or send
    its `statements()` in a pipeline of the caller's (retrieval.ask)."""

    channel_id: str | None
    latency_ms: int

    def __call__(self) -> None:
        record_offline_plan(self.channel_id, self.latency_ms)

    def statements(self) -> list[tuple[str, dict[str, object]]]:
        from knowledge.llm_calls import unflushed_statements

        return unflushed_statements(
            slot="query_analyse",
            model=LOCAL_MODEL,
            outcome="ok",
            latency_ms=self.latency_ms,
            channel_id=self.channel_id,
        )


def record_offline_plan(channel_id: str | None, latency_ms: int) -> None:
    """The offline plan's `llm_calls` row. It need not wait for a WAL flush (5-10 ms): a crash can lose
    only that accounting row; written in one round trip."""
    from knowledge.llm_calls import record_llm_call

    record_llm_call(
        slot="query_analyse",
        model=LOCAL_MODEL,
        outcome="ok",
        latency_ms=latency_ms,
        channel_id=channel_id,
        unflushed=True,
    )


def analyse(
    question: str,
    ctx: PlanContext,
    *,
    channel_id: str | None = None,
    deferred: list[OfflinePlanRow] | None = None,
) -> QueryPlan:
    """The plan from slot `query_analyse`: a model when one is configured, else (or on failure) offline.

    With the offline engine and `deferred`, the plan's `llm_calls` row is not written here: it is appended
    (`OfflinePlanRow`), for the caller to write with the paths' statements, off the question's critical path.
    """
    from pipeline import llm

    started = time.monotonic()
    offline = offline_plan(question, ctx)
    if settings.JEEVES.slot("query_analyse").model == LOCAL_MODEL:
        latency_ms = int((time.monotonic() - started) * 1000)
        if deferred is None:
            record_offline_plan(channel_id, latency_ms)
        else:
            deferred.append(OfflinePlanRow(channel_id, latency_ms))
        return offline
    names = ", ".join(sorted(set(ctx.entity_names.values()))[:80]) or "none"
    messages = [
        {
            "role": "system",
            "content": PLAN_PROMPT.replace("{today}", ctx.now.date().isoformat()).replace("{entities}", names),
        },
        {"role": "user", "content": question},
    ]
    try:
        # Never inside a transaction: a real model call must not hold one open.
        plan = llm.structured("query_analyse", messages, QueryPlan, lambda: offline, channel_id=channel_id).value
    except llm.SlotFailure:
        logger.warning("query_analyse: no valid plan from the model; using the offline plan")
        return offline
    if plan is offline:
        return plan
    # People and ids come from what the scope knows, never from the model; so does whether the question asks for
    # a list of someone's actions (its answer is then every such action, whatever their words: retrieval.ask).
    listing: dict[str, object] = {"response_format": "direct_answer"} if plan.response_format == "list" else {}
    if offline.response_format == "list":
        listing = {"response_format": "list", "record_types": offline.record_types, "statuses": offline.statuses}
    return plan.model_copy(
        update={"owner_ids": offline.owner_ids, "friendly_ids": offline.friendly_ids or plan.friendly_ids, **listing}
    )
