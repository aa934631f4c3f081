"""One internal event model for both inbound protocols (sidecar v1 and Roman); the adapters translate into it.

Mention offsets are kept as the peer sent them: UTF-16 code units (both peers are JVM processes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Transport = Literal["sidecar", "roman"]


@dataclass(frozen=True)
class QualifiedId:
    id: str
    domain: str

    @property
    def qualified(self) -> str:
        return f"{self.id}@{self.domain}"

    @classmethod
    def parse(cls, raw: str, default_domain: str) -> QualifiedId:
        """ "uuid@domain" or a bare id (Roman), which gets `default_domain`."""
        ident, sep, domain = raw.rpartition("@")
        if sep and ident and domain:
            return cls(ident, domain)
        return cls(raw, default_domain)


@dataclass(frozen=True)
class Mention:
    user: QualifiedId
    offset: int  # UTF-16 code units
    length: int  # includes the "@"


@dataclass(frozen=True)
class Member:
    user: QualifiedId
    role: str = "MEMBER"
    name: str | None = None
    handle: str | None = None


@dataclass(frozen=True)
class _ChannelEvent:
    conversation: QualifiedId
    transport: Transport

    @property
    def channel_id(self) -> str:
        return self.conversation.qualified


@dataclass(frozen=True)
class TextMessage(_ChannelEvent):
    sender: QualifiedId
    message_id: str
    timestamp: datetime
    text: str
    bot_id: str  # Jeeves' own qualified id in this conversation (app id or Roman bot id)
    mentions: tuple[Mention, ...] = ()
    quoted_message_id: str | None = None
    expires_after_ms: int | None = None


@dataclass(frozen=True)
class AppAdded(_ChannelEvent):
    name: str | None
    conversation_type: Literal["GROUP", "ONE_TO_ONE", "UNKNOWN"]
    members: tuple[Member, ...]
    bot_id: str
    timezone: str | None = None


@dataclass(frozen=True)
class UserJoined(_ChannelEvent):
    members: tuple[Member, ...]
    bot_id: str


@dataclass(frozen=True)
class UserLeft(_ChannelEvent):
    users: tuple[QualifiedId, ...]
    bot_id: str


@dataclass(frozen=True)
class ConversationDeleted(_ChannelEvent):
    pass


@dataclass(frozen=True)
class ButtonClicked(_ChannelEvent):
    sender: QualifiedId
    referenced_message_id: str  # the composite's message id (sidecar) or the poll id (Roman)
    button_id: str | None  # None when a Roman poll position no longer maps to a button
    button_index: int | None = None  # Roman's positional offset, echoed in its confirmation
    dedupe_key: str = field(default="", compare=False)


@dataclass(frozen=True)
class MessageDeleted(_ChannelEvent):
    sender: QualifiedId
    message_id: str


Event = TextMessage | AppAdded | UserJoined | UserLeft | ConversationDeleted | ButtonClicked | MessageDeleted
