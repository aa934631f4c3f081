"""Labelled conversations (the evalset format, `evalsets/README.md`) as the engine sees them.

Used by `jeeves train` (fit on `evalsets/train`), the offline benches and the tests: a conversation
becomes its channel context, the messages the bridge would have let through (talk to Jeeves and
paused/secure stretches removed) as window messages, where secure mode flushed the window, and its gold
labels with qualified ids.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pipeline.context import ChannelContext
from pipeline.members import Member
from pipeline.window import WindowMessage

ROOT = Path(__file__).resolve().parents[2]
EVALSETS = ROOT / "evalsets"
TRAIN = EVALSETS / "train"
DEV = EVALSETS / "dev"

# Jeeves' own commands (wire_bridge/commands.py), as the bridge reads them; secure mode also flushes the window.
_PAUSE = re.compile(r"\b(pause|step out|(?P<secure>secure mode(?! off)|ears off))\b", re.IGNORECASE)
_RESUME = re.compile(r"\b(resume|come back|unpause|secure mode off|ears on)\b", re.IGNORECASE)


@dataclass
class Conversation:
    id: str
    ctx: ChannelContext
    messages: list[WindowMessage]  # every message, in order (bot talk and paused stretches included)
    gold: dict
    to_bot: set[str] = field(default_factory=set)  # ids of messages addressed to Jeeves
    dropped: set[str] = field(default_factory=set)  # ids the bridge drops (paused / secure stretches)
    # ids of the commands that turn secure mode on: there the bridge flushes the channel's window
    # (docs/guarantees.md §3), so what follows is extracted without what came before
    secured: set[str] = field(default_factory=set)

    @property
    def heard(self) -> list[WindowMessage]:
        """What reaches the pipeline: no talk to Jeeves, nothing from a paused or secure stretch."""
        return [m for m in self.messages if m.id not in self.to_bot and m.id not in self.dropped]

    def member(self, bare_id: str | None) -> str | None:
        return f"{bare_id}@{self.ctx.organisation_id}" if bare_id else None


def load(path: Path) -> Conversation:
    return from_dict(json.loads(path.read_text(encoding="utf-8")))


def from_dict(raw: dict) -> Conversation:
    channel = raw["channel"]
    org = channel["org"]
    members = tuple(
        Member(user_id=f"{m['id']}@{org}", name=m.get("name"), handle=m.get("handle")) for m in channel["members"]
    )
    bots = tuple(m.user_id for m in members if (m.handle or "").lower() == "jeeves")
    ctx = ChannelContext(
        channel_id=channel["id"],
        organisation_id=org,
        name=channel.get("name"),
        purpose=None,
        context_type=None,
        tags=(),
        timezone=channel.get("timezone", "UTC"),
        members=members,
        bot_ids=bots,
        known_entities=(),
    )
    messages: list[WindowMessage] = []
    to_bot: set[str] = set()
    dropped: set[str] = set()
    secured: set[str] = set()
    paused = False
    for m in raw["messages"]:
        mentions = [f"{x['user']}@{org}" for x in m.get("mentions", [])]
        message = WindowMessage(
            id=m["id"],
            author_id=f"{m['author']}@{org}",
            ts=datetime.fromisoformat(m["ts"].replace("Z", "+00:00")),
            text=m["text"],
            mentions=mentions,
        )
        messages.append(message)
        if any(u in bots for u in mentions):
            to_bot.add(m["id"])
            if _RESUME.search(m["text"]):
                paused = False
            elif command := _PAUSE.search(m["text"]):
                paused = True
                if command["secure"]:
                    secured.add(m["id"])
        elif paused:
            dropped.add(m["id"])
    return Conversation(raw["id"], ctx, messages, raw["gold"], to_bot, dropped, secured)


def load_dir(folder: Path) -> list[Conversation]:
    """Every conversation of `folder`; the process's feature caches are widened to hold them (they are loaded to be
    replayed, often many times)."""
    from pipeline.offline import features

    convs = [load(p) for p in sorted(Path(folder).glob("conv-*.json"))]
    features.hold(sum(len(c.messages) for c in convs))
    return convs
