"""JEEVES_EMBED_MESSAGES: off → no message vectors; on → one per message (none doubled by a
redelivery, none for a channel that withdrew consent), gone when the author deletes the message,
and never a candidate of the semantic path. Tier 1 is run in-process over real Postgres and Redis."""

from __future__ import annotations

import dataclasses

import pytest
from django.conf import settings
from django.test import override_settings

from jeeves.celery import app as celery_app
from knowledge import embeddings, receipts
from knowledge.models import ChannelConfig, ChannelState, Embedding
from pipeline import claimcheck, classify, debounce, members, window
from pipeline.tasks import classify_message, forget_message
from retrieval.ask import retrieve
from retrieval.scope import RetrievalScope
from tests.pipeline import evalset

pytestmark = pytest.mark.django_db(transaction=True)

BOT = "3531c6e3-2811-58c8-aa49-5621c2d47635@wire.example"


def _channel(conv: dict) -> ChannelConfig:
    ch = conv["channel"]
    channel = ChannelConfig.objects.create(channel_id=ch["id"], organisation_id=ch["org"], timezone=ch["timezone"])
    members.replace_all(channel.channel_id, evalset.members(conv, BOT))
    return channel


def _arrive(channel: ChannelConfig, conv: dict, message: dict) -> str:
    """What the bridge does for a message: receipt, window, claim-check key."""
    wm = evalset.window_message(conv, message, BOT)
    receipts.record_receipt(channel.channel_id, wm.id, author_id=wm.author_id, sent_at=wm.ts)
    window.push(channel.channel_id, wm)
    return claimcheck.park(channel.channel_id, wm.id, wm.text)


def _classify(channel: ChannelConfig, conv: dict, messages: list[dict]) -> None:
    for message in messages:
        _arrive(channel, conv, message)
        classify_message(channel.channel_id, message["id"], channel.epoch)


def _message_rows(channel_id: str):
    return Embedding.objects.filter(source_type="message", channel_id=channel_id)


@pytest.fixture
def conv():
    conv = evalset.load("conv-001")
    yield conv
    # Tier 1 may have queued a debounced extract run: no worker here, so it must not outlive the test.
    celery_app.control.purge()
    debounce.flush(conv["channel"]["id"])
    window.flush(conv["channel"]["id"])


def test_off_by_default_no_message_rows(conv):
    assert settings.JEEVES.embed_messages is False
    channel = _channel(conv)
    _classify(channel, conv, conv["messages"][:3])
    assert receipts.receipt_tier(channel.channel_id, conv["messages"][0]["id"]) == 1
    assert not _message_rows(channel.channel_id).exists()


def test_on_one_row_per_message_idempotent_consented_forgotten(conv):
    messages = conv["messages"][:4]
    org = conv["channel"]["org"]
    with override_settings(JEEVES=dataclasses.replace(settings.JEEVES, embed_messages=True)):
        channel = _channel(conv)
        _classify(channel, conv, messages[:3])
        rows = {e.wire_msg_id: e for e in _message_rows(channel.channel_id)}
        assert sorted(rows) == sorted(m["id"] for m in messages[:3])
        for message in messages[:3]:
            row = rows[message["id"]]
            wm = evalset.window_message(conv, message, BOT)
            assert row.source_id is None and row.organisation_id == org
            assert row.author_id == wm.author_id and row.created_at == wm.ts  # the message's own time
            assert len(row.embedding) == settings.JEEVES.embed_dims

        # Redelivery, task level (the receipt says classified) and service level (a worker killed
        # after the vector but before the receipt moved on): still one row per message.
        first = messages[0]
        claimcheck.park(channel.channel_id, first["id"], first["text"])
        classify_message(channel.channel_id, first["id"], channel.epoch)
        classify.classify_message(channel, first["id"], first["text"])
        # Two workers racing past the existence check: the unique index settles it.
        again = embeddings.record_message_embedding(
            channel.channel_id, first["id"], rows[first["id"]].embedding, organisation_id=org, author_id=None,
            created_at=rows[first["id"]].created_at,
        )  # fmt: skip
        assert again is False
        assert _message_rows(channel.channel_id).count() == 3

        # Consent withdrawn: the task drops the message, and no vector is written for it.
        ChannelConfig.objects.filter(pk=channel.pk).update(state=ChannelState.PAUSED)
        _classify(channel, conv, messages[3:4])
        assert _message_rows(channel.channel_id).count() == 3
        ChannelConfig.objects.filter(pk=channel.pk).update(state=ChannelState.ACTIVE)

        # The semantic path never offers a message vector, even for the message's own text.
        vector = list(rows[first["id"]].embedding)
        scope = RetrievalScope.for_asker(channel.channel_id, f"{conv['channel']['members'][0]['id']}@{org}")
        found = retrieve(first["text"], scope, query_vector=vector)
        assert "semantic" in found.path_hits
        assert all(kind != "message" for keys in found.path_hits.values() for kind, _ in keys)

        # The author deletes a message: its vector goes, the others stay.
        forget_message(channel.channel_id, first["id"])
        assert sorted(_message_rows(channel.channel_id).values_list("wire_msg_id", flat=True)) == sorted(
            m["id"] for m in messages[1:3]
        )
