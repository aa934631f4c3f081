"""The command router's grammar: is a message addressed to Jeeves, and which command (docs/wire-protocols.md §6) is it.

Pure functions, no I/O: the bridge uses them at ingest (state commands take effect there, before
anything is queued) and the respond worker re-parses the parked body for the arguments. Which handler
answers each `Kind` is the table of wire_bridge/dispatch.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from wire_bridge.events import Mention


class Kind(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    SECURE = "secure"
    SECURE_OFF = "secure_off"
    STATUS = "status"
    CATCH_UP = "catch_up"
    CONTEXT = "context"
    CONTEXT_TYPE = "context_type"
    CONTEXT_TAGS = "context_tags"
    CONTEXT_STAKEHOLDERS = "context_stakeholders"
    CONTEXT_RELATED = "context_related"
    DECISIONS = "decisions"
    ACTIONS = "actions"
    ACTIONS_MINE = "actions_mine"
    DONE = "done"
    SUPERSEDE = "supersede"
    MY_WEEK = "my_week"
    DIGEST_ON = "digest_on"
    DIGEST_OFF = "digest_off"
    DISMISS = "dismiss"
    HELP = "help"
    EMPTY = "empty"
    QUESTION = "question"


# Commands that change consent: applied synchronously by the bridge, in every state.
STATE_KINDS: frozenset[Kind] = frozenset({Kind.PAUSE, Kind.RESUME, Kind.SECURE, Kind.SECURE_OFF})


@dataclass(frozen=True)
class Command:
    kind: Kind
    argument: str = ""  # the free text after "context:", "context tags:", ... (stripped)
    ids: tuple[str, ...] = ()  # friendly ids, normalised (ACT-0012, DEC-0003)


_FIXED: dict[str, Kind] = {
    "pause": Kind.PAUSE,
    "step out": Kind.PAUSE,
    "resume": Kind.RESUME,
    "come back": Kind.RESUME,
    "unpause": Kind.RESUME,
    "secure mode": Kind.SECURE,
    "secure mode on": Kind.SECURE,
    "ears off": Kind.SECURE,
    "secure mode off": Kind.SECURE_OFF,
    "ears on": Kind.SECURE_OFF,
    "status": Kind.STATUS,
    "catch me up": Kind.CATCH_UP,
    "what did i miss": Kind.CATCH_UP,
    "decisions": Kind.DECISIONS,
    "actions": Kind.ACTIONS,
    "actions mine": Kind.ACTIONS_MINE,
    "my actions": Kind.ACTIONS_MINE,
    "my week": Kind.MY_WEEK,
    "my digest": Kind.MY_WEEK,
    "digest on": Kind.DIGEST_ON,
    "digest off": Kind.DIGEST_OFF,
    "dismiss": Kind.DISMISS,
    "help": Kind.HELP,
}
_CONTEXT = re.compile(r"^context(?:\s+(type|tags|stakeholders|related))?\s*:\s*(.*)$", re.IGNORECASE | re.DOTALL)
_CONTEXT_KINDS = {
    None: Kind.CONTEXT,
    "type": Kind.CONTEXT_TYPE,
    "tags": Kind.CONTEXT_TAGS,
    "stakeholders": Kind.CONTEXT_STAKEHOLDERS,
    "related": Kind.CONTEXT_RELATED,
}
_DONE = re.compile(r"^(?:done|mark\s+done)\s+(act)-?(\d{1,9})$", re.IGNORECASE)
_SUPERSEDE = re.compile(r"^supersede\s+(dec)-?(\d{1,9})\s+(?:with|by)\s+(dec)-?(\d{1,9})$", re.IGNORECASE)
# Trailing decoration people add to a command: punctuation, emoji, "please".
_TRAIL = re.compile(r"[\s\W_]+$")
_LEAD = re.compile(r"^[\s,:;.\-\u2013\u2014]+")
_PLEASE = re.compile(r"^(?:please\s+)|(?:\s+please)$", re.IGNORECASE)


def utf16_to_index(text: str, offset: int) -> int:
    """The Python string index of a UTF-16 code-unit offset (clamped to the text)."""
    units = 0
    for index, char in enumerate(text):
        if units >= offset:
            return index
        units += 2 if ord(char) > 0xFFFF else 1
    return len(text)


def addressed_body(text: str, mentions: Sequence[Mention], bot_id: str, handle: str) -> str | None:
    """The words meant for Jeeves, or None when the message does not address Jeeves.

    Addressed: a mention of Jeeves' own id, `@handle` as a word (not inside an e-mail address),
    or `handle,` / `handle:` at the start. The body is what follows the address, or what
    precedes it when nothing follows ("status please @jeeves").
    """
    span: tuple[int, int] | None = None
    for mention in mentions:
        if bot_id and mention.user.qualified == bot_id:
            start = utf16_to_index(text, mention.offset)
            span = (start, utf16_to_index(text, mention.offset + mention.length))
            break
    if span is None and handle:
        escaped = re.escape(handle)
        found = re.search(rf"(?<![\w.@]){'@'}{escaped}(?![\w@-]|\.\w)", text, re.IGNORECASE) or re.match(
            rf"\s*{escaped}\s*[,:]", text, re.IGNORECASE
        )
        if found:
            span = found.span()
    if span is None:
        return None
    after = _LEAD.sub("", text[span[1] :]).strip()
    return after or text[: span[0]].strip()


def blank_mentions(text: str, mentions: Sequence[Mention], keep_id: str) -> str:
    """`text` with every mention but Jeeves' own blanked out (same length, so offsets stay valid)."""
    chars = list(text)
    for mention in mentions:
        if mention.user.qualified == keep_id:
            continue
        start, end = utf16_to_index(text, mention.offset), utf16_to_index(text, mention.offset + mention.length)
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def parse(body: str) -> Command:
    """The command a body (Jeeves' address already removed) asks for; anything unrecognised is a question."""
    stripped = body.strip()
    if not stripped or not _TRAIL.sub("", stripped):
        return Command(Kind.EMPTY)
    context = _CONTEXT.match(stripped)
    if context:
        kind = _CONTEXT_KINDS[context.group(1).lower() if context.group(1) else None]
        return Command(kind, argument=context.group(2).strip())
    words = _PLEASE.sub("", " ".join(_TRAIL.sub("", stripped).split())).lower()
    if words in _FIXED:
        return Command(_FIXED[words])
    done = _DONE.match(words)
    if done:
        return Command(Kind.DONE, ids=(friendly_id(done.group(1), done.group(2)),))
    supersede = _SUPERSEDE.match(words)
    if supersede:
        return Command(
            Kind.SUPERSEDE,
            ids=(
                friendly_id(supersede.group(1), supersede.group(2)),
                friendly_id(supersede.group(3), supersede.group(4)),
            ),
        )
    return Command(Kind.QUESTION, argument=stripped)


def friendly_id(prefix: str, number: str) -> str:
    return f"{prefix.upper()}-{int(number):04d}"


_FRIENDLY = re.compile(r"^(DEC|ACT)-?(\d{1,6})$", re.IGNORECASE)


def known_friendly_id(raw: str, prefix: str) -> str | None:
    """`raw` ("act-12", "ACT0012", from a command or a button id) as the friendly id of a `prefix` record
    ("ACT-0012"), or None when it is not one (another kind, or more than six digits)."""
    match = _FRIENDLY.match(raw.strip())
    if not match or match.group(1).upper() != prefix:
        return None
    return friendly_id(prefix, match.group(2))


def split_list(argument: str) -> list[str]:
    """ "a, b and c" / "#a #b" → ["a", "b", "c"]: the items of a context list."""
    parts = re.split(r"\s*(?:,|;|\band\b|\s(?=[#@]))\s*", argument)
    return [p.strip().lstrip("#@").strip() for p in parts if p.strip().lstrip("#@").strip()]
