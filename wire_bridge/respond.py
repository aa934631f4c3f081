"""What the respond worker does for a command, a question or a button click: build the reply, send it.

Knowledge-reading commands are answered by `retrieval.commands`; the bridge words the state,
context and housekeeping replies itself (wire_bridge/replies.py).
"""

from __future__ import annotations

import json
import logging

from django.conf import settings

from jeeves import keys
from jeeves.redis import get_redis
from knowledge import channels, contradictions, proactive, review
from knowledge.models import ChannelState
from pipeline import claimcheck, members
from retrieval import commands as knowledge_commands
from retrieval import digest
from retrieval.scope import RetrievalScope, UnknownChannel
from wire_bridge import replies
from wire_bridge.commands import Command, Kind, parse, split_list
from wire_bridge.outbound import Button, MentionSpan, PeerUnavailable, Reply, send

logger = logging.getLogger(__name__)

CONTEXT_TYPES = ("customer", "project", "team", "general")

STATE_REPLIES: dict[str, str] = {
    "paused": replies.PAUSED,
    "already_paused": replies.ALREADY_PAUSED,
    "still_secure": replies.STILL_SECURE,
    "secure": replies.SECURED,
    "already_secure": replies.ALREADY_SECURE,
    "active": replies.RESUMED,
    "already_active": replies.ALREADY_ACTIVE,
}
# Buttons offered with a state reply and with the status: the way out of the state one is in.
STATE_BUTTONS: dict[str, tuple[Button, ...]] = {
    ChannelState.ACTIVE: (Button("cmd:pause", "Step out"), Button("cmd:secure", "Secure mode")),
    ChannelState.PAUSED: (Button("cmd:resume", "Resume"), Button("cmd:secure", "Secure mode")),
    ChannelState.SECURE: (Button("cmd:secure_off", "Ears on"),),
}
_OUTCOME_STATE = {
    "paused": ChannelState.PAUSED,
    "already_paused": ChannelState.PAUSED,
    "still_secure": ChannelState.SECURE,
    "secure": ChannelState.SECURE,
    "already_secure": ChannelState.SECURE,
}


def already_replied(channel_id: str, ref: str) -> bool:
    return bool(get_redis().exists(keys.REPLIED.key(channel_id, ref)))


def _mark_replied(channel_id: str, ref: str) -> None:
    pipe = get_redis().pipeline()
    pipe.set(keys.REPLIED.key(channel_id, ref), 1, ex=keys.REPLIED.ttl_s())
    pipe.delete(_undelivered_key(channel_id, ref))
    pipe.execute()


def _undelivered_key(channel_id: str, ref: str) -> str:
    return claimcheck.key_for(channel_id, f"reply:{ref}")


def _undelivered(channel_id: str, ref: str) -> Reply | None:
    """The reply a failed attempt built, for its task's retry to send as it is: a command's effect is not
    applied twice, a question neither answered nor counted twice, a click not confirmed twice."""
    raw = claimcheck.claim(_undelivered_key(channel_id, ref))
    return None if raw is None else Reply.from_json(raw)


def _deliver(channel_id: str, ref: str, reply: Reply) -> None:
    """Send `reply`; when the peer is unavailable, park it (claim-check TTL) for the task's retry, and re-raise."""
    try:
        send(channel_id, reply)
    except PeerUnavailable:
        claimcheck.park(channel_id, f"reply:{ref}", reply.to_json())
        raise


def state_reply(outcome: str) -> Reply:
    buttons = STATE_BUTTONS[_OUTCOME_STATE[outcome]] if outcome in _OUTCOME_STATE else ()
    return Reply(STATE_REPLIES[outcome], buttons=buttons)


def reply_to_command(channel_id: str, wire_msg_id: str, user_id: str, kind: str, outcome: str) -> None:
    """Answer one command or question addressed to Jeeves, at most once per message (its text parked by
    the bridge under the channel's claim-check key for that message)."""
    key = claimcheck.key_for(channel_id, wire_msg_id)
    if already_replied(channel_id, wire_msg_id):
        return
    reply = _undelivered(channel_id, wire_msg_id)  # built by an earlier attempt the peer did not take
    if reply is None and outcome in STATE_REPLIES:
        reply = state_reply(outcome)
    elif reply is None:
        raw = claimcheck.claim(key)
        if raw is None:
            reply = Reply(replies.EXPIRED, reply_to=wire_msg_id)
        else:
            payload = json.loads(raw)
            command = parse(payload["body"])
            if command.kind == Kind.CONTEXT_STAKEHOLDERS:
                # The argument without the mentioned names: they are stored by id instead.
                command = Command(command.kind, argument=parse(payload.get("plain", "")).argument)
            reply = build_reply(channel_id, user_id, wire_msg_id, command, payload.get("mentions", []))
    _deliver(channel_id, wire_msg_id, reply)
    _mark_replied(channel_id, wire_msg_id)
    claimcheck.discard(key)


def _question_allowed(user_id: str) -> bool:
    """At most JEEVES_QUESTIONS_PER_MINUTE questions per person per minute (each may call a model), across
    channels; a fixed one-minute window on Redis' clock."""
    limit = settings.JEEVES.questions_per_minute
    if limit <= 0:
        return True
    key = keys.QUESTIONS.key(user_id)
    pipe = get_redis().pipeline()
    pipe.incr(key)
    pipe.expire(key, keys.QUESTIONS.ttl_s(), nx=True)
    count, _ = pipe.execute()
    return int(count) <= limit


def build_reply(channel_id: str, user_id: str, wire_msg_id: str, command: Command, mentioned: list[str]) -> Reply:
    handle = settings.JEEVES.wire_handle
    match command.kind:
        case Kind.QUESTION:
            if not _question_allowed(user_id):
                return Reply(replies.TOO_MANY_QUESTIONS, reply_to=wire_msg_id)
            answer = knowledge_commands.answer_question(channel_id, user_id, command.argument)
            return Reply(answer, reply_to=wire_msg_id)
        case Kind.STATUS:
            channel = channels.get_channel(channel_id)
            buttons = STATE_BUTTONS.get(channel.state, ()) if channel else ()
            return Reply(knowledge_commands.channel_status(channel_id, user_id), buttons=buttons)
        case Kind.CATCH_UP:
            return Reply(knowledge_commands.catch_me_up(channel_id, user_id, wire_msg_id))
        case Kind.MY_WEEK:
            return Reply(digest.my_week(channel_id, user_id))
        case Kind.DIGEST_ON | Kind.DIGEST_OFF:
            return _set_digest(channel_id, user_id, command.kind == Kind.DIGEST_ON)
        case Kind.DECISIONS:
            return Reply(knowledge_commands.list_decisions(channel_id, user_id))
        case Kind.ACTIONS | Kind.ACTIONS_MINE:
            return Reply(knowledge_commands.list_actions(channel_id, user_id, command.kind == Kind.ACTIONS_MINE))
        case Kind.DONE:
            return Reply(knowledge_commands.mark_action_done(channel_id, user_id, command.ids[0]))
        case Kind.SUPERSEDE:
            old, new = command.ids
            return Reply(knowledge_commands.supersede_decision(channel_id, user_id, old, new))
        case Kind.CONTEXT | Kind.CONTEXT_TYPE | Kind.CONTEXT_TAGS | Kind.CONTEXT_STAKEHOLDERS | Kind.CONTEXT_RELATED:
            return _set_context(channel_id, user_id, command, mentioned)
        case Kind.DISMISS:
            return Reply(replies.DISMISSED)
        case Kind.HELP:
            return Reply(replies.HELP.format(handle=handle))
        case Kind.EMPTY:
            return Reply(replies.EMPTY.format(handle=handle))
    raise AssertionError(f"no reply for {command.kind}")


def _set_context(channel_id: str, user_id: str, command: Command, mentioned: list[str]) -> Reply:
    argument = command.argument
    if not argument and not (command.kind == Kind.CONTEXT_STAKEHOLDERS and mentioned):
        return Reply(replies.CONTEXT_EMPTY.format(handle=settings.JEEVES.wire_handle))
    match command.kind:
        case Kind.CONTEXT:
            channels.set_context(channel_id, "purpose", argument, by=user_id)
            return Reply(replies.CONTEXT_PURPOSE)
        case Kind.CONTEXT_TYPE:
            value = argument.strip(" .").lower()
            if value not in CONTEXT_TYPES:
                return Reply(replies.CONTEXT_TYPE_UNKNOWN)
            channels.set_context(channel_id, "context_type", value, by=user_id)
            return Reply(replies.CONTEXT_TYPE.format(value=value))
        case Kind.CONTEXT_TAGS:
            tags = [t.lower() for t in split_list(argument)]
            channels.set_context(channel_id, "tags", tags, by=user_id)
            return Reply(replies.CONTEXT_TAGS.format(value=", ".join(tags)))
        case Kind.CONTEXT_RELATED:
            related = split_list(argument)
            channels.set_context(channel_id, "related_channels", related, by=user_id)
            return Reply(replies.CONTEXT_RELATED.format(value=", ".join(related)))
    return _set_stakeholders(channel_id, user_id, argument, mentioned)


def _set_digest(channel_id: str, user_id: str, enabled: bool) -> Reply:
    """The Monday note is personal: it is delivered only into a 1:1 (the same scope a 1:1 question has)."""
    try:
        personal = RetrievalScope.for_asker(channel_id, user_id).personal
    except UnknownChannel:
        return Reply(knowledge_commands.NOT_ACQUAINTED)
    channel = channels.get_channel(channel_id)
    if not personal or channel is None:
        return Reply(replies.DIGEST_PRIVATE_ONLY)
    proactive.set_digest(channel, user_id, enabled)
    return Reply(replies.DIGEST_ON if enabled else replies.DIGEST_OFF)


def _set_stakeholders(channel_id: str, user_id: str, argument: str, mentioned: list[str]) -> Reply:
    """Mentioned members are stored by id and named back with a mention; other names are kept as written."""
    known = {m.user_id: m for m in members.all_members(channel_id)}
    plain = split_list(argument)
    channels.set_context(channel_id, "stakeholders", [*mentioned, *plain], by=user_id)
    text = replies.CONTEXT_STAKEHOLDERS
    spans: list[MentionSpan] = []
    for uid in mentioned:
        member = known.get(uid)
        name = (member.name or member.handle) if member else None
        label = "@" + (name or uid.split("@")[0])
        if spans:
            text += ", "
        spans.append(MentionSpan(uid, len(text), len(label)))
        text += label
    if plain:
        text += (", " if spans else "") + ", ".join(plain)
    return Reply(text + ".", mentions=tuple(spans))


def reply_to_button(
    channel_id: str,
    user_id: str,
    referenced_message_id: str,
    button_id: str | None,
    button_index: int | None,
    outcome: str,
    dedupe_key: str,
) -> None:
    """Confirm a click to the peer, then act on the button and answer."""
    ref = f"button:{dedupe_key}"
    if already_replied(channel_id, ref):
        return
    from wire_bridge.outbound import confirm_button

    # A parked reply means an earlier attempt confirmed the click and acted on it already.
    reply = _undelivered(channel_id, ref)
    if reply is None:
        confirm_button(channel_id, referenced_message_id, button_id, user_id, button_index)
        reply = button_reply(channel_id, user_id, button_id, outcome)
    _deliver(channel_id, ref, reply)
    _mark_replied(channel_id, ref)


def button_reply(channel_id: str, user_id: str, button_id: str | None, outcome: str) -> Reply:
    """Button ids Jeeves hands out: `cmd:<command>`, `stale:ACT-n:open|done|cancel`,
    `contradiction:DEC-a:DEC-b:<choice>`."""
    if button_id is None:
        return Reply(replies.BUTTON_LAPSED)
    if outcome in STATE_REPLIES:
        return state_reply(outcome)
    prefix, _, rest = button_id.partition(":")
    if prefix == "cmd":
        try:
            kind = Kind(rest)
        except ValueError:
            return Reply(replies.BUTTON_UNKNOWN)
        if kind in {Kind.STATUS, Kind.HELP, Kind.DECISIONS, Kind.ACTIONS, Kind.ACTIONS_MINE, Kind.CATCH_UP}:
            return build_reply(channel_id, user_id, "", Command(kind), [])
    if prefix == "stale":
        friendly, _, choice = rest.partition(":")
        if choice == "done":
            return Reply(knowledge_commands.mark_action_done(channel_id, user_id, friendly))
        if choice in {"open", "cancel"}:
            return _stale_answer(channel_id, user_id, friendly, choice)
    if prefix == "contradiction":
        parts = rest.split(":")
        if len(parts) == 3 and parts[2] in contradictions.CHOICES:
            return _contradiction_answer(channel_id, user_id, *parts)
    return Reply(replies.BUTTON_UNKNOWN)


def _contradiction_answer(channel_id: str, user_id: str, older: str, newer: str, choice: str) -> Reply:
    """A raised pair answered: supersede (the older superseded by the newer), keep both, or dismiss.
    Either way the pair is closed and never raised again."""
    if choice == "supersede":
        text = knowledge_commands.supersede_decision(channel_id, user_id, older, newer)
    else:
        text = replies.CONTRADICTION_KEPT if choice == "keep" else replies.DISMISSED
    contradictions.resolve(channel_id, older, newer, choice, by=user_id)
    return Reply(text)


def _stale_answer(channel_id: str, user_id: str, friendly_id: str, choice: str) -> Reply:
    """A staleness nudge answered "still in progress" (the next nudge waits) or "cancel" (withdrawn)."""
    try:
        if choice == "open":
            review.keep_action_open(channel_id, friendly_id, by=user_id)
            return Reply(replies.STALE_STILL_OPEN.format(value=friendly_id))
        review.cancel_action(channel_id, friendly_id, by=user_id)
        return Reply(replies.STALE_CANCELLED.format(value=friendly_id))
    except review.ReviewError as exc:
        if exc.reason == "unknown action":
            return Reply(f"I'm afraid I have no record of {friendly_id} in this channel.")
        return Reply(f"I'm afraid I cannot do that: {exc.reason}.")
