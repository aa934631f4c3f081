"""Answers in Jeeves' voice (docs/architecture.md §7): offline templates over the context pack, or the `respond` slot.

An answer leads with the answer: its first sentence is the best record said in the form the question
asks for (who: owner and deadline; when; status; why: the reason; a decision: what, who, when), then at
most two records that add to it. Only records whose relevance is close to the best one's are cited; a
decision that replaced (or was replaced by) the best is said as what changed. Dates are spoken in the
channel's timezone ("the 13th of March"), people by name, the channel only when it is not the one asked
in. A model writes from the same pack; its answer is checked (`unchecked`) and the offline composer's
replaces it when it cites what the pack does not hold, cites nothing, or quotes the records.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field

from ground.config import LOCAL_MODEL
from ground.wording import counted, joined, number
from knowledge.channels import channel_zone
from knowledge.verbatim import MAX_RUN, kept_share, longest_common_run
from retrieval.fusion import RecordKey
from retrieval.pack import ContextPack, local_date
from retrieval.plan import QueryPlan, form_of
from retrieval.records import Record
from retrieval.relevance import citable

logger = logging.getLogger(__name__)

NO_RECORD = "I'm afraid I have no record of that particular matter."
NEAREST = "I have nothing that settles that directly, I'm afraid; the nearest I hold is this."
CONTRADICTION = "One notes that this appears to differ from"
MAX_CITED = 3  # the record that answers, and at most two that add to it


@dataclass(frozen=True)
class Answer:
    text: str
    cited: list[Record]
    model: str


@dataclass(frozen=True)
class Setting:
    """Where the answer is spoken: the asking channel (its timezone for dates) and the moment."""

    channel_id: str = ""
    timezone: str = "UTC"
    now: datetime | None = None
    names: Mapping[str, str] = field(default_factory=dict)  # qualified user id -> display name
    asker_id: str = ""


# Opening words that read lower-case inside a sentence; any other first word (a name, a product, an
# acronym) keeps its case, and most record texts open a sentence of their own.
_COMMON_OPENERS = frozenset(
    """a an the all any no none every each both either neither only our their this that these those there
    it we they from for in on at to until after before during new more less fewer further""".split()
)


def _clause(text: str) -> str:
    """A record's text as part of a sentence: no final stop, a common first word lower-cased."""
    text = " ".join(text.split()).rstrip(" .;")
    first = text.split(" ", 1)[0]
    return text[:1].lower() + text[1:] if first in {w.capitalize() for w in _COMMON_OPENERS} else text


def _sentence(text: str) -> str:
    """A record's text as a sentence of its own: capital first, no final stop (the caller adds one)."""
    text = " ".join(text.split()).rstrip(" .;")
    return text[:1].upper() + text[1:]


# A deadline said relative to the day it was said ("by end of this week", "by EOD", "today"): read later, it
# means nothing, so the answer says the date it stood for in its place.
_RELATIVE_DUE = re.compile(
    r"\b(?:(?:by|before|until|till)\s+)?(?:(?:the\s+)?end of (?:the\s+)?(?:(?:next|this)\s+)?(?:day|week|month)"
    r"|(?:by|before|until|till)\s+(?:eod|eob|cob|eow|(?:next|this) week)|today|tonight|tomorrow)\b",
    re.IGNORECASE,
)


# A record that says a day or a time of its own ("on Wednesday 11 February", "from the 2nd", "at 10am", "in Q3"):
# asked "when", its text is the answer, and the day it was decided only comes beside it.
_SAYS_WHEN = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}\b"
    r"|\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b"
    r"|\b(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)(?:day|nesday|sday|rsday|urday)?\b"
    r"|\bthe\s+\d{1,2}(?:st|nd|rd|th)\b|\b\d{1,2}(?::\d\d)?\s*(?:am|pm)\b|\b\d{1,2}:\d\d\b|\bq[1-4]\b"
    r"|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b|\b(?:today|tonight|tomorrow|next week|this week|noon|midday)\b",
    re.IGNORECASE,
)


def _ending_with(text: str, ref: str) -> str:
    """`text` followed by its reference `ref` (" (ACT-0004)"); a text ending on a parenthesis of its own takes the
    reference inside it ("to approve (two more licences; ACT-0004)"), not as a second one beside it."""
    if ref and text.endswith(")") and text.count("(") == text.count(")"):
        return f"{text[:-1]}; {ref.strip()[1:]}"
    return f"{text}{ref}"


class _Speaker:
    """Turns records into sentences for one answer: dates in the channel's timezone, names, ids."""

    def __init__(self, setting: Setting) -> None:
        self.setting = setting
        self.tz = channel_zone(setting.timezone)
        self.now = setting.now or datetime.now(self.tz)

    def date(self, moment: datetime | None) -> str:
        return local_date(moment, self.tz, self.now)

    def ref(self, record: Record, *extra: str) -> str:
        """ " (DEC-0002, q2-budget, the 3rd of March)": the id, the channel when it is not the asker's."""
        parts = [record.cite_id if record.friendly_id else ""]
        if record.channel_id != self.setting.channel_id:
            parts.append(record.channel_name)  # a 1:1 answers from several channels: say which
        inner = ", ".join(p for p in (*parts, *extra) if p)
        return f" ({inner})" if inner else ""

    def deciders(self, record: Record) -> str:
        names = [self.setting.names.get(u) for u in record.detail.get("decided_by") or []]
        names = [n for n in names if n]
        if not names:
            return ""
        return joined(names)

    # ------------------------------------------------------------------ actions

    def task(self, record: Record) -> str | None:
        """The task of an action written "Owner to do X" as "do X"; None when it is not in that form."""
        owner = (record.detail.get("owner_name") or "").split()
        m = re.match(r"([A-Z][\w'-]*)(?:\s+[A-Z][\w'-]*)?\s+(?:is\s+)?(?:to|will)\s+", record.text.strip())
        # The opening name must be the owner's: any part of the full name (where the given name comes last, as in
        # Vietnamese or Hungarian, a person is called by it), a short form of it, or the full name.
        if not owner or not m or m.group(1)[:3].lower() not in {part[:3].lower() for part in owner}:
            return None
        return _clause(record.text.strip()[m.end() :])

    def names_day(self, text: str, moment: datetime) -> bool:
        """Whether `text` already says the day `moment` falls on here ("by Friday the 13th", "by 13 March",
        "March 13"): the answer then does not say it twice."""
        local = moment.astimezone(self.tz)
        day, month = local.day, local.strftime("%b")
        said = rf"\b{day}(?:st|nd|rd|th)\b|\b{day}\s+{month}|\b{month}\w*\.?\s+{day}\b"
        return bool(re.search(said, text, re.IGNORECASE))

    def action(self, record: Record, form: str) -> str:
        owner = record.detail.get("owner_name")
        due = record.detail.get("deadline")
        done = record.status == "done"
        task = self.task(record)
        ref = self.ref(record)
        if owner and task:
            core = f"{owner} {'undertook' if done else 'is'} to {_ending_with(task, ref)}"
        elif owner:
            core = f"{owner} has it in hand{ref}: {_clause(record.text)}"
        else:
            core = f"No one has been named for it{ref}: {_clause(record.text)}"
        if done:
            finished = record.detail.get("completed_at")
            outcome = f"it was done on {self.date(finished)}" if finished else "it has been done"
            return f"{'That is done: ' if form == 'status' else ''}{core}; {outcome}."
        if form == "when":
            return f"By {self.date(due)}: {core}." if due else f"No date was set: {core}."
        core, when = self.due_said(core, record.text, due)
        return f"{'That is still open: ' if form == 'status' else ''}{core}{when}."

    def due_said(self, text: str, stored: str, due: datetime | None) -> tuple[str, str]:
        """`text` (a sentence about an action whose stored text is `stored`) and what follows it about the
        deadline `due` (", by <date>", or "" when `text` says it): a deadline said relative to its day ("by end
        of this week", "by EOD", "today") gives way to the date it stood for, a weekday gets its date beside it
        ("by Friday (ACT-0004), by the 13th of March" reads as two dates: "by Friday the 13th of March")."""
        if not due or self.names_day(stored, due):
            return text, ""
        if relative := _RELATIVE_DUE.search(text):
            return text[: relative.start()] + f"by {self.date(due)}" + text[relative.end() :], ""
        if weekday := self.weekday_said(text, due):
            return text[: weekday.end()] + f" {self.date(due)}" + text[weekday.end() :], ""
        return text, f", by {self.date(due)}"

    def weekday_said(self, text: str, moment: datetime) -> re.Match[str] | None:
        """Where `text` says the deadline's weekday after "by"/"on"/"until"/"before" ("by Friday", "by next
        Friday", "before Fri"), if it does."""
        day = moment.astimezone(self.tz).strftime("%A")
        said = rf"\b(?:by|on|until|till|before)\s+(?:(?:next|this)\s+)?(?:{day}|{day[:3]})\b"
        return re.search(said + r"(?!\s+(?:the\s+)?\d)", text, re.IGNORECASE)

    # ------------------------------------------------------------------ decisions

    def decision(self, record: Record, form: str) -> str:
        when = self.date(record.occurred_at)
        by = self.deciders(record)
        text = _sentence(record.text)
        if form == "who" and by:
            line = f"{by} decided it on {when}: {text}{self.ref(record)}."
        elif form == "when" and not _SAYS_WHEN.search(record.text):
            line = f"That was decided on {when}: {text}{self.ref(record)}."
        else:
            decided = f"decided on {when}" + (f" by {by}" if by else "")
            line = f"{text}{self.ref(record, decided)}."
        rationale = record.detail.get("rationale")
        if rationale and form in ("why", "blocks"):
            line += f" The reason given: {_clause(rationale)}."
        if record.status in ("superseded", "reversed"):
            later = record.detail.get("superseded_by")
            until = record.detail.get("valid_until")
            line += f" It was later {record.status}{' by ' + later if later else ''}"
            line += f", on {self.date(until)}." if until else "."
        return line

    def change(self, old: Record, new: Record, *, original_first: bool) -> str:
        """Current state and what changed (or, asked about the original, the original and what followed)."""
        since = self.date(new.occurred_at)
        if original_first:
            return (
                f"Originally: {_sentence(old.text)}{self.ref(old, self.date(old.occurred_at))}. "
                f"Since {since}: {_sentence(new.text)}{self.ref(new)}."
            )
        verb = "reversed" if old.status == "reversed" else "replaced"
        return (
            f"{_sentence(new.text)}{self.ref(new, 'since ' + since)}. "
            f"It {verb} {old.cite_id} of {self.date(old.occurred_at)}: {_clause(old.text)}."
        )

    # ------------------------------------------------------------------ the rest

    def said_by(self, record: Record) -> str:
        """Who raised a signal, by name ("" when no one is known)."""
        names = [n for n in (self.setting.names.get(u) for u in record.detail.get("participants") or []) if n]
        return " and ".join(names[:2])

    def note(self, record: Record) -> str:
        if record.type == "summary":
            return f"From the {record.status} summary to {self.date(record.occurred_at)}: {_sentence(record.text)}."
        when, who = self.date(record.occurred_at), self.said_by(record)
        if record.type == "signal" and record.status == "blocker":
            opening = f"{who} raised a blocker on {when}" if who else f"A blocker was raised on {when}"
        else:
            opening = f"{who} noted on {when}" if who else f"Noted on {when}"
        return f"{opening}: {_sentence(record.text)}{self.ref(record)}."

    def lead(self, record: Record, form: str) -> str:
        if record.type == "action":
            return self.action(record, form)
        if record.type == "decision":
            return self.decision(record, form)
        return self.note(record)

    def support(self, record: Record, lead: Record | None = None) -> str:
        """A supporting record in one sentence, said as what it adds to the lead: a decision beside a decision
        in time order ("Later, on …" / "Earlier, on …"), so the asker sees which came after which."""
        if record.type == "signal" and record.status == "blocker":
            who = self.said_by(record)
            by = f", raised by {who}" if who else ""
            return f"One notes a blocker on {self.date(record.occurred_at)}{by}: {_sentence(record.text)}."
        if record.type == "decision":
            when = "Also decided"
            if (
                lead is not None
                and lead.type == "decision"
                and self.date(record.occurred_at) != self.date(lead.occurred_at)
            ):
                when = "Later" if record.occurred_at > lead.occurred_at else "Earlier"
            return f"{when}, on {self.date(record.occurred_at)}: {_sentence(record.text)}{self.ref(record)}."
        if record.type == "action":
            return f"Also on record: {self.action(record, 'what')}"
        return self.note(record)


_ORIGINAL = re.compile(r"\b(original(ly)?|before|previous(ly)?|at first|used to|first plan)\b", re.I)


def asks_for_the_original(question: str) -> bool:
    return bool(_ORIGINAL.search(question))


def _chain(record: Record, candidates: Sequence[Record]) -> tuple[Record, Record] | None:
    """(older, newer) when `record` replaced, or was replaced by, another decision among `candidates`."""
    if record.type != "decision" or not record.friendly_id:
        return None
    for other in candidates:
        if other.type != "decision" or other.key == record.key:
            continue
        if record.detail.get("superseded_by") == other.friendly_id:
            return record, other
        if other.detail.get("superseded_by") == record.friendly_id:
            return other, record
    return None


# Two records each keeping this share of the other's words, in order, say the same thing (a decision and a task
# restated from one sentence): once one is cited, the other adds nothing to the answer and is left out.
SAYS_THE_SAME = 0.8


def _says_the_same(record: Record, cited: Sequence[Record]) -> bool:
    return any(min(kept_share(record.text, c.text), kept_share(c.text, record.text)) >= SAYS_THE_SAME for c in cited)


def cite(
    ranked: Sequence[Record],
    scores: Mapping[RecordKey, float],
    *,
    margin: float,
    limit: int = MAX_CITED,
    original_first: bool = False,
) -> list[Record]:
    """The records an answer rests on: the best, and those whose relevance is within `margin` of it.

    A decision that replaced (or was replaced by) the best one is cited with it whatever its score:
    the answer gives the current state and what changed. A record that says what a cited one says is not.
    """
    candidates = [r for r in ranked if citable(r)]
    if not candidates:
        return []
    best = candidates[0]
    top = scores.get(best.key, 0.0)
    chosen = [best]
    chain = _chain(best, candidates)
    if chain:  # the current decision first, unless the question asks what it was originally
        chosen = list(chain) if original_first else [chain[1], chain[0]]
    for record in candidates[1:]:
        if len(chosen) >= limit:
            break
        if record in chosen or _says_the_same(record, chosen):
            continue
        if scores.get(record.key, 0.0) >= top - margin:
            chosen.append(record)
    return chosen


# A record's confidence is the calibrated chance that it is right (pipeline.offline.model.calibrated); under
# this the record is more likely wrong than right, and the answer says so rather than vouch for it.
DOUBTFUL_BELOW = 0.5
_DOUBTS = {
    "decision": "I confess some doubt that this was settled rather than merely proposed.",
    "action": "I confess some doubt that anyone took this on.",
}


def _doubt(record: Record) -> str | None:
    """The caveat an answer resting on `record` owes the asker, if its confidence is under DOUBTFUL_BELOW."""
    return _DOUBTS.get(record.type) if record.confidence < DOUBTFUL_BELOW else None


def offline_answer(
    plan: QueryPlan,
    pack: ContextPack,
    contradictions: Sequence[tuple[Record, Record]],
    cited: Sequence[Record],
    setting: Setting | None = None,
) -> Answer:
    """Templates over the cited records: the first sentence answers, the others add what they add."""
    if not cited:
        return Answer(text=NO_RECORD, cited=[], model=LOCAL_MODEL)
    speaker = _Speaker(setting or Setting())
    form = form_of(pack.question)
    lead, rest = cited[0], list(cited[1:])
    chain = _chain(lead, rest)
    if chain:
        older, newer = chain
        sentences = [speaker.change(older, newer, original_first=asks_for_the_original(pack.question))]
        rest.remove(older if newer.key == lead.key else newer)
    else:
        sentences = [speaker.lead(lead, form)]
        if doubt := _doubt(lead):
            sentences.append(doubt)
    others = [next(r for r in pair if r.key != lead.key) for pair in contradictions]
    sentences.extend(speaker.support(r, lead) for r in rest if r not in others)
    for other in others:
        sentences.append(
            f"{CONTRADICTION} {other.cite_id} ({speaker.date(other.occurred_at)}): {_sentence(other.text)}. "
            "Both are still in force; shall I mark one of them as superseded?"
        )
    return Answer(text=voice(" ".join(sentences)), cited=list(cited), model=LOCAL_MODEL)


def _actions(n: int, state: str) -> str:
    """ "three open actions", "two actions done", "one action"."""
    if state == "open":
        return counted(n, "open action")
    return counted(n, "action") + (f" {state}" if state else "")


def _none_listed(plan: QueryPlan, setting: Setting) -> Answer | None:
    """That the filters found nothing, said of the one person asked about (or of everyone); None when that person
    has no name to give."""
    people = [setting.asker_id if u == setting.asker_id else setting.names.get(u) for u in plan.owner_ids]
    if len(people) > 1 or None in people:
        return None
    you = bool(people) and people[0] == setting.asker_id
    if plan.record_types == ["signal"]:
        by = f" raised by {'you' if you else people[0]}" if people else ""
        text = f"I have no blocker on record{by}."
    elif plan.record_types == ["decision"]:
        whom = "you were" if you else (f"{people[0]} was" if people else "anyone was")
        text = f"I have no decision in force on record that {whom} party to."
    else:
        state = plan.statuses[0] if len(plan.statuses) == 1 else ""
        what = f"no {state} actions" if state == "open" else ("no actions" + (f" {state}" if state else ""))
        who = "You have" if you else (f"{people[0]} has" if people else "There are")
        text = f"{who} {what} on record."
    return Answer(text=voice(text), cited=[], model=LOCAL_MODEL)


def listing(plan: QueryPlan, records: Sequence[Record], setting: Setting) -> Answer | None:
    """What someone has on or decided, as one sentence: how many, then the first `MAX_CITED` (actions by deadline,
    each as its task, id and date; decisions newest first, each with its id and day); the ids of the rest, so each can
    be asked about. One person's actions are said as theirs ("Sam Okafor has two open actions: to …"), the
    asker's as "You have …", anyone's with their owner. With none: that there are none ("Sam Okafor has no open
    actions on record."), or None when the person asked about has no name to give."""
    if not records:
        return _none_listed(plan, setting)
    speaker = _Speaker(setting)
    shown, rest = list(records[:MAX_CITED]), records[MAX_CITED:]
    if shown[0].type == "signal":
        return _blockers(plan, records, shown, rest, speaker)
    if shown[0].type == "decision":
        items = [f"{_sentence(r.text)}{speaker.ref(r, speaker.date(r.occurred_at))}" for r in shown]
        if setting.asker_id in plan.owner_ids:
            who = "You were"
        else:
            named = [n for n in (setting.names.get(u) for u in plan.owner_ids) if n]
            who = f"{' and '.join(named)} {'were' if len(named) > 1 else 'was'}" if named else "They were"
        opening = f"{who} party to {counted(len(records), 'decision')} in force"
        return _listed_answer(opening, items, shown, rest, "newest")
    actions = records
    state = plan.statuses[0] if len(plan.statuses) == 1 else ""
    owners = {r.detail.get("owner_id") for r in actions}
    one = len(owners) == 1 and None not in owners
    items = []
    for record in shown:
        due = record.detail.get("deadline")
        task = speaker.task(record)
        said = f"to {task}" if one and task else _clause(record.text)
        said, when = speaker.due_said(said, record.text, due if record.status != "done" else None)
        items.append(f"{said}{speaker.ref(record)}{when}")
    if one:
        owner = next(iter(owners))
        who = "You have" if owner == setting.asker_id else f"{shown[0].detail.get('owner_name') or 'One person'} has"
        opening = f"{who} {_actions(len(actions), state)}"
    else:
        opening = f"There are {_actions(len(actions), state)}"
    dated = any(r.detail.get("deadline") for r in shown)
    return _listed_answer(opening, items, shown, rest, "due soonest" if dated else "newest")


def _blockers(
    plan: QueryPlan, records: Sequence[Record], shown: list[Record], rest: Sequence[Record], speaker: _Speaker
) -> Answer:
    """The blockers raised, newest first, each with who raised it and when ("There are two blockers on record:
    the build fails on the new runner (Ana Lima, the 3rd of May); …"); of one person's, "Ana Lima raised …"."""
    people = set(plan.owner_ids)
    items = []
    for record in shown:
        who = "" if people else speaker.said_by(record)
        items.append(f"{_clause(record.text)} ({', '.join(p for p in (who, speaker.date(record.occurred_at)) if p)})")
    many = counted(len(records), "blocker")
    if len(people) == 1:
        person = next(iter(people))
        name = "You" if person == speaker.setting.asker_id else (speaker.setting.names.get(person) or "They")
        opening = f"{name} raised {many}"
    else:
        opening = f"There {'is' if len(records) == 1 else 'are'} {many} on record"
    return _listed_answer(opening, items, shown, rest, "newest")


_BESIDES = 6  # ids named after a list answer's first records; past them, how many more


def _listed_answer(opening: str, items: list[str], shown: list[Record], rest: Sequence[Record], order: str) -> Answer:
    if rest:
        opening += f"; the {number(len(shown))} {order}"
    text = f"{opening}: {joined(items, '; ')}."
    if rest and not all(r.friendly_id for r in rest):  # signals have no id to ask about: how many
        text += f" Besides them, {counted(len(rest), 'older one' if order == 'newest' else 'more')}."
    elif rest:
        ids = [r.cite_id for r in rest]
        more = f"{len(ids) - _BESIDES} more" if len(ids) > _BESIDES + 1 else ""
        text += f" Besides them: {joined([*ids[:_BESIDES], more] if more else ids)}."
    return Answer(text=voice(text), cited=shown, model=LOCAL_MODEL)


def voice(text: str) -> str:
    """The house style, enforced on every answer: no exclamation marks, no apologies, no "do you want me to"."""
    text = text.replace("!", ".")
    text = re.sub(r"\b[Ss]orry\b,?", "I'm afraid", text)
    text = re.sub(r"\b[Dd]o you want me to\b", "Shall I", text)
    return text


def model_for(plan: QueryPlan) -> tuple[str, str]:
    """(slot, model): `complex` when the plan is above the complexity threshold, else `respond`."""
    cfg = settings.JEEVES
    slot = "complex" if plan.complexity > cfg.complexity_threshold else "respond"
    return slot, cfg.slot(slot).model


class ModelAnswer(BaseModel):
    """What the `respond` / `complex` slot returns: the reply and the ids of the records it relied on."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)
    answer: Annotated[str, Field(min_length=1, max_length=4000)]
    cited: list[Annotated[str, Field(max_length=40)]] = []


RESPOND_FORMAT = (
    'Reply with one JSON object: {"answer": "<your reply>", "cited": ["<id of each record you relied on>"]}. '
    "Use the ids shown in square brackets; cite at most three, the one that answers first. "
    "The first sentence answers the question; add at most two records, only when they add something."
)


def unchecked(reply: ModelAnswer, pack: ContextPack) -> str | None:
    """Why a model's answer may not be shown (None when it may): it must cite only records of the pack,
    cite at least one unless it says there is no record, and never quote ten words of the pack's texts."""
    known = {r.cite_id for r in pack.records if citable(r)}
    if any(c not in known for c in reply.cited):
        return "cites a record that is not in the pack"
    if not reply.cited and reply.answer != NO_RECORD:
        return "cites nothing"
    if longest_common_run(reply.answer, [r.text for r in pack.records]) > MAX_RUN:
        return "quotes the records"
    return None


def respond(
    plan: QueryPlan,
    pack: ContextPack,
    contradictions: Sequence[tuple[Record, Record]],
    cited: Sequence[Record],
    setting: Setting,
) -> Answer:
    """The answer from the `respond` slot (or `complex` above the complexity threshold), offline when `local`.

    A model's answer is checked (`unchecked`) and replaced by the offline composer's when it fails.
    """
    from pipeline import llm

    offline = offline_answer(plan, pack, contradictions, cited, setting)
    if not offline.cited:
        return offline  # nothing to answer from: the no-record sentence, and no model call
    slot, _model = model_for(plan)
    notes = "".join(
        f"\nNote: {new.cite_id} and {old.cite_id} may contradict each other." for new, old in contradictions
    )
    messages = [
        {"role": "system", "content": pack.persona + "\n" + RESPOND_FORMAT},
        {"role": "user", "content": pack.prompt() + notes},
    ]
    try:
        reply = llm.structured(
            slot,
            messages,
            ModelAnswer,
            lambda: ModelAnswer(answer=offline.text, cited=[r.cite_id for r in offline.cited]),
            channel_id=setting.channel_id,
        )
    except llm.SlotFailure:
        logger.warning("%s: no valid answer from the model; answering offline", slot)
        return offline
    if reply.model == LOCAL_MODEL:
        return offline
    problem = unchecked(reply.value, pack)
    if problem:
        logger.warning("%s: model %s answer %s; answering offline", slot, reply.model, problem)
        return offline
    by_id = {r.cite_id: r for r in pack.records}
    chosen = [by_id[c] for c in dict.fromkeys(reply.value.cited)][:MAX_CITED]
    return Answer(text=voice(reply.value.answer), cited=chosen, model=reply.model)
