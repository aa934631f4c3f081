"""What the respond worker does for a command, a question or a button click: build the reply, send it.

The reply to a command comes from its handler in the command table (wire_bridge/dispatch.py): reads
through `retrieval`, writes through `knowledge` services, wording in wire_bridge/replies.py.
"""

from __future__ import annotations

import json
import logging

from ground import keys
from ground.redis import get_redis
from knowledge import contradictions, review
from pipeline import claimcheck
from wire_bridge import replies
from wire_bridge.commands import STATE_KINDS, Command, Kind, parse
from wire_bridge.dispatch import STATE_REPLIES, Request, dispatch, done_text, supersede_text
from wire_bridge.outbound import PeerUnavailable, Reply, send

logger = logging.getLogger(__name__)

# `cmd:<kind>` buttons that only read: answered like the command itself.
READ_BUTTONS: frozenset[Kind] = frozenset(
    {Kind.STATUS, Kind.HELP, Kind.DECISIONS, Kind.ACTIONS, Kind.ACTIONS_MINE, Kind.CATCH_UP}
)


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


def reply_to_command(channel_id: str, wire_msg_id: str, user_id: str, kind: str, outcome: str) -> None:
    """Answer one command or question addressed to Jeeves, at most once per message (its text parked by
    the bridge under the channel's claim-check key for that message)."""
    key = claimcheck.key_for(channel_id, wire_msg_id)
    if already_replied(channel_id, wire_msg_id):
        return
    reply = _undelivered(channel_id, wire_msg_id)  # built by an earlier attempt the peer did not take
    if reply is None and kind in STATE_KINDS:
        # The change took effect at ingest: the reply is worded from its outcome, without the parked text.
        reply = dispatch(Request(channel_id, user_id, wire_msg_id, Command(Kind(kind)), outcome=outcome))
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


def build_reply(channel_id: str, user_id: str, wire_msg_id: str, command: Command, mentioned: list[str]) -> Reply:
    """The reply to a parsed command (not a state change: those are worded from their outcome)."""
    return dispatch(Request(channel_id, user_id, wire_msg_id, command, mentioned=tuple(mentioned)))


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
    prefix, _, rest = button_id.partition(":")
    if prefix == "cmd":
        try:
            kind = Kind(rest)
        except ValueError:
            return Reply(replies.BUTTON_UNKNOWN)
        if kind in READ_BUTTONS or (kind in STATE_KINDS and outcome in STATE_REPLIES):
            # A state button's change took effect at ingest (`outcome`); the others answer like the command.
            return dispatch(Request(channel_id, user_id, "", Command(kind), outcome=outcome))
    if prefix == "stale":
        friendly, _, choice = rest.partition(":")
        if choice == "done":
            return Reply(done_text(channel_id, user_id, friendly))
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
        text = supersede_text(channel_id, user_id, older, newer)
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
            return Reply(replies.NO_RECORD_OF.format(value=friendly_id))
        return Reply(replies.CANNOT.format(reason=exc.reason))
