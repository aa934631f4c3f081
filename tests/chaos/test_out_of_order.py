"""Out-of-order events: what Wire delivers late, early, twice or shuffled ends in the state an in-order
delivery gives. Each scenario is delivered in order to one conversation and reordered to another, through
the real webhook and workers; their end states (scope, type, members, records, receipts) are compared.

- a delete before its message; duplicate and reordered deliveries of messages;
- app_added after conversation_deleted (a deleted conversation never comes back);
- user_joined before app_added (kept for the app_added that introduces the conversation).
A delete during extraction: tests/pipeline/test_extract.py
(test_a_message_deleted_while_it_is_extracted_leaves_nothing_resting_on_it).
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
import redis

from knowledge.models import ChannelConfig, Decision, MessageReceipt
from pipeline import members
from tests.chaos import harness
from tests.fakes.wire import qid, sidecar_app_added

pytestmark = pytest.mark.django_db(transaction=True)


def _added(conv: str, people: list[str], kind: str = "GROUP") -> dict:
    return sidecar_app_added(conv, [{"userId": p, "role": "MEMBER"} for p in people], kind=kind)


def _joined(conv: str, people: list[str]) -> dict:
    return {"type": "user_joined", "conversationId": qid(conv), "members": [{"userId": qid(p)} for p in people]}


def _deleted_conv(conv: str) -> dict:
    return {"type": "conversation_deleted", "conversationId": qid(conv)}


def _deleted_msg(conv: str, sender: str, mid: str) -> dict:
    return {"type": "message_deleted", "conversationId": qid(conv), "sender": qid(sender), "messageId": mid}


def _state(conv: str, client: redis.Redis) -> dict:
    channel = ChannelConfig.objects.filter(channel_id=conv).first()
    reachable = channel is not None and channel.left_at is None
    state: dict[str, object] = {"reachable": reachable}
    if reachable:
        state["type"] = channel.conversation_type
        state["members"] = sorted(client.hkeys(members.key_for(conv)))
    state["records"] = sorted(
        mid
        for ref in Decision.objects.filter(channel_id=conv).values_list("source_ref", flat=True)
        for mid in (json.loads(ref) if isinstance(ref, str) else ref)["wire_msg_ids"]
    )
    state["receipts"] = sorted(MessageReceipt.objects.filter(channel_id=conv).values_list("wire_msg_id", "outcome"))
    return state


@pytest.mark.chaos
def test_reordered_duplicated_and_early_events_end_as_in_order(chaos_redis, record_row):
    broker = chaos_redis.url
    client = redis.Redis.from_url(broker, decode_responses=True)
    fake = harness.provider()
    env = harness.stack_env(broker, fake)
    alice, bob = f"{uuid.uuid4()}@{harness.DOMAIN}", f"{uuid.uuid4()}@{harness.DOMAIN}"
    with harness.running(fake, env, "chaos-order") as (web, worker, traffic):

        def conversation() -> tuple[str, harness.Channel]:
            conv = f"{uuid.uuid4()}@{harness.DOMAIN}"
            channel = harness.Channel(conv, alice)
            traffic.accepted[conv] = set()
            return conv, channel

        def text(channel: harness.Channel, n: int) -> dict:
            event = traffic.text(channel, n)
            traffic.sent += 1
            return event

        def deliver(conv: str, events: list[dict]) -> None:
            for event in events:
                response = traffic.post(event)
                assert response.status_code in (200, 202), response.text
                if event["type"] == "text_message" and response.json()["status"] == "queued":
                    traffic.accepted[conv].add(event["messageId"])

        scenarios = []
        # Messages: a delete before its message, duplicates, shuffled order.
        a, ca = conversation()
        b, cb = conversation()
        msgs_a = [text(ca, n) for n in range(6)]
        msgs_b = [text(cb, n) for n in range(6)]
        deliver(a, [_added(a, [alice, bob]), *msgs_a, _deleted_msg(a, alice, msgs_a[1]["messageId"])])
        deliver(
            b,
            [
                _added(b, [alice, bob]),
                _deleted_msg(b, alice, msgs_b[1]["messageId"]),
                msgs_b[3],
                msgs_b[0],
                msgs_b[1],
                msgs_b[0],
                msgs_b[5],
                msgs_b[2],
                msgs_b[4],
                msgs_b[3],
            ],
        )
        traffic.accepted[a].discard(msgs_a[1]["messageId"])  # deleted: nothing of it is to remain
        scenarios.append(("delete first, duplicates, shuffled", a, b))
        # app_added after conversation_deleted.
        c, _ = conversation()
        d, _ = conversation()
        deliver(c, [_added(c, [alice, bob]), _deleted_conv(c)])
        deliver(d, [_deleted_conv(d), _added(d, [alice, bob])])
        scenarios.append(("app_added after conversation_deleted", c, d))
        # user_joined before app_added (a 1:1 that gains a member is a group).
        e, _ = conversation()
        f, _ = conversation()
        deliver(e, [_added(e, [alice], kind="ONE_TO_ONE"), _joined(e, [bob])])
        deliver(f, [_joined(f, [bob]), _added(f, [alice], kind="ONE_TO_ONE")])
        scenarios.append(("user_joined before app_added", e, f))

        harness.settle(traffic, timeout=240)
        deadline = time.monotonic() + 60  # the in-order delete's forget_message may still be running
        while time.monotonic() < deadline and any(_state(x, client) != _state(y, client) for _, x, y in scenarios):
            time.sleep(1)
        result = harness.tally("out-of-order events", traffic)
        record_row(result)
        for name, in_order, reordered in scenarios:
            assert _state(in_order, client) == _state(reordered, client), name
    assert result.duplicated == 0 and result.canaries == 0, result
