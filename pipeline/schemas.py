"""Output schemas of the pipeline tiers. Every model answer (LLM or offline engine) is parsed into these.

They are the contract between the slot layer, the offline engine and the knowledge services.
Message ids in `source_msg_ids` are Wire message ids from the window the tier was given.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Category = Literal["decision", "action", "question", "blocker", "update", "discussion", "reference", "routine"]
HIGH_SIGNAL: frozenset[str] = frozenset({"decision", "action", "blocker"})
Confidence = Annotated[float, Field(ge=0.0, le=1.0)]
ShortText = Annotated[str, Field(min_length=1, max_length=400)]


class _Schema(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class ClassifyResult(_Schema):
    """Tier 1: what kind of message this is (multi-label)."""

    categories: Annotated[list[Category], Field(min_length=1)]
    confidence: Confidence
    entities: list[Annotated[str, Field(max_length=120)]] = []
    is_high_signal: bool
    gist: Annotated[str, Field(max_length=300)] = ""  # a short paraphrase, never the message itself


class ExtractedDecision(_Schema):
    summary: ShortText  # third-person restatement
    rationale: Annotated[str, Field(max_length=600)] | None = None
    decided_by: list[str] = []  # Wire user ids (qualified or bare) of the deciders
    source_msg_ids: Annotated[list[str], Field(min_length=1)]
    confidence: Confidence
    tags: list[str] = []
    restates_existing: str | None = None  # friendly id (DEC-0003) when the model says it restates one


class ExtractedAction(_Schema):
    description: ShortText
    owner_id: str | None = None  # Wire user id, None when nobody is named
    deadline: date | None = None  # the channel-local calendar date
    source_msg_ids: Annotated[list[str], Field(min_length=1)]
    confidence: Confidence
    status: Literal["open", "done"] = "open"
    related_decision_msg_ids: list[str] = []
    tags: list[str] = []


EntityKind = Literal["person", "service", "project", "team", "tool", "concept"]
RelationshipKind = Literal["owns", "depends_on", "works_on", "blocks", "reports_to"]


class ExtractedEntity(_Schema):
    name: Annotated[str, Field(min_length=1, max_length=120)]
    type: EntityKind
    aliases: list[Annotated[str, Field(max_length=120)]] = []


class ExtractedRelationship(_Schema):
    source: Annotated[str, Field(min_length=1, max_length=120)]  # entity name
    target: Annotated[str, Field(min_length=1, max_length=120)]
    relationship: RelationshipKind
    context: Annotated[str, Field(max_length=300)] | None = None
    source_msg_ids: list[str] = []
    confidence: Confidence = 0.7


class ExtractedSignal(_Schema):
    signal_type: Literal["blocker", "question", "update", "concern", "discussion"]
    summary: ShortText
    participants: list[str] = []
    source_msg_ids: Annotated[list[str], Field(min_length=1)]
    confidence: Confidence = 0.6


class ExtractResult(_Schema):
    """Tier 2: the durable knowledge of a window."""

    decisions: list[ExtractedDecision] = []
    actions: list[ExtractedAction] = []
    entities: list[ExtractedEntity] = []
    relationships: list[ExtractedRelationship] = []
    signals: list[ExtractedSignal] = []
