"""Roman adapter: Roman's webhook JSON (`POST /wire/roman`) translated into the internal event model.

Roman's gaps are bridged here: ids carry no domain (JEEVES_WIRE_DEFAULT_DOMAIN is added),
`user_joined` names no conversation (looked up by bot id), there is no user-left event (the
member cache is refreshed from `GET /api/conversation` when the bot joins), and buttons are
polls answered by position (the poll's button ids are kept in Redis to map a position back).
"""

from __future__ import annotations

import json
import logging
from typing import Annotated, Literal

from django.conf import settings
from django.utils import timezone
from pydantic import Field, TypeAdapter

from ground import keys
from ground.redis import get_redis
from knowledge import channels
from wire_bridge import auth, events
from wire_bridge.inbound import Ident, MessageText, Name, Schema

logger = logging.getLogger(__name__)


class RomanMention(Schema):
    userId: Ident
    offset: Annotated[int, Field(ge=0)]
    length: Annotated[int, Field(ge=1)]


class RomanText(Schema):
    data: MessageText
    mentions: list[RomanMention] | None = None


class RomanPoll(Schema):
    id: Ident
    offset: Annotated[int, Field(ge=0, le=1000)]


class BotRequest(Schema):
    type: Literal["conversation.bot_request"]
    botId: Ident
    conversationId: Ident
    userId: Ident | None = None
    conversation: Name | None = None
    handle: Name | None = None
    locale: Name | None = None
    token: Annotated[str, Field(min_length=1, max_length=4096)]


class Init(Schema):
    type: Literal["conversation.init"]
    botId: Ident
    conversationId: Ident
    userId: Ident | None = None
    conversation: Name | None = None
    messageId: Ident | None = None
    token: str | None = None


class NewText(Schema):
    type: Literal["conversation.new_text"]
    botId: Ident
    userId: Ident
    conversationId: Ident
    messageId: Ident
    refMessageId: Ident | None = None
    text: RomanText
    token: str | None = None


class UserJoined(Schema):
    type: Literal["conversation.user_joined"]
    botId: Ident
    userId: Ident
    handle: Name | None = None
    token: str | None = None


class BotRemoved(Schema):
    type: Literal["conversation.bot_removed"]
    botId: Ident
    conversationId: Ident | None = None


class PollAction(Schema):
    type: Literal["conversation.poll.action"]
    userId: Ident
    conversationId: Ident
    messageId: Ident | None = None
    botId: Ident | None = None
    poll: RomanPoll
    token: str | None = None


RomanPush = Annotated[BotRequest | Init | NewText | UserJoined | BotRemoved | PollAction, Field(discriminator="type")]
_adapter: TypeAdapter[RomanPush] = TypeAdapter(RomanPush)
KNOWN_TYPES = frozenset(
    {
        "conversation.bot_request",
        "conversation.init",
        "conversation.new_text",
        "conversation.user_joined",
        "conversation.bot_removed",
        "conversation.poll.action",
    }
)


def parse(payload: object) -> RomanPush | None:
    """A validated Roman push; None for a type Jeeves ignores (reactions, images, pings, ...)."""
    if isinstance(payload, dict) and isinstance(payload.get("type"), str) and payload["type"] not in KNOWN_TYPES:
        return None
    return _adapter.validate_python(payload)


def qid(raw: str) -> events.QualifiedId:
    return events.QualifiedId.parse(raw, settings.JEEVES.wire_default_domain)


def translate(push: RomanPush) -> events.Event | None:
    """The internal event of a push (storing a lifelong token on the way); None when nothing follows."""
    match push:
        case BotRequest() | Init():
            conversation = qid(push.conversationId)
            if isinstance(push, BotRequest):
                channels.store_roman_bot(push.botId, conversation.qualified, auth.encrypt_token(push.token))
            members = (events.Member(qid(push.userId), "ADMIN"),) if push.userId else ()
            return events.AppAdded(
                conversation=conversation,
                transport="roman",
                name=push.conversation,
                conversation_type="UNKNOWN",  # settled from Roman's member list (sync_roman_members)
                members=members,
                bot_id=qid(push.botId).qualified,
            )
        case NewText():
            mentions = tuple(events.Mention(qid(m.userId), m.offset, m.length) for m in push.text.mentions or [])
            return events.TextMessage(
                conversation=qid(push.conversationId),
                transport="roman",
                sender=qid(push.userId),
                message_id=push.messageId,
                timestamp=timezone.now(),  # Roman sends no message time; arrival is the closest there is
                text=push.text.data,
                bot_id=qid(push.botId).qualified,
                mentions=mentions,
                quoted_message_id=push.refMessageId,
            )
        case UserJoined():
            bot = channels.roman_bot(push.botId)
            if bot is None or not bot.channel_id:
                logger.info("roman user_joined for an unknown bot=%s: ignored", push.botId)
                return None
            return events.UserJoined(
                conversation=qid(bot.channel_id),
                transport="roman",
                members=(events.Member(qid(push.userId), "MEMBER", None, push.handle),),
                bot_id=qid(push.botId).qualified,
            )
        case BotRemoved():
            channel_id = channels.remove_roman_bot(push.botId)
            if push.conversationId:
                channel_id = qid(push.conversationId).qualified
            if channel_id is None:
                return None
            bot_qid = qid(push.botId)
            return events.UserLeft(
                conversation=qid(channel_id), transport="roman", users=(bot_qid,), bot_id=bot_qid.qualified
            )
        case PollAction():
            conversation = qid(push.conversationId)
            if push.token and push.botId and channels.roman_bot(push.botId) is None:
                channels.store_roman_bot(push.botId, conversation.qualified, auth.encrypt_token(push.token))
            return events.ButtonClicked(
                conversation=conversation,
                transport="roman",
                sender=qid(push.userId),
                referenced_message_id=push.poll.id,
                button_id=poll_button(push.poll.id, conversation.qualified, push.poll.offset),
                button_index=push.poll.offset,
                dedupe_key=push.messageId or f"{push.poll.id}:{push.userId}:{push.poll.offset}",
            )
    raise AssertionError(f"unhandled roman push {type(push).__name__}")


def remember_poll(poll_id: str, channel_id: str, button_ids: list[str]) -> None:
    get_redis().set(
        keys.POLL.key(poll_id), json.dumps({"channel_id": channel_id, "buttons": button_ids}), ex=keys.POLL.ttl_s()
    )


def poll_button(poll_id: str, channel_id: str, offset: int) -> str | None:
    """The button id at `offset` of a poll Jeeves sent to `channel_id` (None if unknown or another channel's)."""
    raw = get_redis().get(keys.POLL.key(poll_id))
    if raw is None:
        return None
    data = json.loads(raw)
    if data.get("channel_id") != channel_id or not 0 <= offset < len(data.get("buttons", [])):
        return None
    return data["buttons"][offset]
