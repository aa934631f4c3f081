"""Records for retrieval tests, written straight through the ORM (the pipeline's writes are tested elsewhere)."""

from __future__ import annotations

import itertools
import uuid
from datetime import datetime, timedelta

from django.utils import timezone

from knowledge.models import (
    Action,
    ChannelConfig,
    ConversationSignal,
    Decision,
    Embedding,
    Entity,
    EntityRelationship,
    Summary,
)

_seq = itertools.count(1)
NOW = timezone.now()


def ref(*msg_ids: str, at: datetime | None = None) -> dict:
    at = at or NOW
    return {"wire_msg_ids": list(msg_ids), "timestamp_range": {"start": at.isoformat(), "end": at.isoformat()}}


def user(org: str = "wire.example") -> str:
    return f"{uuid.uuid4()}@{org}"


def channel(org: str = "wire.example", name: str | None = None, personal: bool = False) -> ChannelConfig:
    cid = f"{uuid.uuid4()}@{org}"
    return ChannelConfig.objects.create(
        channel_id=cid,
        channel_name=name or f"ch-{next(_seq)}",
        organisation_id=org,
        conversation_type="ONE_TO_ONE" if personal else "GROUP",
    )


def _sourced(ch: ChannelConfig, n: int, at: datetime | None = None) -> dict:
    """What every extracted record carries: its channel and organisation, and the message it rests on."""
    return {
        "channel": ch,
        "organisation_id": ch.organisation_id,
        "source_ref": ref(f"m{n}", at=at),
        "source_key": f"k{n}",
    }


def decision(ch: ChannelConfig, summary: str, *, by: list[str] | None = None, days_ago: float = 1, **kw) -> Decision:
    n = next(_seq)
    at = NOW - timedelta(days=days_ago)
    return Decision.objects.create(
        friendly_id=kw.pop("friendly_id", f"DEC-{n:04d}"),
        summary=summary,
        decided_by=by or [],
        decided_at=at,
        **_sourced(ch, n, at),
        **kw,
    )


def action(ch: ChannelConfig, description: str, *, owner: str | None = None, days_ago: float = 1, **kw) -> Action:
    n = next(_seq)
    return Action.objects.create(
        friendly_id=kw.pop("friendly_id", f"ACT-{n:04d}"),
        description=description,
        owner_id=owner,
        **_sourced(ch, n, NOW - timedelta(days=days_ago)),
        **kw,
    )


def release_channel() -> dict:
    """A channel's release records, for the command tests: two people, the channel and another one, two decisions
    in force and one superseded, two open actions (one due tomorrow) and a done one, and the other channel's."""
    alice, bob = user(), user()
    ch = channel(name="mobile-releases")
    other = channel(name="elsewhere")
    d1 = decision(ch, "Minimum iOS version is 16 from release 4.12", days_ago=3)
    d2 = decision(ch, "Minimum iOS version is 15 from release 4.12", days_ago=1)
    old = decision(ch, "Ship 4.11 on Friday", status="superseded", days_ago=9)
    decision(other, "A decision of another channel")
    a1 = action(ch, "Submit 4.12 to the App Store", owner=alice, owner_name="Alice", deadline=NOW + timedelta(days=1))
    a2 = action(ch, "Update the release notes", owner=bob, owner_name="Bob")
    action(ch, "Old chore", owner=alice, owner_name="Alice", status="done")
    action(other, "Another channel's chore", owner=alice, owner_name="Alice")
    return {"alice": alice, "bob": bob, "ch": ch, "other": other, "d1": d1, "d2": d2, "old": old, "a1": a1, "a2": a2}


def signal(ch: ChannelConfig, summary: str, *, participants: list[str] | None = None, days_ago: float = 1, **kw):
    return ConversationSignal.objects.create(
        signal_type=kw.pop("signal_type", "discussion"),
        summary=summary,
        participants=participants or [],
        occurred_at=NOW - timedelta(days=days_ago),
        **_sourced(ch, next(_seq)),
        **kw,
    )


def entity(ch: ChannelConfig, name: str, kind: str = "service", channels: list[str] | None = None, **kw) -> Entity:
    return Entity.objects.create(
        channel=ch,
        channel_ids=channels or [ch.channel_id],
        organisation_id=ch.organisation_id,
        entity_type=kind,
        name=name,
        normalised_name=name.lower(),
        **kw,
    )


def relate(source: Entity, target: Entity, kind: str, channels: list[str]) -> EntityRelationship:
    return EntityRelationship.objects.create(
        source=source, target=target, relationship=kind, organisation_id=source.organisation_id, channel_ids=channels
    )


def summary(ch: ChannelConfig, text: str, *, start_days_ago: float, end_days_ago: float, **kw) -> Summary:
    return Summary.objects.create(
        scope_type=kw.pop("scope_type", "channel"),
        scope_id=kw.pop("scope_id", ch.channel_id),
        organisation_id=ch.organisation_id,
        period_start=NOW - timedelta(days=start_days_ago),
        period_end=NOW - timedelta(days=end_days_ago),
        granularity=kw.pop("granularity", "daily"),
        summary=text,
        **kw,
    )


def embed(record, vector: list[float], *, author: str | None = None) -> Embedding:
    kind = {
        "Decision": "decision",
        "Action": "action",
        "ConversationSignal": "signal",
        "Summary": "summary",
        "Entity": "entity",
    }[type(record).__name__]
    channel_id = record.scope_id if kind == "summary" else record.channel_id
    return Embedding.objects.create(
        source_type=kind,
        source_id=record.id,
        channel_id=channel_id,
        organisation_id=record.organisation_id,
        author_id=author,
        created_at=NOW,
        embedding=vector,
    )


def unit(i: int, dims: int = 384, noise: dict[int, float] | None = None) -> list[float]:
    """A unit-ish vector along axis i (plus small components), for hand-made cosine geometry."""
    v = [0.0] * dims
    v[i] = 1.0
    for j, x in (noise or {}).items():
        v[j] = x
    return v
