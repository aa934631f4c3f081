"""Helpers for tests that feed evalset conversations: paths, members, window messages."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from pipeline.members import Member
from pipeline.window import WindowMessage

EVALSETS = Path(__file__).resolve().parents[2] / "evalsets"
EVALSET_DEV = EVALSETS / "dev"
EVALSET_TRAIN = EVALSETS / "train"


def load(name: str) -> dict:
    return json.loads((EVALSET_DEV / f"{name}.json").read_text())


def members(conv: dict, bot_id: str) -> list[Member]:
    org = conv["channel"]["org"]
    return [
        Member(
            user_id=bot_id if m["handle"] == "jeeves" else f"{m['id']}@{org}",
            name=m.get("name"),
            handle=m.get("handle"),
        )
        for m in conv["channel"]["members"]
    ]


def window_message(conv: dict, message: dict, bot_id: str) -> WindowMessage:
    org = conv["channel"]["org"]
    bot_uuid = next(m["id"] for m in conv["channel"]["members"] if m["handle"] == "jeeves")

    def qualify(uid: str) -> str:
        return bot_id if uid == bot_uuid else f"{uid}@{org}"

    return WindowMessage(
        id=message["id"],
        author_id=qualify(message["author"]),
        ts=datetime.fromisoformat(message["ts"].replace("Z", "+00:00")),
        text=message["text"],
        mentions=[qualify(m["user"]) for m in message.get("mentions", [])],
    )


# A small conversation in the evalset format, for tests that need a channel of two people and Jeeves.
ORG = "wire.example"
BOT = "00000000-0000-4000-8000-0000000000b0"
ANA = "00000000-0000-4000-8000-0000000000a1"
TOM = "00000000-0000-4000-8000-0000000000a2"


def small_conversation(
    conv_id: str, said: list[tuple[str, str, bool]], *, channel: str, ts: str, msg_id: str = "m{k}", **extra
) -> dict:
    """`said`: (author, text, addressed to Jeeves) in order; `ts` and `msg_id` are formats of the message's
    number k (from 1); `extra` goes into the channel (a name, say)."""
    return {
        "id": conv_id,
        "channel": {
            "id": f"{channel}@{ORG}",
            "org": ORG,
            **extra,
            "timezone": "UTC",
            "members": [
                {"id": ANA, "name": "Ana", "handle": "ana"},
                {"id": TOM, "name": "Tom", "handle": "tom"},
                {"id": BOT, "name": "Jeeves", "handle": "jeeves"},
            ],
        },
        "messages": [
            {
                "id": msg_id.format(k=k),
                "author": author,
                "ts": ts.format(k=k),
                "text": text,
                "mentions": [{"user": BOT, "offset": 0, "length": 7}] if to_bot else [],
            }
            for k, (author, text, to_bot) in enumerate(said, start=1)
        ],
        "gold": {"decisions": [], "actions": [], "categories": {}},
    }
