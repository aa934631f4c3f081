"""Sidecar protocol v1: the JSON a Wire Apps SDK sidecar POSTs to `/wire/events`, parsed into internal events.

Body `{"eventId": str?, "type": ..., ...}`; the seven types mirror the SDK's handler callbacks
(docs/wire-protocols.md §2). Jeeves' extensions of v1, all optional:
- members in `app_added` / `user_joined` may carry `name` and `handle` strings (the SDK can
  resolve profiles; the replay tool sends them); they go into the member cache;
- `app_added` may carry `timezone`, an IANA name for the channel (stored in channel_config).
"""

from __future__ import annotations

from datetime import UTC
from typing import Annotated, Literal
from zoneinfo import ZoneInfo

from django.conf import settings
from pydantic import AfterValidator, Field, TypeAdapter

from wire_bridge import events
from wire_bridge.inbound import Ident, MessageText, MessageTime, Name, Schema


def _valid_timezone(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        ZoneInfo(value)
    except (ValueError, KeyError, OSError) as exc:
        raise ValueError("not an IANA timezone") from exc
    return value


class QID(Schema):
    id: Ident
    domain: Ident

    def to_internal(self) -> events.QualifiedId:
        return events.QualifiedId(self.id, self.domain)


class MentionIn(Schema):
    userId: QID
    offset: Annotated[int, Field(ge=0)]
    length: Annotated[int, Field(ge=1)]


class MemberIn(Schema):
    userId: QID
    role: Literal["ADMIN", "MEMBER", "UNKNOWN"] = "MEMBER"
    name: Name | None = None
    handle: Name | None = None

    def to_internal(self) -> events.Member:
        return events.Member(self.userId.to_internal(), self.role, self.name, self.handle)


class ConversationIn(Schema):
    id: QID
    name: Name | None = None
    teamId: Ident | None = None
    # Wire's conversation type decides a 1:1 (persisted); anything else, or none, is a group.
    type: Annotated[str, Field(max_length=64)] | None = None


class _Event(Schema):
    eventId: Ident | None = None


class TextMessageIn(_Event):
    type: Literal["text_message"]
    conversationId: QID
    sender: QID
    messageId: Ident
    timestamp: MessageTime
    text: MessageText
    mentions: list[MentionIn] = []
    quotedMessageId: Ident | None = None
    expiresAfterMillis: Annotated[int, Field(ge=0)] | None = None


class AppAddedIn(_Event):
    type: Literal["app_added"]
    conversation: ConversationIn
    members: list[MemberIn]
    timezone: Annotated[str | None, AfterValidator(_valid_timezone)] = None


class UserJoinedIn(_Event):
    type: Literal["user_joined"]
    conversationId: QID
    members: list[MemberIn]


class UserLeftIn(_Event):
    type: Literal["user_left"]
    conversationId: QID
    members: list[QID]


class ConversationDeletedIn(_Event):
    type: Literal["conversation_deleted"]
    conversationId: QID


class ButtonClickedIn(_Event):
    type: Literal["button_clicked"]
    conversationId: QID
    sender: QID
    messageId: Ident
    referencedMessageId: Ident
    buttonId: Ident


class MessageDeletedIn(_Event):
    type: Literal["message_deleted"]
    conversationId: QID
    sender: QID
    messageId: Ident


_TYPES = frozenset({"GROUP", "ONE_TO_ONE"})
SidecarEvent = Annotated[
    TextMessageIn | AppAddedIn | UserJoinedIn | UserLeftIn | ConversationDeletedIn | ButtonClickedIn | MessageDeletedIn,
    Field(discriminator="type"),
]
_adapter: TypeAdapter[SidecarEvent] = TypeAdapter(SidecarEvent)
KNOWN_TYPES = frozenset(
    {
        "text_message",
        "app_added",
        "user_joined",
        "user_left",
        "conversation_deleted",
        "button_clicked",
        "message_deleted",
    }
)


def parse(payload: object) -> events.Event | None:
    """The internal event of a sidecar body; None for a type Jeeves does not handle (answered 202).

    Raises pydantic.ValidationError for a malformed body (answered 400).
    """
    if isinstance(payload, dict) and isinstance(payload.get("type"), str) and payload["type"] not in KNOWN_TYPES:
        return None
    return _to_internal(_adapter.validate_python(payload))


def _channel_of(body: SidecarEvent) -> dict[str, object]:
    """What every internal event of a body that names its conversation by `conversationId` begins with."""
    return {"conversation": body.conversationId.to_internal(), "transport": "sidecar"}


def _to_internal(body: SidecarEvent) -> events.Event:
    app_id = settings.JEEVES.wire_app_id
    match body:
        case TextMessageIn():
            ts = body.timestamp if body.timestamp.tzinfo else body.timestamp.replace(tzinfo=UTC)
            return events.TextMessage(
                **_channel_of(body),
                sender=body.sender.to_internal(),
                message_id=body.messageId,
                timestamp=ts,
                text=body.text,
                bot_id=app_id,
                mentions=tuple(events.Mention(m.userId.to_internal(), m.offset, m.length) for m in body.mentions),
                quoted_message_id=body.quotedMessageId,
                expires_after_ms=body.expiresAfterMillis,
            )
        case AppAddedIn():
            return events.AppAdded(
                conversation=body.conversation.id.to_internal(),
                transport="sidecar",
                name=body.conversation.name,
                conversation_type=body.conversation.type if body.conversation.type in _TYPES else "UNKNOWN",
                members=tuple(m.to_internal() for m in body.members),
                bot_id=app_id,
                timezone=body.timezone,
            )
        case UserJoinedIn():
            return events.UserJoined(
                **_channel_of(body),
                members=tuple(m.to_internal() for m in body.members),
                bot_id=app_id,
            )
        case UserLeftIn():
            return events.UserLeft(
                **_channel_of(body),
                users=tuple(m.to_internal() for m in body.members),
                bot_id=app_id,
            )
        case ConversationDeletedIn():
            return events.ConversationDeleted(**_channel_of(body))
        case ButtonClickedIn():
            return events.ButtonClicked(
                **_channel_of(body),
                sender=body.sender.to_internal(),
                referenced_message_id=body.referencedMessageId,
                button_id=body.buttonId,
                dedupe_key=body.eventId or f"{body.messageId}",
            )
        case MessageDeletedIn():
            return events.MessageDeleted(
                **_channel_of(body),
                sender=body.sender.to_internal(),
                message_id=body.messageId,
            )
    raise AssertionError(f"unhandled sidecar event {type(body).__name__}")
