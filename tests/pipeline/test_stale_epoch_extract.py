"""An extract run queued before secure mode came and went is dropped (consent), but the messages
pending in the new epoch get a run of their own instead of waiting behind its schedule lock."""

from __future__ import annotations

import base64
import json

import pytest

from ground import keys
from jeeves.celery import app as celery_app
from knowledge.models import ChannelConfig
from pipeline import debounce
from pipeline.tasks import extract_channel

pytestmark = pytest.mark.django_db(transaction=True)

CHANNEL = "5eca1e00-0000-4000-8000-000000000001@wire.example"


def test_a_stale_epoch_run_hands_pending_messages_to_the_current_epoch(redis_client):
    ChannelConfig.objects.create(channel_id=CHANNEL, organisation_id="wire.example", epoch=1)
    lock = keys.EXTRACT_LOCK.key(CHANNEL)
    try:
        redis_client.set(lock, "0", ex=60)  # the epoch-0 run's schedule lock, still held
        before = redis_client.llen("extract")
        extract_channel(CHANNEL, 0)  # nothing pending: dropped, and nothing scheduled
        assert redis_client.llen("extract") == before and not redis_client.exists(lock)

        redis_client.set(lock, "0", ex=60)
        debounce.note_classified(CHANNEL, "m044")
        extract_channel(CHANNEL, 0)
        assert redis_client.llen("extract") == before + 1 and redis_client.exists(lock)
        _args, kwargs, _embed = json.loads(base64.b64decode(json.loads(redis_client.lindex("extract", 0))["body"]))
        assert kwargs == {"channel_id": CHANNEL, "epoch": 1}
    finally:
        celery_app.control.purge()
        debounce.flush(CHANNEL)
