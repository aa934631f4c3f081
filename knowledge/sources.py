"""Where a record comes from: its `source_ref` (the Wire message ids it rests on and their time range) and its
natural key (kind, sorted source ids, ordinal), on which every Tier 2 write is idempotent."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime

from django.utils import timezone


def source_ref(messages: Sequence[tuple[str, datetime]]) -> dict:
    """{"wire_msg_ids": [...], "timestamp_range": {start, end}} from (wire_msg_id, sent_at) pairs."""
    ordered = sorted(messages, key=lambda m: (m[1], m[0]))
    ids = list(dict.fromkeys(m[0] for m in ordered))
    return {
        "wire_msg_ids": ids,
        "timestamp_range": {"start": ordered[0][1].isoformat(), "end": ordered[-1][1].isoformat()},
    }


def merge_source_refs(old: dict, new: dict) -> dict:
    ids = list(dict.fromkeys([*old.get("wire_msg_ids", []), *new.get("wire_msg_ids", [])]))
    old_range, new_range = old.get("timestamp_range") or {}, new.get("timestamp_range") or {}
    starts = [s for s in (old_range.get("start"), new_range.get("start")) if s]
    ends = [e for e in (old_range.get("end"), new_range.get("end")) if e]
    return {
        "wire_msg_ids": ids,
        "timestamp_range": {
            "start": min(starts, key=datetime.fromisoformat) if starts else None,
            "end": max(ends, key=datetime.fromisoformat) if ends else None,
        },
    }


def said_at(source: dict) -> datetime:
    """When the latest message a record rests on was sent (a completion is dated by the message that
    reports it, not by when a worker got to it), never later than now."""
    end = (source.get("timestamp_range") or {}).get("end")
    try:
        said = datetime.fromisoformat(end) if end else None
    except (TypeError, ValueError):
        said = None
    now = timezone.now()
    return min(said, now) if said is not None and said.tzinfo is not None else now


# A signal's kind in its key: one for every type, so the gist Tier 1 keeps for a message and the signal a
# later extraction finds in it are one row (the first written stays).
SIGNAL_KEY = "sig"


def source_key(kind: str, wire_msg_ids: Sequence[str], ordinal: int = 0) -> str:
    """Natural key of an extracted record: its kind, its sorted source ids and its ordinal among
    records of the same kind resting on the same ids in one run (two decisions in one message)."""
    digest = hashlib.sha1("\x1f".join(sorted(set(wire_msg_ids))).encode()).hexdigest()[:20]
    return f"{kind}:{digest}:{ordinal}"


def ids_of(ref: dict | None) -> list[str]:
    return list((ref or {}).get("wire_msg_ids") or [])
