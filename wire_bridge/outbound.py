"""The outbound Wire client: one interface (`send`, `confirm_button`), two transports (sidecar v1, Roman).

The conversation and (for Roman) the bearer token are always taken from the channel being
answered, never from the reply, so a reply cannot reach another channel. Each call is one POST over
the process's pooled HTTP client (`http_client()`); a 5xx or a connection error raises
`PeerUnavailable`, which the respond tasks retry through Celery (`wire_bridge.tasks.OUTBOUND_RETRY`:
ATTEMPTS in all, backoff capped at BACKOFF_MAX_S); a 4xx is never retried. Mention offsets go out in
UTF-16 code units.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from dataclasses import dataclass

import httpx
from django.conf import settings

from knowledge import channels
from wire_bridge import auth, roman
from wire_bridge.events import QualifiedId

logger = logging.getLogger(__name__)

# A send is tried this many times in all (the first and three Celery retries), at most BACKOFF_MAX_S apart.
ATTEMPTS = 4
BACKOFF_MAX_S = 1
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class MentionSpan:
    user_id: str  # qualified "uuid@domain"
    offset: int  # Python string index into the reply text
    length: int  # in Python characters, including the "@"


@dataclass(frozen=True)
class Button:
    id: str  # chosen by Jeeves, unique within the message, e.g. "cmd:resume"
    text: str


@dataclass(frozen=True)
class Reply:
    text: str
    mentions: tuple[MentionSpan, ...] = ()
    buttons: tuple[Button, ...] = ()
    reply_to: str | None = None

    def __post_init__(self) -> None:
        ids = [b.id for b in self.buttons]
        if len(ids) != len(set(ids)):
            raise ValueError("button ids must be unique within a message")
        for m in self.mentions:
            if not (0 <= m.offset and m.offset + m.length <= len(self.text)):
                raise ValueError("mention outside the text")

    def to_json(self) -> str:
        return json.dumps(
            {
                "text": self.text,
                "mentions": [[m.user_id, m.offset, m.length] for m in self.mentions],
                "buttons": [[b.id, b.text] for b in self.buttons],
                "reply_to": self.reply_to,
            }
        )

    @classmethod
    def from_json(cls, raw: str) -> Reply:
        data = json.loads(raw)
        return cls(
            data["text"],
            mentions=tuple(MentionSpan(u, o, n) for u, o, n in data["mentions"]),
            buttons=tuple(Button(i, t) for i, t in data["buttons"]),
            reply_to=data["reply_to"],
        )


class OutboundError(Exception):
    """The peer refused the message (4xx) or stayed unreachable after the retries."""


class PeerUnavailable(OutboundError):
    """The peer answered 5xx or could not be reached: the send may be tried again (the respond tasks retry it)."""


class ChannelGone(OutboundError):
    """The peer says Jeeves is no longer in the conversation (Roman 409)."""


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _utf16_mentions(reply: Reply) -> list[tuple[str, int, int]]:
    return [
        (
            m.user_id,
            utf16_len(reply.text[: m.offset]),
            utf16_len(reply.text[m.offset : m.offset + m.length]),
        )
        for m in reply.mentions
    ]


_client: httpx.Client | None = None
_client_pid = 0
_client_lock = threading.Lock()


def http_client() -> httpx.Client:
    """The process's HTTP client (connections kept alive and reused), created on first use in each process:
    a forked worker child builds its own instead of sharing the parent's sockets."""
    global _client, _client_pid
    if _client is None or _client_pid != os.getpid():
        with _client_lock:
            if _client is None or _client_pid != os.getpid():
                _client = httpx.Client(timeout=TIMEOUT_S)
                _client_pid = os.getpid()
    return _client


def _post(url: str, body: dict, token: str) -> httpx.Response:
    """One POST; PeerUnavailable on a 5xx or a connection error (the caller's task retries)."""
    try:
        response = http_client().post(url, json=body, headers={"Authorization": f"Bearer {token}"})
    except httpx.TransportError as exc:
        logger.warning("outbound %s: %s", url, type(exc).__name__)
        raise PeerUnavailable(f"{url} unreachable: {type(exc).__name__}") from None
    if response.status_code >= 500:
        logger.warning("outbound %s: HTTP %d", url, response.status_code)
        raise PeerUnavailable(f"{url} answered HTTP {response.status_code}")
    return response


def _message_id(response: httpx.Response) -> str | None:
    try:
        data = response.json()
    except ValueError:
        return None
    return data.get("messageId") if isinstance(data, dict) else None


class SidecarTransport:
    def __init__(self, channel_id: str) -> None:
        self.conversation = QualifiedId.parse(channel_id, settings.JEEVES.wire_default_domain)

    def _send(self, body: dict) -> httpx.Response:
        cfg = settings.JEEVES
        response = _post(f"{cfg.wire_sidecar_url}/v1/messages", body, cfg.wire_secret)
        if response.status_code >= 400:
            raise OutboundError(f"sidecar refused the message: HTTP {response.status_code}")
        return response

    def send(self, reply: Reply) -> str | None:
        conversation = {"id": self.conversation.id, "domain": self.conversation.domain}
        mentions = []
        for user_id, offset, length in _utf16_mentions(reply):
            user = QualifiedId.parse(user_id, self.conversation.domain)
            mentions.append({"userId": {"id": user.id, "domain": user.domain}, "offset": offset, "length": length})
        body: dict = {"conversationId": conversation, "text": reply.text, "mentions": mentions}
        if reply.buttons:
            body.update(type="composite", buttons=[{"id": b.id, "text": b.text} for b in reply.buttons])
        else:
            body.update(type="text", replyToMessageId=reply.reply_to)
        return _message_id(self._send(body))

    def confirm_button(
        self, referenced_message_id: str, button_id: str | None, user_id: str, index: int | None
    ) -> None:
        self._send(
            {
                "type": "button_confirmation",
                "conversationId": {"id": self.conversation.id, "domain": self.conversation.domain},
                "referencedMessageId": referenced_message_id,
                "buttonId": button_id,
            }
        )


class RomanTransport:
    def __init__(self, channel_id: str) -> None:
        self.channel_id = channel_id
        bot = channels.roman_bot_for_channel(channel_id)
        token = auth.decrypt_token(bot.token_ciphertext) if bot else None
        if token is None:
            raise OutboundError("no usable Roman bot token for this channel")
        self.token = token

    def _send(self, body: dict) -> httpx.Response:
        response = _post(f"{settings.JEEVES.roman_url}/api/conversation", body, self.token)
        if response.status_code == 409:
            channels.mark_left(self.channel_id)
            raise ChannelGone("Roman no longer knows this bot")
        if response.status_code >= 400:
            raise OutboundError(f"Roman refused the message: HTTP {response.status_code}")
        return response

    def send(self, reply: Reply) -> str | None:
        # Roman's ids carry no domain: send the bare id.
        mentions = [
            {"userId": QualifiedId.parse(u, "").id, "offset": o, "length": n} for u, o, n in _utf16_mentions(reply)
        ]
        text: dict = {"data": reply.text}
        if mentions:
            text["mentions"] = mentions
        if not reply.buttons:
            return _message_id(self._send({"type": "text", "text": text}))
        poll_id = str(uuid.uuid4())
        # Remember the ids before sending: a click can come back before the response does.
        roman.remember_poll(poll_id, self.channel_id, [b.id for b in reply.buttons])
        body = {
            "type": "poll",
            "text": text,
            "poll": {"id": poll_id, "type": "create", "buttons": [b.text for b in reply.buttons]},
        }
        self._send(body)
        return poll_id

    def confirm_button(
        self, referenced_message_id: str, button_id: str | None, user_id: str, index: int | None
    ) -> None:
        self._send(
            {
                "type": "poll",
                "poll": {
                    "id": referenced_message_id,
                    "type": "confirmation",
                    "offset": index or 0,
                    "userId": QualifiedId.parse(user_id, "").id,
                },
            }
        )


def roman_members(channel_id: str) -> list[str]:
    """Qualified ids of the human members of a Roman conversation (`GET /api/conversation`)."""
    transport = RomanTransport(channel_id)
    try:
        response = http_client().get(
            f"{settings.JEEVES.roman_url}/api/conversation", headers={"Authorization": f"Bearer {transport.token}"}
        )
    except httpx.TransportError as exc:
        raise OutboundError(f"Roman unreachable: {type(exc).__name__}") from None
    if response.status_code == 409:
        channels.mark_left(channel_id)
        raise ChannelGone("Roman no longer knows this bot")
    if response.status_code != 200:
        raise OutboundError(f"Roman refused: HTTP {response.status_code}")
    try:
        listed = response.json().get("members") or []
    except (ValueError, AttributeError):
        raise OutboundError("Roman answered with something other than a conversation") from None
    domain = settings.JEEVES.wire_default_domain
    return [
        QualifiedId.parse(str(m["id"]), domain).qualified
        for m in listed
        if isinstance(m, dict) and m.get("id") and not m.get("service")
    ]


def transport_for(channel_id: str) -> SidecarTransport | RomanTransport:
    channel = channels.get_channel(channel_id)
    if channel is None:
        raise OutboundError("unknown channel")
    if channel.left_at is not None:
        raise ChannelGone("Jeeves has left this channel")
    return RomanTransport(channel_id) if channel.transport == "roman" else SidecarTransport(channel_id)


def send(channel_id: str, reply: Reply) -> str | None:
    """Post `reply` into `channel_id`; returns the peer's message (or poll) id."""
    message_id = transport_for(channel_id).send(reply)
    logger.info("reply sent: channel=%s message=%s buttons=%d", channel_id, message_id, len(reply.buttons))
    return message_id


def confirm_button(
    channel_id: str, referenced_message_id: str, button_id: str | None, user_id: str, index: int | None = None
) -> None:
    transport_for(channel_id).confirm_button(referenced_message_id, button_id, user_id, index)
