"""Fairness and order at the bridge, over the real view, Postgres and Redis.

- A channel over its token bucket (JEEVES_CHANNEL_RATE, JEEVES_CHANNEL_BURST) is still received: its
  messages are queued at the lowest priority, marked for the offline classifier (no model spend), and a
  worker serves every other channel's waiting messages first (Redis lists per priority step).
- Out-of-order events: a user_joined before its app_added is kept for it; an app_added after its
  conversation_deleted changes nothing.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid

import pytest
import redis
from django.conf import settings
from django.test import override_settings

from ground import keys
from ground.queues import LOW_PRIORITY, queue_lists
from knowledge.models import ChannelConfig
from pipeline import members
from tests.fakes.wire import qid, sidecar_app_added, sidecar_text
from tests.wire_bridge import test_ingest
from tests.wire_bridge.conftest import APP_ID, wire_config
from tests.wire_bridge.test_ingest import ALICE, BOB, classify_tasks, post

pytestmark = [pytest.mark.django_db]

published = test_ingest.published


def _queued(r: redis.Redis, name: str) -> list[tuple[str, bool]]:
    """(message id, over rate) of the classify tasks waiting in one Redis list (kombu's JSON, base64 body)."""
    found = []
    for raw in r.lrange(name, 0, -1):
        _args, kwargs, _embed = json.loads(base64.b64decode(json.loads(raw)["body"]))
        found.append((kwargs["wire_msg_id"], kwargs.get("over_rate", False)))
    return sorted(found)


def _channel(client) -> str:
    conv = f"{uuid.uuid4()}@wire.example"
    post(client, sidecar_app_added(conv, [{"userId": ALICE, "role": "ADMIN"}, {"userId": APP_ID, "role": "MEMBER"}]))
    return conv


def test_a_channel_over_its_rate_is_received_classified_offline_and_served_after_the_others(
    client, published, isolated_redis
):
    with override_settings(JEEVES=wire_config(channel_rate=0.01, channel_burst=3)):
        flood, quiet = _channel(client), _channel(client)
        for n in range(6):
            assert post(client, sidecar_text(flood, ALICE, f"f{n}", f"flood item {n}")).json() == {"status": "queued"}
        assert post(client, sidecar_text(quiet, ALICE, "q0", "a quiet remark")).json() == {"status": "queued"}
    tasks = classify_tasks(published)
    over = [t for t in tasks if t.get("over_rate")]
    assert [t["wire_msg_id"] for t in over] == ["f3", "f4", "f5"]  # the burst of 3 passes, the rest is over
    assert not any(t.get("over_rate") for t in tasks if t["channel_id"] == quiet)
    r = redis.Redis.from_url(isolated_redis)
    classify_lists = queue_lists("classify")
    assert r.llen(classify_lists[-1]) == 3 and classify_lists[-1].endswith(str(LOW_PRIORITY))
    # A worker pops the default list first: the quiet channel's message before the flood's excess.
    assert r.llen(classify_lists[0]) == 4
    # Each message queued once, in the list of its rate (the bucket holds a message over the rate back from
    # the default list; it is then published at the lowest priority).
    assert _queued(r, classify_lists[0]) == [("f0", False), ("f1", False), ("f2", False), ("q0", False)]
    assert _queued(r, classify_lists[-1]) == [("f3", True), ("f4", True), ("f5", True)]
    # The bucket lasts the time it takes to fill, and a minute: ceil(3 / 0.01) + 60 s.
    assert 350 < r.ttl(keys.BUCKET.key(flood)) <= 360


def test_a_user_joined_before_app_added_is_kept_for_it(client, wire_settings):
    conv = f"{uuid.uuid4()}@wire.example"
    joined = {"type": "user_joined", "conversationId": qid(conv), "members": [{"userId": qid(BOB)}]}
    assert post(client, joined).status_code == 200
    added = sidecar_app_added(conv, [{"userId": ALICE, "role": "ADMIN"}], kind="ONE_TO_ONE")
    assert post(client, added).status_code == 200
    channel = ChannelConfig.objects.get(channel_id=conv)
    assert channel.conversation_type == "GROUP" and not channel.is_personal  # as in order: a join makes a group
    assert {m.user_id for m in members.all_members(conv)} == {ALICE, BOB}


def test_an_app_added_after_its_conversation_was_deleted_changes_nothing(client, wire_settings):
    conv = f"{uuid.uuid4()}@wire.example"
    assert post(client, {"type": "conversation_deleted", "conversationId": qid(conv)}).status_code == 200
    added = sidecar_app_added(conv, [{"userId": ALICE, "role": "ADMIN"}])
    assert post(client, added).json() == {"status": "ignored"}
    assert not ChannelConfig.objects.filter(channel_id=conv, left_at__isnull=True).exists()


def test_the_default_bucket_lets_a_conversation_through_at_its_own_pace():
    cfg = settings.JEEVES
    assert cfg.channel_rate == 2.0 and cfg.channel_burst == 60 and dataclasses.is_dataclass(cfg)


def test_with_no_bucket_every_message_is_windowed_parked_and_queued(client, published, isolated_redis):
    from pipeline import claimcheck, window

    with override_settings(JEEVES=wire_config(channel_rate=0)):
        conv = _channel(client)
        for n in range(3):
            assert post(client, sidecar_text(conv, ALICE, f"m{n}", f"plain item {n}")).json() == {"status": "queued"}
    assert [m.id for m in window.read(conv)] == ["m0", "m1", "m2"]
    assert all(claimcheck.claim(claimcheck.key_for(conv, f"m{n}")) for n in range(3))
    assert not any(t.get("over_rate") for t in classify_tasks(published))
