"""The command table: which handler answers each command kind of the grammar (docs/wire-protocols.md §6).

`ROUTES` has one entry per `Kind`; `dispatch()` looks the kind up and calls its handler. Every handler
has the same signature, `handler(request: Request) -> Reply`: it reads through `retrieval` (lists,
status, catch me up, questions, my week), writes through `knowledge` services (done, supersede,
context, digest), and words the result into a Wire message here in the bridge (`wire_bridge/replies.py`).
The respond worker (wire_bridge/respond.py) calls `dispatch()`; it never branches on the kind itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from ground import keys
from ground.redis import get_redis
from knowledge import channels, proactive, review
from knowledge.models import ChannelState
from pipeline import members
from retrieval import commands, digest
from retrieval.answer import voice
from retrieval.scope import RetrievalScope, UnknownChannel
from wire_bridge import replies
from wire_bridge.commands import Command, Kind, known_friendly_id, split_list
from wire_bridge.outbound import Button, MentionSpan, Reply

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


@dataclass(frozen=True)
class Request:
    """One command to answer: who asked where, what the grammar made of it, and what ingest already did."""

    channel_id: str
    user_id: str
    wire_msg_id: str  # the command's message ("" for a button click)
    command: Command
    mentioned: tuple[str, ...] = ()  # members the message mentioned, Jeeves excepted
    outcome: str = ""  # a state command's outcome from wire_bridge/state.py (applied at ingest)


Handler = Callable[[Request], Reply]


@dataclass(frozen=True)
class Route:
    kind: Kind
    handler: Handler


def state_reply(outcome: str) -> Reply:
    buttons = STATE_BUTTONS[_OUTCOME_STATE[outcome]] if outcome in _OUTCOME_STATE else ()
    return Reply(STATE_REPLIES[outcome], buttons=buttons)


def question_allowed(user_id: str) -> bool:
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


# --------------------------------------------------------------------------- writes, worded here


def done_text(channel_id: str, user_id: str, raw_id: str) -> str:
    """`done ACT-n` and the staleness nudge's Done button: the action marked done, or why not."""
    fid = known_friendly_id(raw_id, "ACT")
    if fid is None:
        return replies.ACTION_ID_UNKNOWN
    try:
        action = review.mark_action_done(channel_id, fid, by=user_id)
    except review.ReviewError:
        return replies.NO_RECORD_OF.format(value=fid)
    return voice(replies.ACTION_DONE.format(value=fid, description=action.description))


def supersede_text(channel_id: str, user_id: str, old_raw_id: str, new_raw_id: str) -> str:
    """`supersede DEC-n with DEC-m` and the contradiction prompt's Supersede button."""
    old, new = known_friendly_id(old_raw_id, "DEC"), known_friendly_id(new_raw_id, "DEC")
    if old is None or new is None:
        return replies.DECISION_IDS_UNKNOWN
    try:
        review.supersede_decision(channel_id, old, new, by=user_id)
    except review.ReviewError as exc:
        if exc.reason == "unknown decision":
            return replies.NO_RECORD_OF_BOTH.format(old=old, new=new)
        return replies.CANNOT.format(reason=exc.reason)
    return voice(replies.SUPERSEDED.format(old=old, new=new))


# --------------------------------------------------------------------------- the handlers


def _state(request: Request) -> Reply:
    """pause, resume, secure, secure off: the change took effect at ingest; this words its outcome."""
    return state_reply(request.outcome)


def _question(request: Request) -> Reply:
    if not question_allowed(request.user_id):
        return Reply(replies.TOO_MANY_QUESTIONS, reply_to=request.wire_msg_id)
    answer = commands.answer_question(request.channel_id, request.user_id, request.command.argument)
    return Reply(answer, reply_to=request.wire_msg_id)


def _status(request: Request) -> Reply:
    channel = channels.get_channel(request.channel_id)
    buttons = STATE_BUTTONS.get(channel.state, ()) if channel else ()
    return Reply(commands.channel_status(request.channel_id, request.user_id), buttons=buttons)


def _catch_up(request: Request) -> Reply:
    return Reply(commands.catch_me_up(request.channel_id, request.user_id, request.wire_msg_id))


def _my_week(request: Request) -> Reply:
    return Reply(digest.my_week(request.channel_id, request.user_id))


def _digest_on(request: Request) -> Reply:
    return _set_digest(request.channel_id, request.user_id, enabled=True)


def _digest_off(request: Request) -> Reply:
    return _set_digest(request.channel_id, request.user_id, enabled=False)


def _set_digest(channel_id: str, user_id: str, *, enabled: bool) -> Reply:
    """The Monday note is personal: it is delivered only into a 1:1 (the same scope a 1:1 question has)."""
    try:
        personal = RetrievalScope.for_asker(channel_id, user_id).personal
    except UnknownChannel:
        return Reply(commands.NOT_ACQUAINTED)
    channel = channels.get_channel(channel_id)
    if not personal or channel is None:
        return Reply(replies.DIGEST_PRIVATE_ONLY)
    proactive.set_digest(channel, user_id, enabled)
    return Reply(replies.DIGEST_ON if enabled else replies.DIGEST_OFF)


def _decisions(request: Request) -> Reply:
    return Reply(commands.list_decisions(request.channel_id, request.user_id))


def _actions(request: Request) -> Reply:
    return Reply(commands.list_actions(request.channel_id, request.user_id, False))


def _actions_mine(request: Request) -> Reply:
    return Reply(commands.list_actions(request.channel_id, request.user_id, True))


def _done(request: Request) -> Reply:
    return Reply(done_text(request.channel_id, request.user_id, request.command.ids[0]))


def _supersede(request: Request) -> Reply:
    old, new = request.command.ids
    return Reply(supersede_text(request.channel_id, request.user_id, old, new))


def _context_unclear(request: Request) -> Reply | None:
    """Nothing to note: no argument (and, for stakeholders, nobody mentioned either)."""
    if request.command.argument:
        return None
    if request.command.kind == Kind.CONTEXT_STAKEHOLDERS and request.mentioned:
        return None
    return Reply(replies.CONTEXT_EMPTY.format(handle=settings.JEEVES.wire_handle))


def _context_purpose(request: Request) -> Reply:
    if unclear := _context_unclear(request):
        return unclear
    channels.set_context(request.channel_id, "purpose", request.command.argument, by=request.user_id)
    return Reply(replies.CONTEXT_PURPOSE)


def _context_type(request: Request) -> Reply:
    if unclear := _context_unclear(request):
        return unclear
    value = request.command.argument.strip(" .").lower()
    if value not in CONTEXT_TYPES:
        return Reply(replies.CONTEXT_TYPE_UNKNOWN)
    channels.set_context(request.channel_id, "context_type", value, by=request.user_id)
    return Reply(replies.CONTEXT_TYPE.format(value=value))


def _context_tags(request: Request) -> Reply:
    if unclear := _context_unclear(request):
        return unclear
    tags = [t.lower() for t in split_list(request.command.argument)]
    channels.set_context(request.channel_id, "tags", tags, by=request.user_id)
    return Reply(replies.CONTEXT_TAGS.format(value=", ".join(tags)))


def _context_related(request: Request) -> Reply:
    if unclear := _context_unclear(request):
        return unclear
    related = split_list(request.command.argument)
    channels.set_context(request.channel_id, "related_channels", related, by=request.user_id)
    return Reply(replies.CONTEXT_RELATED.format(value=", ".join(related)))


def _context_stakeholders(request: Request) -> Reply:
    """Mentioned members are stored by id and named back with a mention; other names are kept as written."""
    if unclear := _context_unclear(request):
        return unclear
    mentioned = list(request.mentioned)
    known = {m.user_id: m for m in members.all_members(request.channel_id)}
    plain = split_list(request.command.argument)
    channels.set_context(request.channel_id, "stakeholders", [*mentioned, *plain], by=request.user_id)
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


def _dismiss(request: Request) -> Reply:
    return Reply(replies.DISMISSED)


def _help(request: Request) -> Reply:
    return Reply(replies.HELP.format(handle=settings.JEEVES.wire_handle))


def _empty(request: Request) -> Reply:
    return Reply(replies.EMPTY.format(handle=settings.JEEVES.wire_handle))


ROUTES: tuple[Route, ...] = (
    Route(Kind.PAUSE, _state),
    Route(Kind.RESUME, _state),
    Route(Kind.SECURE, _state),
    Route(Kind.SECURE_OFF, _state),
    Route(Kind.STATUS, _status),
    Route(Kind.CATCH_UP, _catch_up),
    Route(Kind.CONTEXT, _context_purpose),
    Route(Kind.CONTEXT_TYPE, _context_type),
    Route(Kind.CONTEXT_TAGS, _context_tags),
    Route(Kind.CONTEXT_STAKEHOLDERS, _context_stakeholders),
    Route(Kind.CONTEXT_RELATED, _context_related),
    Route(Kind.DECISIONS, _decisions),
    Route(Kind.ACTIONS, _actions),
    Route(Kind.ACTIONS_MINE, _actions_mine),
    Route(Kind.DONE, _done),
    Route(Kind.SUPERSEDE, _supersede),
    Route(Kind.MY_WEEK, _my_week),
    Route(Kind.DIGEST_ON, _digest_on),
    Route(Kind.DIGEST_OFF, _digest_off),
    Route(Kind.DISMISS, _dismiss),
    Route(Kind.HELP, _help),
    Route(Kind.EMPTY, _empty),
    Route(Kind.QUESTION, _question),
)
HANDLERS: dict[Kind, Handler] = {route.kind: route.handler for route in ROUTES}


def dispatch(request: Request) -> Reply:
    """The reply to one command: its kind's handler from the table."""
    return HANDLERS[request.command.kind](request)
