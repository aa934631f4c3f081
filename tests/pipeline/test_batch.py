"""Tier 1 in batches (pipeline/batch.py): a classify task delivered by a worker also classifies the messages
queued behind it, each as its own task would, and leaves every unusual one to its own task."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.test import override_settings

from ground import keys
from ground.queues import Queue, queue_lists
from knowledge import forgetting, receipts
from knowledge.models import ChannelConfig, ConversationSignal, LlmCall, MessageReceipt
from pipeline import batch, claimcheck, members, window
from pipeline.tasks import classify_message
from tests.pipeline import evalset

pytestmark = pytest.mark.django_db

BOT = "3531c6e3-2811-58c8-aa49-5621c2d47635@wire.example"


@pytest.fixture
def jeeves_settings(settings, redis_client):
    cfg = dataclasses.replace(
        settings.JEEVES, wire_app_id=BOT, extract_debounce_s=3600.0, extract_batch=1000, classify_batch=16
    )
    for name in [*queue_lists(Queue.CLASSIFY.value), *redis_client.scan_iter(keys.CLASSIFY_TAKEN.pattern())]:
        redis_client.delete(name)
    with override_settings(JEEVES=cfg):
        yield cfg
    for name in queue_lists(Queue.CLASSIFY.value):
        redis_client.delete(name)


def _channel(conv: dict) -> ChannelConfig:
    ch = conv["channel"]
    channel = ChannelConfig.objects.create(
        channel_id=f"{uuid.uuid4()}@wire.example", organisation_id=ch["org"], channel_name=ch["name"]
    )
    members.replace_all(channel.channel_id, evalset.members(conv, BOT))
    return channel


def _admit(channel: ChannelConfig, conv: dict, count: int, *, park: bool = True) -> list[dict]:
    """What the bridge does for `count` messages: receipt, window, parked text; the tasks' kwargs."""
    tasks = []
    for message in [m for m in conv["messages"] if not m.get("mentions")][:count]:
        wm = evalset.window_message(conv, message, BOT)
        receipts.record_receipt(channel.channel_id, wm.id, author_id=wm.author_id, sent_at=wm.ts)
        window.push(channel.channel_id, wm)
        if park:
            claimcheck.park(channel.channel_id, wm.id, wm.text)
        tasks.append(
            {
                "channel_id": channel.channel_id,
                "wire_msg_id": wm.id,
                "epoch": channel.epoch,
                "author_id": wm.author_id,
                "sent_at": wm.ts.isoformat(),
            }
        )
    return tasks


def _publish(tasks: list[dict]) -> None:
    for kwargs in tasks:
        classify_message.apply_async(kwargs=kwargs, expires=600)


def _state(channel: ChannelConfig) -> dict[str, tuple[int, str, list[str]]]:
    return {
        r.wire_msg_id: (r.tier, r.outcome, sorted(r.categories or []))
        for r in MessageReceipt.objects.filter(channel_id=channel.channel_id)
    }


def _markers(redis_client) -> dict[tuple[str, str], str]:
    """(channel, message) → value of every `jeeves:classify:taken:` key."""
    out = {}
    for name in redis_client.scan_iter(keys.CLASSIFY_TAKEN.pattern()):
        channel_id, _, wire_msg_id = name[len(keys.CLASSIFY_TAKEN.prefix) :].rpartition(":")
        out[(channel_id, wire_msg_id)] = redis_client.get(name)
    return out


def _signals(channel: ChannelConfig) -> list[tuple[str, str]]:
    return sorted(ConversationSignal.objects.filter(channel=channel).values_list("source_key", "summary"))


def test_one_task_classifies_the_messages_queued_behind_it_as_each_alone(jeeves_settings, redis_client):
    conv_a, conv_b = evalset.load("conv-001"), evalset.load("conv-007")
    # The same messages classified one task at a time (called directly: no companions) ...
    alone_a, alone_b = _channel(conv_a), _channel(conv_b)
    for kwargs in _admit(alone_a, conv_a, 8) + _admit(alone_b, conv_b, 6):
        classify_message(**kwargs)
    # ... and as a worker delivers them: the first task takes the others, of both channels, as companions.
    a, b = _channel(conv_a), _channel(conv_b)
    tasks_a, tasks_b = _admit(a, conv_a, 8), _admit(b, conv_b, 6)
    tasks = [t for pair in zip(tasks_a, tasks_b, strict=False) for t in pair] + tasks_a[len(tasks_b) :]
    _publish(tasks[1:])
    classify_message.apply(kwargs=tasks[0])

    assert {s[0] for s in _state(a).values()} == {1} and {s[0] for s in _state(b).values()} == {1}
    assert _state(a) == _state(alone_a) and _state(b) == _state(alone_b)
    assert (_signals(a), _signals(b)) == (_signals(alone_a), _signals(alone_b))
    for t in tasks:  # every text discarded once classified, and each marked done for its own task
        assert claimcheck.claim(claimcheck.key_for(t["channel_id"], t["wire_msg_id"])) is None
    assert _markers(redis_client) == {(t["channel_id"], t["wire_msg_id"]): "done" for t in tasks}
    # The companions' own tasks are no longer queued: no worker is handed them.
    assert not any(redis_client.llen(name) for name in queue_lists(Queue.CLASSIFY.value))

    # Their own tasks, delivered later, find them classified and change nothing (one model call each, once).
    calls = LlmCall.objects.filter(channel_id__in=[a.channel_id, b.channel_id]).count()
    assert calls == len(tasks)
    before = (_state(a), _state(b))
    for t in tasks[1:]:
        classify_message.apply(kwargs=t)
    assert (_state(a), _state(b)) == before
    assert LlmCall.objects.filter(channel_id__in=[a.channel_id, b.channel_id]).count() == calls


def test_a_batch_writes_the_receipts_the_webhook_has_not_written_yet(jeeves_settings, redis_client):
    """The webhook writes a receipt after its response (knowledge.receipts.defer_receipt): a companion whose
    receipt is not there yet gets it from the batch, with its author and time, and is classified with it."""
    conv = evalset.load("conv-001")
    channel = _channel(conv)
    tasks = _admit(channel, conv, 4)
    MessageReceipt.objects.filter(wire_msg_id__in=[t["wire_msg_id"] for t in tasks[1:]]).delete()
    _publish(tasks[1:])
    classify_message.apply(kwargs=tasks[0])
    assert {w: s[0] for w, s in _state(channel).items()} == {t["wire_msg_id"]: 1 for t in tasks}
    receipt = MessageReceipt.objects.get(channel_id=channel.channel_id, wire_msg_id=tasks[1]["wire_msg_id"])
    assert (receipt.author_id, receipt.sent_at.isoformat()) == (tasks[1]["author_id"], tasks[1]["sent_at"])


def test_a_batch_leaves_every_unusual_message_to_its_own_task(jeeves_settings, redis_client):
    conv = evalset.load("conv-001")
    channel = _channel(conv)
    moved = _channel(evalset.load("conv-007"))
    tasks = _admit(channel, conv, 4)
    stale = _admit(moved, evalset.load("conv-007"), 1)  # queued under epoch 0; the channel moved on
    ChannelConfig.objects.filter(pk=moved.pk).update(epoch=1)
    expired = _admit(channel, {**conv, "messages": conv["messages"][10:]}, 1, park=False)  # its text is gone
    deleted = tasks[3]
    forgetting.tombstone(channel.channel_id, deleted["wire_msg_id"])
    _publish(tasks[1:] + stale + expired)

    classify_message.apply(kwargs=tasks[0])

    state = _state(channel)
    assert [state[t["wire_msg_id"]][0] for t in tasks[:3]] == [1, 1, 1]
    # Left as they were, for their own tasks: the deleted one, the expired one, the other epoch's.
    assert state[deleted["wire_msg_id"]][:2] == (0, "queued")
    assert state[expired[0]["wire_msg_id"]][:2] == (0, "queued")
    assert _state(moved)[stale[0]["wire_msg_id"]][:2] == (0, "queued")
    assert claimcheck.claim(claimcheck.key_for(channel.channel_id, deleted["wire_msg_id"])) is not None
    assert _markers(redis_client) == {(t["channel_id"], t["wire_msg_id"]): "done" for t in tasks[:3]}

    # Their own tasks treat them as they always did: deleted → nothing, expired → counted, old epoch → dropped.
    for t in [deleted, *expired, *stale]:
        classify_message.apply(kwargs=t)
    state = _state(channel)
    assert state[deleted["wire_msg_id"]][:2] == (0, "queued")
    assert claimcheck.claim(claimcheck.key_for(channel.channel_id, deleted["wire_msg_id"])) is None
    assert state[expired[0]["wire_msg_id"]][1] == "expired"
    assert _state(moved)[stale[0]["wire_msg_id"]][1] == "dropped"


def test_a_message_taken_by_a_batch_that_died_is_classified_by_its_own_task(jeeves_settings, redis_client):
    conv = evalset.load("conv-001")
    channel = _channel(conv)
    first, second = _admit(channel, conv, 2)
    _publish([second])
    # A batch took `second` and its worker died before classifying it: nothing was acknowledged for it.
    assert batch.take(first["channel_id"], first["wire_msg_id"], 15) == [
        batch.Queued(channel.channel_id, second["wire_msg_id"], channel.epoch)
    ]
    classify_message.apply(kwargs=second)
    assert _state(channel)[second["wire_msg_id"]][0] == 1


def test_a_batch_reads_no_expired_delayed_or_other_task(jeeves_settings, redis_client):
    conv = evalset.load("conv-001")
    channel = _channel(conv)
    first, late, other = _admit(channel, conv, 3)
    classify_message.apply_async(kwargs=late, expires=datetime.now(UTC) - timedelta(seconds=1))
    classify_message.apply_async(kwargs=other, countdown=30)
    assert batch.take(first["channel_id"], first["wire_msg_id"], 15) == []


def _signal(channel: ChannelConfig, n: int) -> str:
    from knowledge import records, sources

    at = datetime(2026, 3, 2, 10, n, tzinfo=UTC)
    row = records.record_signal(
        channel,
        records.SignalDraft(
            signal_type="update",
            summary=f"The rollout reached stage {n} of the plan for {channel.channel_name}.",
            occurred_at=at,
            participants=[],
            confidence=0.9,
            extraction_model="local",
        ),
        source=sources.source_ref([(f"m{n}", at)]),
        sources_text=[],
        key=f"t1:m{n}",
    )
    return str(row.record.pk)


def test_an_embed_task_embeds_the_records_of_the_tasks_queued_behind_it(jeeves_settings, redis_client):
    from knowledge.models import Embedding
    from pipeline.tasks import embed_records

    for name in queue_lists(Queue.EMBED.value):
        redis_client.delete(name)
    a, b = _channel(evalset.load("conv-001")), _channel(evalset.load("conv-007"))
    paused = _channel(evalset.load("conv-003"))
    tasks = [
        {"channel_id": ch.channel_id, "epoch": ch.epoch, "records": [["signal", _signal(ch, n)]]}
        for n, ch in enumerate([a, b, a, paused])
    ]
    ChannelConfig.objects.filter(pk=paused.pk).update(state="paused")
    for kwargs in tasks[1:]:
        embed_records.apply_async(kwargs=kwargs, expires=600)
    try:
        embed_records.apply(kwargs=tasks[0])
        # Every record of an active channel has its vector, written with its own channel; the paused one none.
        written = dict(Embedding.objects.filter(source_type="signal").values_list("source_id", "channel_id"))
        for t in tasks[:3]:
            assert str(written.pop(uuid.UUID(t["records"][0][1]))) == t["channel_id"]
        assert uuid.UUID(tasks[3]["records"][0][1]) not in written
        for kwargs in tasks[1:]:  # their own tasks, delivered later, write nothing more
            embed_records.apply(kwargs=kwargs)
        assert Embedding.objects.filter(source_type="signal").count() == 3
    finally:
        for name in queue_lists(Queue.EMBED.value):
            redis_client.delete(name)


def test_the_engine_scores_messages_together_exactly_as_each_alone(jeeves_settings):
    from pipeline import classify, offline

    for name in ("conv-001", "conv-007"):
        conv = evalset.load(name)
        ctx = classify.build_context(_channel(conv))
        held = [evalset.window_message(conv, m, BOT) for m in conv["messages"]]
        items = [
            (m.text, ctx, m.author_id, list(m.mentions), held[max(0, i - 3) : i], m.ts) for i, m in enumerate(held)
        ]
        assert offline.classify_many(items) == [offline.classify(*item) for item in items]


def test_tier_2_reads_the_vectors_tier_1_computed_instead_of_embedding_them_again(
    jeeves_settings, redis_client, monkeypatch
):
    from pipeline import embedder, extract
    from pipeline.offline import features

    channel = _channel(evalset.load("conv-001"))
    for kwargs in _admit(channel, evalset.load("conv-001"), 6):
        classify_message(**kwargs)
    held = window.read(channel.channel_id)
    texts = [features.message_text(m.text) for m in held]
    tier1 = features.embed(texts)  # what Tier 1 computed, from this process's cache
    stored = keys.WINDOW_VECTORS.key(channel.channel_id)
    assert set(redis_client.hkeys(stored)) == {m.id for m in held}

    features._cache.clear()  # the extraction worker: another process, nothing cached
    embedded: list[str] = []
    real = embedder.embed_local
    monkeypatch.setattr(embedder, "embed_local", lambda batch: embedded.extend(batch) or real(batch))
    extract._tier1_vectors(channel.channel_id, held[2:])  # the window has moved on past the first two
    assert np.array_equal(features.embed(texts[2:]), tier1[2:]) and embedded == []
    assert set(redis_client.hkeys(stored)) == {m.id for m in held[2:]}
    # A vector whose digest is not its text's is not taken: the text is embedded.
    packed = features.pack(texts[2])
    features._cache.clear()
    assert packed and features.unpack([texts[3]], [packed]) == 0
    features.embed(texts[3:4])
    assert embedded == [texts[3]]
