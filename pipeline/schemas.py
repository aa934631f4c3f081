"""Output schemas of the pipeline tiers. Every model answer (LLM or offline engine) is parsed into these.

They are the contract between the slot layer, the offline engine and the knowledge writers.
Message ids in `source_msg_ids` are Wire message ids from the window the tier was given.

Model output is untrusted, all of it (docs/guarantees.md §6): every field is bounded in count,
length and characters here. A text that is too long fails validation (the slot retries, then falls
back); a list that is too long is cut; a tag that is not a tag (too long, too many words, odd
characters) is dropped. What is stored is also run through the no-verbatim guard (knowledge/verbatim.py).
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

Category = Literal["decision", "action", "question", "blocker", "update", "discussion", "reference", "routine"]
HIGH_SIGNAL: frozenset[str] = frozenset({"decision", "action", "blocker"})
Confidence = Annotated[float, Field(ge=0.0, le=1.0)]

# No control characters (newlines, NUL, escapes) in anything stored: a record's text is one paragraph.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _printable(value: str) -> str:
    if _CONTROL.search(value.replace("\n", " ").replace("\t", " ")):
        raise ValueError("control characters")
    return " ".join(value.split())


def _capped(limit: int):
    """A list cut to its first `limit` items (the model said too much; the first are its best)."""

    def cap(value: Any) -> Any:
        return value[:limit] if isinstance(value, list) else value

    return BeforeValidator(cap)


ShortText = Annotated[str, Field(min_length=1, max_length=400), AfterValidator(_printable)]
LongText = Annotated[str, Field(max_length=600), AfterValidator(_printable)]
Name = Annotated[str, Field(min_length=1, max_length=120), AfterValidator(_printable)]
# A Wire message id, a member id ("uuid@domain"), a handle or a display name: one short line.
Ref = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_printable)]
MsgIds = Annotated[list[Ref], _capped(30)]
MemberRefs = Annotated[list[Ref], _capped(10)]

TAG_MAX_CHARS = 40
TAG_MAX_WORDS = 3
_TAG = re.compile(r"^[^\W_][\w\-. ]*$")


def _tags(value: Any) -> Any:
    """At most 8 tags of at most 3 words / 40 characters of letters, digits, '-', '.', lower-cased;
    anything else a model put in `tags` is not a tag and is dropped (never stored)."""
    if not isinstance(value, list):
        return value
    kept: list[str] = []
    for raw in value:
        if not isinstance(raw, str):
            continue
        tag = " ".join(raw.split()).lower()
        if tag and len(tag) <= TAG_MAX_CHARS and len(tag.split()) <= TAG_MAX_WORDS and _TAG.match(tag):
            kept.append(tag)
    return list(dict.fromkeys(kept))[:8]


Tags = Annotated[list[str], BeforeValidator(_tags)]
_FRIENDLY_DECISION = re.compile(r"^DEC-?(\d{1,6})$", re.I)


def _friendly_decision(value: Any) -> str | None:
    """A decision's friendly id (DEC-0003), or None for anything else the model put there."""
    match = _FRIENDLY_DECISION.match(value.strip()) if isinstance(value, str) else None
    return f"DEC-{int(match.group(1)):04d}" if match else None


class _Schema(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class ClassifyResult(_Schema):
    """Tier 1: what kind of message this is (multi-label)."""

    categories: Annotated[list[Category], Field(min_length=1), _capped(8)]
    confidence: Confidence
    entities: Annotated[list[Name], _capped(10)] = []
    is_high_signal: bool
    gist: Annotated[str, Field(max_length=300), AfterValidator(_printable)] = ""  # a paraphrase, never the message


class ExtractedDecision(_Schema):
    summary: ShortText  # third-person restatement
    rationale: LongText | None = None
    decided_by: MemberRefs = []  # Wire user ids (qualified or bare) of the deciders
    source_msg_ids: Annotated[MsgIds, Field(min_length=1)]
    confidence: Confidence
    tags: Tags = []
    restates_existing: Annotated[str | None, BeforeValidator(_friendly_decision)] = None  # DEC-0003
    # More evidence of a decision an earlier run stored on its first message (the offline engine's): the store
    # extends that decision and writes none of its own.
    continues: bool = False


class ExtractedAction(_Schema):
    description: ShortText
    owner_id: Ref | None = None  # Wire user id, None when nobody is named
    deadline: date | None = None  # the channel-local calendar date
    source_msg_ids: Annotated[MsgIds, Field(min_length=1)]
    confidence: Confidence
    status: Literal["open", "done"] = "open"
    related_decision_msg_ids: MsgIds = []
    tags: Tags = []


EntityKind = Literal["person", "service", "project", "team", "tool", "concept"]
RelationshipKind = Literal["owns", "depends_on", "works_on", "blocks", "reports_to"]


class ExtractedEntity(_Schema):
    name: Name
    type: EntityKind
    aliases: Annotated[list[Name], _capped(5)] = []


class ExtractedRelationship(_Schema):
    source: Name  # entity name
    target: Name
    relationship: RelationshipKind
    context: Annotated[str, Field(max_length=300), AfterValidator(_printable)] | None = None
    source_msg_ids: MsgIds = []
    confidence: Confidence = 0.7


class ExtractedSignal(_Schema):
    signal_type: Literal["blocker", "question", "update", "concern", "discussion"]
    summary: ShortText
    participants: MemberRefs = []
    source_msg_ids: Annotated[MsgIds, Field(min_length=1)]
    confidence: Confidence = 0.6


class ExtractResult(_Schema):
    """Tier 2: the durable knowledge of a window (at most ~30 messages: these counts are generous)."""

    decisions: Annotated[list[ExtractedDecision], _capped(20)] = []
    actions: Annotated[list[ExtractedAction], _capped(20)] = []
    entities: Annotated[list[ExtractedEntity], _capped(30)] = []
    relationships: Annotated[list[ExtractedRelationship], _capped(30)] = []
    signals: Annotated[list[ExtractedSignal], _capped(20)] = []
