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
