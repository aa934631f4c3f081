"""Tasks of the bridge on the `respond` queue: answer commands and clicks, send replies, sync Roman members.

Thin: each parses its arguments and calls `wire_bridge.respond`. No message text in any argument:
commands and questions travel by claim check, like classify. A task is never handed a claim-check
key: it derives it from the channel it writes to and a message id (or ref), so a task sent by hand
(Flower can send any) cannot post one channel's text into another.

For other components (by name, without importing the bridge):
`send_task("wire_bridge.tasks.send_message", kwargs={"channel_id", "message_ref", "buttons": [[id, text], ...],
"reply_to": str|None})` posts the text parked under `claimcheck.key_for(channel_id, message_ref)`.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from ground.queues import Queue
from knowledge import channels
from pipeline import claimcheck, members
from wire_bridge import respond
from wire_bridge.commands import STATE_KINDS, Kind
from wire_bridge.events import ButtonClicked
from wire_bridge.outbound import (
    ATTEMPTS,
    BACKOFF_MAX_S,
    Button,
    OutboundError,
    PeerUnavailable,
    Reply,
    roman_members,
    send,
)

logger = logging.getLogger(__name__)

# A state change has already taken effect at the bridge; its acknowledgement may arrive late
# rather than never. Other commands expire with their claim-check text.
STATE_REPLY_EXPIRES_S = 600

# A peer answering 5xx or unreachable: the task is retried by Celery (exponential backoff capped at
# BACKOFF_MAX_S, full jitter), ATTEMPTS tries in all; a 4xx is not retried. What a failed attempt built
# is parked for the retry (wire_bridge/respond.py), and a delivered reply is marked, so none is posted twice.
OUTBOUND_RETRY = {
    "autoretry_for": (PeerUnavailable,),
    "retry_backoff": True,
    "retry_backoff_max": BACKOFF_MAX_S,
    "retry_jitter": True,
    "max_retries": ATTEMPTS - 1,
}


def _retrying(task, exc: OutboundError) -> bool:
    """True when Celery will try `exc`'s send again; on the last attempt (or called outside a worker) the
    failure is only logged."""
    request = task.request
    return isinstance(exc, PeerUnavailable) and not request.called_directly and request.retries < task.max_retries


def publish_command(channel_id: str, wire_msg_id: str, user_id: str, kind: Kind, outcome: str) -> None:
    expires = STATE_REPLY_EXPIRES_S if kind in STATE_KINDS else settings.JEEVES.queue_ttl_s
    respond_to_command.apply_async(
        kwargs={
            "channel_id": channel_id,
            "wire_msg_id": wire_msg_id,
            "user_id": user_id,
            "kind": kind.value,
            "outcome": outcome,
        },
        expires=expires,
    )


def button_command(button_id: str | None) -> Kind | None:
    """The command a `cmd:<kind>` button stands for."""
    if not button_id or not button_id.startswith("cmd:"):
        return None
    try:
        return Kind(button_id.removeprefix("cmd:"))
    except ValueError:
        return None


def publish_button(channel_id: str, event: ButtonClicked, outcome: str) -> None:
    respond_to_button.apply_async(
        kwargs={
            "channel_id": channel_id,
            "user_id": event.sender.qualified,
            "referenced_message_id": event.referenced_message_id,
            "button_id": event.button_id,
            "button_index": event.button_index,
            "outcome": outcome,
            "dedupe_key": event.dedupe_key,
        },
        expires=STATE_REPLY_EXPIRES_S,
    )


def publish_member_sync(channel_id: str) -> None:
    sync_roman_members.apply_async(kwargs={"channel_id": channel_id}, expires=STATE_REPLY_EXPIRES_S)


@shared_task(bind=True, name="wire_bridge.tasks.respond_to_command", queue=Queue.RESPOND.value, **OUTBOUND_RETRY)
def respond_to_command(self, channel_id: str, wire_msg_id: str, user_id: str, kind: str, outcome: str) -> None:
    try:
        respond.reply_to_command(channel_id, wire_msg_id, user_id, kind, outcome)
    except OutboundError as exc:
        if _retrying(self, exc):
            raise
        logger.warning("reply not delivered: channel=%s msg=%s (%s)", channel_id, wire_msg_id, type(exc).__name__)


@shared_task(bind=True, name="wire_bridge.tasks.respond_to_button", queue=Queue.RESPOND.value, **OUTBOUND_RETRY)
def respond_to_button(self, channel_id: str, **click: object) -> None:
    """`click`: the arguments of respond.reply_to_button after the channel, as publish_button names them."""
    try:
        respond.reply_to_button(channel_id, **click)
    except OutboundError as exc:
        if _retrying(self, exc):
            raise
        logger.warning("button reply not delivered: channel=%s (%s)", channel_id, type(exc).__name__)


@shared_task(bind=True, name="wire_bridge.tasks.send_message", queue=Queue.RESPOND.value, **OUTBOUND_RETRY)
def send_message(
    self, channel_id: str, message_ref: str, buttons: list[list[str]] | None = None, reply_to: str | None = None
) -> None:
    key = claimcheck.key_for(channel_id, message_ref)
    text = claimcheck.claim(key)
    if text is None:
        logger.info("send_message expired: channel=%s", channel_id)
        return
    reply = Reply(text, buttons=tuple(Button(b[0], b[1]) for b in buttons or []), reply_to=reply_to)
    try:
        send(channel_id, reply)
    except OutboundError as exc:
        if _retrying(self, exc):
            raise  # the text stays parked for the retry
        logger.warning("message not delivered: channel=%s (%s)", channel_id, type(exc).__name__)
        return
    claimcheck.discard(key)


@shared_task(name="wire_bridge.tasks.sync_roman_members", queue=Queue.RESPOND.value)
def sync_roman_members(channel_id: str) -> None:
    """Roman reports no departures: take the member list from its REST API when the bot joins."""
    try:
        users = roman_members(channel_id)
    except OutboundError as exc:
        logger.warning("roman members not synced: channel=%s (%s)", channel_id, type(exc).__name__)
        return
    known = {m.user_id: m for m in members.all_members(channel_id)}
    members.replace_all(channel_id, [known.get(u, members.Member(user_id=u)) for u in users])
    channels.settle_conversation_type(channel_id, len(users))
    logger.info("roman members synced: channel=%s members=%d", channel_id, len(users))
