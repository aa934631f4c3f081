"""The webhook's admission gate in Redis (knowledge/gate.py): a copy of the channel's state, epoch, left_at and
tombstones that the webhook reads in the same round trip as it windows, parks and queues; a missing gate falls
back to Postgres and is filled from it; every writer drops it before its change commits."""
# ruff: noqa: F811

from __future__ import annotations

import uuid

import pytest

from ground.redis import forget_channel_keys, get_redis
from knowledge import channels, gate
from knowledge.models import ChannelConfig, ChannelState, MessageReceipt
from pipeline import claimcheck, window

# The fixtures `channel` and `published` are test_ingest.py's (imported, so redefined as arguments: F811).
from tests.wire_bridge.test_ingest import ALICE, _q, channel, classify_tasks, post, published, say  # noqa: F401
from wire_bridge import ingest

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("wire_settings")]


def _gate(cid: str) -> dict[str, str]:
    return get_redis().hgetall(gate.key_for(cid))


def _nothing_kept(cid: str, msg: str, published) -> bool:
    return (
        msg not in {m.id for m in window.read(cid)}
        and claimcheck.claim(claimcheck.key_for(cid, msg)) is None
        and msg not in [t["wire_msg_id"] for t in classify_tasks(published)]
        and not MessageReceipt.objects.filter(channel_id=cid, wire_msg_id=msg).exists()
    )


def test_a_missing_gate_is_decided_in_postgres_and_filled_from_it(client, channel, published):
    assert _gate(channel) == {}
    assert say(client, channel, "m1", "the first one fills the gate").json() == {"status": "queued"}
    assert _gate(channel) == {"g": "active:0"}
    assert 0 < get_redis().ttl(gate.key_for(channel)) <= 3600
    # Postgres is the truth: with the gate gone, a state Redis never heard of is read there (and copied).
    ChannelConfig.objects.filter(channel_id=channel).update(state=ChannelState.PAUSED)
    gate.forget(channel)
    assert say(client, channel, "m2", "decided in postgres").json() == {"status": "dropped"}
    assert _gate(channel) == {"g": "paused:0"}
    assert say(client, channel, "m3", "decided in redis").json() == {"status": "dropped"}
    assert _nothing_kept(channel, "m2", published) and _nothing_kept(channel, "m3", published)


def test_pause_then_a_message_keeps_nothing(client, channel, published):
    assert say(client, channel, "m1", "before the pause").json() == {"status": "queued"}
    assert _gate(channel) == {"g": "active:0"}
    channels.set_state(channel, ChannelState.PAUSED, by=ALICE)
    assert _gate(channel) == {}  # dropped with the change
    assert say(client, channel, "m2", "right after the pause").json() == {"status": "dropped"}
    assert say(client, channel, "m2", "its redelivery").json() == {"status": "dropped"}
    assert _nothing_kept(channel, "m2", published)
    assert _gate(channel) == {"g": "paused:0"}
    channels.set_state(channel, ChannelState.ACTIVE, by=ALICE)
    # Nothing of the paused message was remembered: sent again once active, it is a new message.
    assert say(client, channel, "m2", "after resuming").json() == {"status": "queued"}


@pytest.mark.django_db(transaction=True)
def test_every_writer_drops_the_gate_before_its_change_commits(client, channel, monkeypatch):
    """Ordering: a message the gate admits before the drop was admitted before the change; after the drop the
    webhook asks Postgres, which waits for the change. So the drop must come before the commit."""
    import psycopg
    from django.db import connection

    seen: list[tuple[str, object]] = []
    real = gate.forget

    def forget(cid: str) -> None:
        with psycopg.connect(**connection.get_connection_params()) as other:
            row = other.execute(
                "SELECT state, left_at IS NOT NULL FROM channel_config WHERE channel_id = %s", [cid]
            ).fetchone()
        seen.append(row)
        real(cid)

    monkeypatch.setattr(gate, "forget", forget)
    channels.set_state(channel, ChannelState.PAUSED, by=ALICE)
    channels.set_state(channel, ChannelState.SECURE, by=ALICE)
    channels.set_state(channel, ChannelState.ACTIVE, by=ALICE)
    channels.mark_left(channel)
    channels.ensure_channel(channel, organisation_id="wire.example", transport="sidecar", rejoin=True)
    # What another connection saw while each writer dropped the gate: the state before its change.
    assert seen == [("active", False), ("paused", False), ("secure", False), ("active", False), ("active", True)]


def test_a_flushed_redis_rebuilds_the_gate_from_postgres(client, channel, published):
    quiet = f"{uuid.uuid4()}@wire.example"
    assert say(client, quiet, "q1", "another channel").json() == {"status": "queued"}
    channels.set_state(quiet, ChannelState.PAUSED, by=ALICE)
    assert say(client, channel, "m1", "before the flush").json() == {"status": "queued"}
    deleted = {"type": "message_deleted", "conversationId": _q(channel), "sender": _q(ALICE), "messageId": "m7"}
    assert post(client, deleted).json() == {"status": "forgotten"}
    assert _gate(channel) == {"g": "active:0", "t:m7": "1"}
    for cid in (channel, quiet):  # Redis restarted empty: every key of both channels gone
        forget_channel_keys(cid)
    assert say(client, quiet, "q2", "still paused").json() == {"status": "dropped"}
    assert _gate(quiet) == {"g": "paused:0"} and _nothing_kept(quiet, "q2", published)
    assert say(client, channel, "m1", "a redelivery after the flush").json() == {"status": "duplicate"}
    assert _gate(channel) == {"g": "active:0", "t:m7": "1"}  # the tombstone copied again
    assert say(client, channel, "m7", "deleted before it came").json() == {"status": "forgotten"}
    assert say(client, channel, "m8", "after the flush").json() == {"status": "queued"}
    assert [t["wire_msg_id"] for t in classify_tasks(published)] == ["q1", "m1", "m8"]
    assert _nothing_kept(channel, "m7", published)


def test_secure_mode_moves_the_epoch_the_tasks_carry(client, channel, published):
    assert say(client, channel, "m1", "epoch zero").json() == {"status": "queued"}
    channels.set_state(channel, ChannelState.SECURE, by=ALICE)
    assert say(client, channel, "m2", "while secure").json() == {"status": "dropped"}
    assert _gate(channel) == {"g": "secure:1"}
    channels.set_state(channel, ChannelState.ACTIVE, by=ALICE)
    ingest._EPOCHS[channel] = 0  # a process that last saw the old epoch
    assert say(client, channel, "m3", "epoch one").json() == {"status": "queued"}  # gate cold: Postgres
    ingest._EPOCHS[channel] = 0
    assert say(client, channel, "m4", "epoch one again").json() == {"status": "queued"}  # the gate answers 1
    assert [(t["wire_msg_id"], t["epoch"]) for t in classify_tasks(published)] == [("m1", 0), ("m3", 1), ("m4", 1)]
    assert _nothing_kept(channel, "m2", published)


def test_a_left_channel_is_refused_by_the_gate_until_it_is_joined_again(client, channel, published):
    assert say(client, channel, "m1", "before leaving").json() == {"status": "queued"}
    assert post(client, {"type": "conversation_deleted", "conversationId": _q(channel)}).json() == {"status": "left"}
    assert say(client, channel, "m2", "after leaving").json() == {"status": "dropped"}
    assert _gate(channel)["g"] == "left:0"
    assert say(client, channel, "m3", "still gone").json() == {"status": "dropped"}
    channels.ensure_channel(channel, organisation_id="wire.example", transport="sidecar", rejoin=True)
    assert say(client, channel, "m4", "back again").json() == {"status": "queued"}
    assert _nothing_kept(channel, "m2", published) and _nothing_kept(channel, "m3", published)
