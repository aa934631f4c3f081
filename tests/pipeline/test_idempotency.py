"""Idempotent tiers: the same extract task twice, and a real worker child killed mid-task with
acks_late redelivering it, leave exactly one decision, action, signal and embedding each."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from knowledge import receipts
from knowledge.models import Action, ChannelConfig, ConversationSignal, Decision, Embedding, MessageReceipt
from pipeline import debounce, members, window
from pipeline.tasks import extract_channel
from tests.conftest import WorkerProcess, service_env, wait_for
from tests.fakes.openai_server import Behaviour, FakeOpenAI, answer
from tests.pipeline import evalset

pytestmark = pytest.mark.django_db(transaction=True)

BOT = "3531c6e3-2811-58c8-aa49-5621c2d47635@wire.example"
ALICE = "c3717d92-fdeb-577b-b891-914cba534f3a"
PRIYA = "40397dcc-1011-59cf-97ef-b05cac034cda"
EXTRACTED = {
    "decisions": [
        {
            "summary": "Failed payments move to queue-based retries with exponential backoff.",
            "decided_by": [ALICE],
            "source_msg_ids": ["m010", "m011"],
            "confidence": 0.9,
        }
    ],
    "actions": [
        {
            "description": "Priya writes the migration for the retry attempts table.",
            "owner_id": PRIYA,
            "deadline": "2026-03-06",
            "source_msg_ids": ["m013", "m014"],
            "confidence": 0.9,
        }
    ],
    "signals": [
        {
            "signal_type": "question",
            "summary": "Olly asked what rate limit the payment provider applies to retries.",
            "source_msg_ids": ["m008"],
            "confidence": 0.8,
        }
    ],
}


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _prepare(conv: dict) -> ChannelConfig:
    ch = conv["channel"]
    channel = ChannelConfig.objects.create(channel_id=ch["id"], organisation_id=ch["org"], timezone=ch["timezone"])
    members.replace_all(channel.channel_id, evalset.members(conv, BOT))
    for message in conv["messages"][6:15]:
        wm = evalset.window_message(conv, message, BOT)
        receipts.record_receipt(channel.channel_id, wm.id, author_id=wm.author_id, sent_at=wm.ts)
        receipts.mark_receipt(channel.channel_id, wm.id, outcome="pending_extract", tier=1)
        window.push(channel.channel_id, wm)
        debounce.note_classified(channel.channel_id, wm.id)
    return channel


def _counts(channel: ChannelConfig) -> tuple[int, int, int, int]:
    return (
        Decision.objects.filter(channel=channel).count(),
        Action.objects.filter(channel=channel).count(),
        ConversationSignal.objects.filter(channel=channel).count(),
        Embedding.objects.filter(channel_id=channel.channel_id, source_type__in=["decision", "action"]).count(),
    )


def test_a_worker_killed_mid_extraction_redelivers_without_duplicates(redis_url, redis_client):
    fake = FakeOpenAI().start()
    # The first extraction hangs in the model call (the worker is killed there); the redelivery is answered.
    fake.script("extract-model", Behaviour(json=EXTRACTED, delay_s=30))
    fake.default("extract-model", answer(EXTRACTED))
    env = service_env(
        redis_url,
        JEEVES_LLM_BASE_URL=fake.base_url,
        JEEVES_LLM_API_KEY="k",
        JEEVES_MODEL_EXTRACT="extract-model",
        JEEVES_LLM_TIMEOUT_MS="60000",
        JEEVES_WIRE_APP_ID=BOT,
        JEEVES_TASK_LEASE_S="6",
        JEEVES_EXTRACT_DEBOUNCE_S="1",
    )
    worker = WorkerProcess("extract,embed", env, pool="prefork", name="killme")
    channel = None
    try:
        channel = _prepare(evalset.load("conv-001"))
        extract_channel.apply_async(kwargs={"channel_id": channel.channel_id, "epoch": channel.epoch})
        wait_for(lambda: fake.calls("extract-model"), timeout=90)
        [child] = _children(worker.proc.pid)
        os.kill(child, signal.SIGKILL)  # mid-task: the model call is in flight, nothing written yet
        assert _counts(channel)[:3] == (0, 0, 0)
        # The parent rejects the lost task (acks_late + reject_on_worker_lost): a new child redelivers it.
        # The dead run's channel lock is a lease nobody renews now: it lapses within JEEVES_TASK_LEASE_S
        # and the redelivery, retrying after each debounce meanwhile, takes it. The test deletes no lock.
        wait_for(lambda: _counts(channel) == (1, 1, 1, 2), timeout=120)
        assert len(fake.calls("extract-model")) == 2
        assert not MessageReceipt.objects.filter(channel_id=channel.channel_id, outcome="pending_extract").exists()

        # The same task delivered again after success: its messages are extracted already, nothing new.
        for message in evalset.load("conv-001")["messages"][6:15]:
            debounce.note_classified(channel.channel_id, message["id"])
        extract_channel.apply_async(kwargs={"channel_id": channel.channel_id, "epoch": channel.epoch})
        wait_for(lambda: worker.log().count("extract_channel[") and worker.log().count(" succeeded in ") >= 3, 60)
        assert _counts(channel) == (1, 1, 1, 2)
    finally:
        worker.stop()
        fake.stop()
        if channel is not None:
            debounce.flush(channel.channel_id)
