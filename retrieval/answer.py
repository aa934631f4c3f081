"""Answers in Jeeves' voice (DESIGN.md §7): offline templates over the context pack, or the `respond` slot.

The offline engine (model `local`) writes from templates; a model writes from the same pack and its
text passes the same voice guard. Every answer names channel, approximate date and friendly ids.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field

from jeeves.config import LOCAL_MODEL
from retrieval.pack import ContextPack, approx_date
from retrieval.plan import QueryPlan
from retrieval.records import Record
from retrieval.relevance import citable

logger = logging.getLogger(__name__)

NO_RECORD = "I'm afraid I have no record of that particular matter."
CONTRADICTION = "One notes that this appears to differ from"
MAX_CITED = 5


@dataclass(frozen=True)
class Answer:
    text: str
    cited: list[Record]
    model: str


def _where(record: Record) -> str:
    return f"in {record.channel_name}, around {approx_date(record.occurred_at)}"


def _sentence(text: str) -> str:
    text = text.strip().rstrip(".")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def _describe(record: Record, plan: QueryPlan) -> str:
    if record.type == "decision":
        line = f"{record.cite_id}: it was decided {_where(record)} that {_sentence(record.text)}."
        if record.detail.get("rationale") and plan.intent in ("institutional", "dependency"):
            line += f" The reasoning recorded: {_sentence(record.detail['rationale'])}."
        if record.status in ("superseded", "reversed"):
            later = record.detail.get("superseded_by")
            when = record.detail.get("valid_until")
            line += f" This was later {record.status}"
            line += f" by {later}" if later else ""
            line += f", around {approx_date(when)}" if when else ""
            line += "."
        return line
    if record.type == "action":
        owner = record.detail.get("owner_name") or "no one in particular"
        due = record.detail.get("deadline")
        line = f"{record.cite_id}: {owner} undertook {_where(record)} to see to this: {_sentence(record.text)}"
        line += f", due {approx_date(due)}." if due else "."
        if record.status == "done":
            done_at = record.detail.get("completed_at")
            line += " It has since been completed" + (f", around {approx_date(done_at)}." if done_at else ".")
        elif record.status == "open":
            line += " It remains open."
        else:
            line += f" It is marked {record.status}."
        return line
    if record.type == "summary":
        return f"The {record.status} summary {_where(record)} records that {_sentence(record.text)}."
    return f"A note {_where(record)} records that {_sentence(record.text)}."


_OPENINGS = {
    "accountability": "If I may, as to who has the matter in hand:",
    "temporal_context": "If I may, here is how the matter stands, and how it came to be so:",
    "dependency": "If I may, as to what the matter rested upon:",
    "institutional": "If I may, the reasoning on record is as follows:",
}


def offline_answer(plan: QueryPlan, pack: ContextPack, contradictions: Sequence[tuple[Record, Record]]) -> Answer:
    """Templates over the pack: the best records first, current decisions before what they replaced."""
    cited = cite(pack)
    if not cited:
        return Answer(text=NO_RECORD, cited=[], model=LOCAL_MODEL)
    lines = [_OPENINGS.get(plan.intent, "If I may, the record shows the following:")]
    lines.extend(f"- {_describe(r, plan)}" for r in cited)
    for newer, older in contradictions:
        lines.append(
            f"{CONTRADICTION} {older.cite_id} ({older.channel_name}, around {approx_date(older.occurred_at)}), "
            f"which is still in force alongside {newer.cite_id}. Shall I mark one of them as superseded?"
        )
    related = [r for r in pack.records if r.type == "entity" and r.detail.get("relations")]
    if related:
        lines.append("Related, for context: " + "; ".join(r.detail["relations"] for r in related[:2]) + ".")
    return Answer(text=voice("\n".join(lines)), cited=cited, model=LOCAL_MODEL)


def cite(pack: ContextPack) -> list[Record]:
    """The records an answer rests on, best first: citable kinds only, current decisions ahead of replaced ones."""
    return [r for r in pack.ranked if citable(r)][:MAX_CITED]


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
    cited: list[str] = []


RESPOND_FORMAT = (
    'Reply with one JSON object: {"answer": "<your reply>", "cited": ["<id of each record you relied on>"]}. '
    "Use the ids shown in square brackets."
)


def respond(
    plan: QueryPlan, pack: ContextPack, contradictions: Sequence[tuple[Record, Record]], *, channel_id: str
) -> Answer:
    """The answer from the `respond` slot (or `complex` above the complexity threshold), offline when `local`."""
    from pipeline import llm

    offline = offline_answer(plan, pack, contradictions)
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
            channel_id=channel_id,
        )
    except llm.SlotFailure:
        logger.warning("%s: no valid answer from the model; answering offline", slot)
        return offline
    if reply.model == LOCAL_MODEL:
        return offline
    by_id = {r.cite_id: r for r in pack.ranked}
    cited = [by_id[c] for c in dict.fromkeys(reply.value.cited) if c in by_id and citable(by_id[c])]
    # A model that names no valid id still rests on the pack: cite what was put in front of it.
    return Answer(text=voice(reply.value.answer), cited=cited or offline.cited, model=reply.model)
