"""One internal event model for both inbound protocols (sidecar v1 and Roman)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class QualifiedId(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: Annotated[str, Field(min_length=1, max_length=256)]
    domain: Annotated[str, Field(min_length=1, max_length=256)]

    @property
    def qualified(self) -> str:
        return f"{self.id}@{self.domain}"


class Mention(BaseModel):
    userId: QualifiedId
    offset: Annotated[int, Field(ge=0)]
    length: Annotated[int, Field(ge=1)]


class TextMessage(BaseModel):
    type: Literal["text_message"]
    eventId: str | None = None
    conversationId: QualifiedId
    sender: QualifiedId
    messageId: Annotated[str, Field(min_length=1, max_length=256)]
    timestamp: datetime
    text: str
    mentions: list[Mention] = []
    quotedMessageId: str | None = None
    expiresAfterMillis: int | None = None

    @property
    def channel_id(self) -> str:
        return self.conversationId.qualified


SidecarEvent = Annotated[TextMessage, Field(discriminator="type")]
_KNOWN = {"text_message"}
_adapter: TypeAdapter[TextMessage] = TypeAdapter(TextMessage)


def parse_sidecar_event(payload: object) -> TextMessage | None:
    """Parse a sidecar v1 body; None for an event type Jeeves does not handle (answered 202)."""
    if isinstance(payload, dict) and payload.get("type") not in _KNOWN and isinstance(payload.get("type"), str):
        return None
    return _adapter.validate_python(payload)
