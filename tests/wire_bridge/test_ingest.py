"""Ingest over the real view, Postgres and Redis: receipts, window, claim-check, state, membership, deletion."""

from __future__ import annotations

import json
import uuid

import pytest
from celery.signals import before_task_publish
from django.test import override_settings

from knowledge.models import ChannelConfig, MessageReceipt, RomanBot
from pipeline import claimcheck, members, window
from tests.fakes.wire import FakeRoman, mention_of, sidecar_app_added, sidecar_text
from tests.wire_bridge.conftest import APP_ID, ROMAN_SECRET, WIRE_SECRET, wire_config
from wire_bridge import auth

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("wire_settings")]

ALICE = f"{uuid.uuid4()}@wire.example"
BOB = f"{uuid.uuid4()}@wire.example"


@pytest.fixture
def published():
    tasks: list[tuple[str, dict]] = []

    def capture(sender=None, headers=None, body=None, **kwargs):
        tasks.append((headers["task"], body[1] if isinstance(body, tuple | list) else body))

    before_task_publish.connect(capture, weak=False)
    yield tasks
    before_task_publish.disconnect(capture)


@pytest.fixture
def channel(client) -> str:
    conv = f"{uuid.uuid4()}@wire.example"
    post(
        client,
        sidecar_app_added(
            conv,
            [
                {"userId": ALICE, "role": "ADMIN"},
                {"userId": BOB, "role": "MEMBER"},
                {"userId": APP_ID, "role": "MEMBER"},
            ],
        ),
    )
    return conv


def post(client, event: dict, path: str = "/wire/events", secret: str = WIRE_SECRET):
    return client.post(
        path, data=json.dumps(event), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}"
    )


def say(client, conv: str, msg: str, text: str, sender: str = ALICE, at_jeeves: bool = False):
    mentions = [mention_of(text, "@jeeves", APP_ID)] if at_jeeves else []
    return post(client, sidecar_text(conv, sender, msg, text, mentions))


def classify_tasks(published) -> list[dict]:
    return [body for name, body in published if name == "pipeline.tasks.classify_message"]


def test_text_is_received_windowed_parked_and_classified(client, channel, published):
    response = say(client, channel, "m1", "shall we retry three times")
    assert response.status_code == 200 and response.json() == {"status": "queued"}
    receipt = MessageReceipt.objects.get(channel_id=channel, wire_msg_id="m1")
    assert receipt.author_id == ALICE and receipt.sent_at.isoformat().startswith("2026-03-02T09:00")
    [message] = window.read(channel)
    assert (message.id, message.author_id, message.text) == ("m1", ALICE, "shall we retry three times")
    [task] = classify_tasks(published)
    assert task == {  # no claim-check key: the worker derives it from the channel and the message id
        "channel_id": channel,
        "wire_msg_id": "m1",
        "epoch": 0,
        "author_id": ALICE,
        "sent_at": receipt.sent_at.isoformat(),
    }
    assert claimcheck.claim(claimcheck.key_for(channel, "m1")) == "shall we retry three times"


def test_window_claim_check_and_publish_travel_in_one_redis_round_trip(client, channel, published, monkeypatch):
    """The classify task's LPUSH joins the pipeline of the window push and the claim check (after them, so
    a worker never sees a task whose text is not parked yet; ground/broker.py): one Redis round trip per
    message, with the per-channel token bucket too, over the rate as within it."""
    from redis.connection import AbstractConnection

    from ground import broker
    from ground.redis import get_redis
    from wire_bridge import ingest

    assert say(client, channel, "m0", "warming up the producer").json() == {"status": "queued"}
    sent: list[int] = []
    real = AbstractConnection.send_packed_command

    def counted(self, command, *args, **kwargs):
        sent.append(1)
        return real(self, command, *args, **kwargs)

    from jeeves.celery import app as celery_app

    with celery_app.producer_or_acquire() as producer:
        assert isinstance(producer.channel, broker.Channel)
    assert ingest._joins_pipeline(get_redis().pipeline())
    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
    with override_settings(JEEVES=wire_config(channel_rate=0)):  # no per-channel bucket
        assert say(client, channel, "m1", "shall we retry three times").json() == {"status": "queued"}
    assert len(sent) == 1
    # With the bucket (the default) the publish is an EVAL that takes a token and pushes, on the same pipeline.
    assert say(client, channel, "m1b", "and once more with the bucket").json() == {"status": "queued"}
    assert len(sent) == 2
    # A message over its channel's rate is queued in the same round trip as one within it, at the lowest priority.
    with override_settings(JEEVES=wire_config(channel_rate=0.001, channel_burst=1)):
        assert say(client, channel, "m1c", "the last token").json() == {"status": "queued"}
        assert say(client, channel, "m1d", "over the rate").json() == {"status": "queued"}
    monkeypatch.undo()
    assert len(sent) == 4
    tasks = classify_tasks(published)
    assert [(t["wire_msg_id"], t.get("over_rate", False)) for t in tasks] == [
        ("m0", False),
        ("m1", False),
        ("m1b", False),
        ("m1c", False),
        ("m1d", True),
    ]
    assert [m.id for m in window.read(channel)] == ["m0", "m1", "m1b", "m1c", "m1d"]
    assert claimcheck.claim(claimcheck.key_for(channel, "m1")) == "shall we retry three times"

    # Where the producer cannot join the pipeline (another transport, a broker elsewhere), the publish follows it.
    monkeypatch.setattr(ingest, "_joins_pipeline", lambda pipe: False)
    assert say(client, channel, "m2", "and again on a separate publish").json() == {"status": "queued"}
    assert [t["wire_msg_id"] for t in classify_tasks(published)][-1] == "m2"
    assert claimcheck.claim(claimcheck.key_for(channel, "m2")) == "and again on a separate publish"


def test_redelivery_creates_no_second_receipt_and_no_second_task(client, channel, published):
    event = sidecar_text(channel, ALICE, "m1", "hello")
    assert post(client, event).json() == {"status": "queued"}
    assert post(client, event).json() == {"status": "duplicate"}
    assert MessageReceipt.objects.filter(channel_id=channel).count() == 1
    assert len(classify_tasks(published)) == 1 and len(window.read(channel)) == 1


def test_a_failed_publish_keeps_no_receipt_so_the_retry_is_queued(client, channel, published, monkeypatch):
    """Accepted, then lost: Redis fails the admission's round trip (gate, dedupe, window, claim check and the
    publish in one script). No receipt is written, the webhook answers 503, and Wire's retry is queued once
    (not a duplicate)."""
    import redis
    from redis.commands.core import Script

    real = Script.__call__
    calls = {"n": 0}

    def refuse_once(self, *args, **kwargs):  # the script carrying the publish
        calls["n"] += 1
        if calls["n"] == 1:
            raise redis.ConnectionError("broker refused the publish")
        return real(self, *args, **kwargs)

    say(client, channel, "m0", "warming the gate")
    monkeypatch.setattr(Script, "__call__", refuse_once)
    event = sidecar_text(channel, ALICE, "m1", "shall we retry three times")
    response = post(client, event)
    assert response.status_code == 503 and response["Retry-After"]
    assert not MessageReceipt.objects.filter(channel_id=channel, wire_msg_id="m1").exists()
    assert [t["wire_msg_id"] for t in classify_tasks(published)] == ["m0"]

    assert post(client, event).json() == {"status": "queued"}
    assert post(client, event).json() == {"status": "duplicate"}
    assert MessageReceipt.objects.filter(channel_id=channel, wire_msg_id="m1").count() == 1
    assert [t["wire_msg_id"] for t in classify_tasks(published)] == ["m0", "m1"]
    assert [m.id for m in window.read(channel)] == ["m0", "m1"]


def test_a_bridge_that_dies_after_the_publish_leaves_the_receipt_to_the_worker(client, channel, published, monkeypatch):
    """The task reached the broker but the receipt was never written (the web process died in between):
    the classify worker writes the receipt, and Wire's retry is then a duplicate."""
    from knowledge import receipts
    from pipeline.tasks import classify_message

    def die(*args, **kwargs):  # after the Redis step queued the task, before the receipt is written
        raise SystemError("the web process died before writing the receipt")

    say(client, channel, "m0", "warming the gate")
    monkeypatch.setattr(receipts, "defer_receipt", die)
    event = sidecar_text(channel, ALICE, "m1", "shall we retry three times")
    assert post(client, event).status_code == 503
    assert not MessageReceipt.objects.filter(channel_id=channel, wire_msg_id="m1").exists()
    [_, task] = classify_tasks(published)
    monkeypatch.undo()

    classify_message(**task)  # the worker's turn
    receipt = MessageReceipt.objects.get(channel_id=channel, wire_msg_id="m1")
    assert (receipt.tier, receipt.author_id) == (1, ALICE)
    assert post(client, event).json() == {"status": "duplicate"}
    classify_message(**task)  # a second copy of the task changes nothing and counts nothing
    assert receipts.receipt_tier(channel, "m1") == 1
    assert MessageReceipt.objects.get(channel_id=channel, wire_msg_id="m1").outcome == receipt.outcome


@pytest.mark.django_db(transaction=True)
def test_on_its_own_the_receipt_is_written_after_the_response_and_a_failed_publish_writes_none(
    client, channel, published, monkeypatch
):
    """The webhook's own path, with no caller transaction around it: a message admitted in Redis has its receipt
    sent after the response (and committed for everyone once its answer is read); a failed publish leaves no
    receipt and no transaction open; the cold path (no gate) commits its receipt in the admission."""
    import psycopg
    import redis
    from django.db import connection
    from redis.commands.core import Script

    from knowledge import gate, receipts

    def committed() -> int:  # what another connection sees, once this one's answers are read
        receipts.settle()
        with psycopg.connect(**connection.get_connection_params()) as other:
            return other.execute("SELECT count(*) FROM message_receipts WHERE channel_id = %s", [channel]).fetchone()[0]

    def refuse(*args, **kwargs):  # the script carrying the publish
        raise redis.ConnectionError("broker refused the publish")

    assert say(client, channel, "m0", "admitted in Postgres: the gate is cold").json() == {"status": "queued"}
    assert committed() == 1
    real = Script.__call__
    monkeypatch.setattr(Script, "__call__", refuse)
    event = sidecar_text(channel, ALICE, "m1", "shall we retry three times")
    assert post(client, event).status_code == 503
    assert committed() == 1 and len(classify_tasks(published)) == 1
    assert connection.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE

    monkeypatch.setattr(Script, "__call__", real)
    assert post(client, event).json() == {"status": "queued"}
    assert connection.connection in receipts._UNREAD  # sent after the response, its answer not read yet
    assert committed() == 2
    assert post(client, event).json() == {"status": "duplicate"}
    assert committed() == 2 and len(classify_tasks(published)) == 2
    assert say(client, channel, "p1", "@jeeves pause", at_jeeves=True).json() == {"status": "command"}
    assert say(client, channel, "m2", "while paused").json() == {"status": "dropped"}
    assert committed() == 3  # the command's receipt; nothing of the paused message
    gate.forget(channel)
    assert say(client, channel, "m3", "while paused, the gate cold").json() == {"status": "dropped"}
    assert committed() == 3
    assert connection.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


@pytest.mark.django_db(transaction=True)
def test_on_its_own_the_admission_replaces_a_kept_connection_the_server_dropped(client, channel, published):
    """The webhook's path runs no per-request health check (`SELECT 1`): a kept connection that Postgres
    dropped since (a restart) fails the admission, which connects afresh and is sent once more."""
    import time

    import psycopg
    from django.db import connection

    from knowledge import gate, receipts

    assert say(client, channel, "m1", "first on this connection").json() == {"status": "queued"}
    receipts.settle()  # m1's receipt, sent after the response, is written before the server drops the connection
    dropped = connection.connection
    pid = dropped.info.backend_pid
    with psycopg.connect(**connection.get_connection_params()) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
        for _ in range(100):  # until the backend is gone: the next admission meets a dropped connection
            if not other.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
                break
            time.sleep(0.02)
    gate.forget(channel)  # admitted in Postgres
    assert say(client, channel, "m2", "after the server dropped it").json() == {"status": "queued"}
    assert connection.connection is not dropped
    assert say(client, channel, "m2", "after the server dropped it").json() == {"status": "duplicate"}
    receipts.settle()  # the answers the last request left unread, read before this thread's next query (as above)
    assert list(
        MessageReceipt.objects.filter(channel_id=channel).order_by("wire_msg_id").values_list("wire_msg_id", flat=True)
    ) == ["m1", "m2"]
    assert [t["wire_msg_id"] for t in classify_tasks(published)] == ["m1", "m2"]


def test_unknown_conversation_is_created_lazily(client, published):
    conv = f"{uuid.uuid4()}@other.example"
    assert say(client, conv, "m1", "hi").json() == {"status": "queued"}
    channel = ChannelConfig.objects.get(channel_id=conv)
    assert (channel.organisation_id, channel.transport, channel.state) == ("other.example", "sidecar", "active")


def test_ephemeral_message_is_acknowledged_and_never_processed(client, channel, published):
    response = post(client, sidecar_text(channel, ALICE, "m1", "self-destructing", expires_after_ms=10000))
    assert response.status_code == 200 and response.json() == {"status": "ephemeral"}
    assert not MessageReceipt.objects.filter(channel_id=channel).exists()
    assert window.read(channel) == [] and published == []


def test_pause_drops_before_any_queue_and_resume_restores(client, channel, published):
    assert say(client, channel, "c1", "@jeeves pause", at_jeeves=True).json() == {"status": "command"}
    config = ChannelConfig.objects.get(channel_id=channel)
    assert (config.state, config.state_changed_by) == ("paused", ALICE)
    assert say(client, channel, "m1", "the salary offer is 90k").json() == {"status": "dropped"}
    assert not MessageReceipt.objects.filter(channel_id=channel, wire_msg_id="m1").exists()
    assert window.read(channel) == [] and classify_tasks(published) == []
    assert [n for n, _ in published] == ["wire_bridge.tasks.respond_to_command"]
    # The command to resume is answered while paused, and leaves no receipt either.
    assert say(client, channel, "c2", "@jeeves resume", sender=BOB, at_jeeves=True).json() == {"status": "command"}
    assert not MessageReceipt.objects.filter(channel_id=channel, wire_msg_id="c2").exists()
    assert ChannelConfig.objects.get(channel_id=channel).state == "active"
    assert say(client, channel, "m2", "back to work").json() == {"status": "queued"}


def test_commands_are_not_windowed_nor_classified_and_carry_no_text(client, channel, published):
    say(client, channel, "q1", "@jeeves what did we decide about canary-9d1e?", at_jeeves=True)
    assert window.read(channel) == [] and classify_tasks(published) == []
    [(name, kwargs)] = published
    assert name == "wire_bridge.tasks.respond_to_command"
    assert "canary-9d1e" not in repr(kwargs)
    key = claimcheck.key_for(kwargs["channel_id"], kwargs["wire_msg_id"])
    assert json.loads(claimcheck.claim(key))["body"] == "what did we decide about canary-9d1e?"
    assert MessageReceipt.objects.get(channel_id=channel, wire_msg_id="q1").outcome == "command"
    assert say(client, channel, "q1", "@jeeves what did we decide about canary-9d1e?", at_jeeves=True).json() == {
        "status": "duplicate"
    }
    assert len(published) == 1


def test_secure_flushes_window_and_pending_text_bumps_epoch_and_opens_a_range(client, channel, published, redis_client):
    say(client, channel, "m1", "first")
    say(client, channel, "m2", "second")
    other = f"{uuid.uuid4()}@wire.example"
    say(client, other, "o1", "another channel")
    assert len(window.read(channel)) == 2
    say(client, channel, "c1", "ok. @jeeves secure mode", at_jeeves=True)
    config = ChannelConfig.objects.get(channel_id=channel)
    assert (config.state, config.epoch) == ("secure", 1)
    assert len(config.secure_ranges) == 1 and config.secure_ranges[0]["end"] is None
    assert window.read(channel) == []
    assert claimcheck.claim(claimcheck.key_for(channel, "m1")) is None
    assert claimcheck.claim(claimcheck.key_for(channel, "m2")) is None
    # Another channel's window and pending text are untouched.
    assert len(window.read(other)) == 1 and claimcheck.claim(claimcheck.key_for(other, "o1")) == "another channel"
    assert say(client, channel, "m3", "secret").json() == {"status": "dropped"}
    assert say(client, channel, "c2", "@jeeves pause", at_jeeves=True).json() == {"status": "command"}
    assert ChannelConfig.objects.get(channel_id=channel).state == "secure"  # not downgraded
    say(client, channel, "c3", "@jeeves ears on", at_jeeves=True)
    config.refresh_from_db()
    assert (config.state, config.epoch) == ("active", 1)
    assert config.secure_ranges[0]["end"] is not None
    outcomes = [kw["outcome"] for n, kw in published if n == "wire_bridge.tasks.respond_to_command"]
    assert outcomes == ["secure", "still_secure", "active"]


def test_membership_personal_mode_and_removal(client, published):
    conv = f"{uuid.uuid4()}@wire.example"
    post(
        client,
        sidecar_app_added(
            conv,
            [
                {"userId": ALICE, "role": "ADMIN", "name": "Alice", "handle": "alice"},
                {"userId": APP_ID, "role": "MEMBER"},
            ],
            kind="ONE_TO_ONE",
            tz="Europe/London",
        ),
    )
    config = ChannelConfig.objects.get(channel_id=conv)
    assert (config.is_personal, config.timezone, config.channel_name) == (True, "Europe/London", "test channel")
    assert members.Member(ALICE, "ADMIN", "Alice", "alice") in members.all_members(conv)
    post(
        client, {"type": "user_joined", "conversationId": _q(conv), "members": [{"userId": _q(BOB), "role": "MEMBER"}]}
    )
    assert not ChannelConfig.objects.get(channel_id=conv).is_personal
    # Someone joined: a group from now on, whoever leaves (only Wire's type makes a 1:1).
    post(client, {"type": "user_left", "conversationId": _q(conv), "members": [_q(BOB)]})
    assert ChannelConfig.objects.get(channel_id=conv).conversation_type == "GROUP"
    say(client, conv, "m1", "hello")
    post(client, {"type": "user_left", "conversationId": _q(conv), "members": [_q(APP_ID)]})
    config.refresh_from_db()
    assert config.left_at is not None and window.read(conv) == [] and members.all_members(conv) == []
    assert say(client, conv, "m2", "anyone?").json() == {"status": "dropped"}
    assert say(client, conv, "c1", "@jeeves status", at_jeeves=True).json() == {"status": "dropped"}
    # Added back: processing resumes.
    post(client, sidecar_app_added(conv, [{"userId": ALICE, "role": "ADMIN"}]))
    assert say(client, conv, "m3", "welcome back").json() == {"status": "queued"}


def test_message_deleted_leaves_the_window_and_claim_check_and_forgets_knowledge(client, channel, published):
    say(client, channel, "m1", "keep")
    say(client, channel, "m2", "take back")
    response = post(
        client, {"type": "message_deleted", "conversationId": _q(channel), "sender": _q(ALICE), "messageId": "m2"}
    )
    assert response.json() == {"status": "forgotten"}
    assert [m.id for m in window.read(channel)] == ["m1"]
    assert claimcheck.claim(claimcheck.key_for(channel, "m2")) is None
    assert ("pipeline.tasks.forget_message", {"channel_id": channel, "wire_msg_id": "m2"}) in published


def test_conversation_deleted_flushes_and_stops(client, channel, published):
    say(client, channel, "m1", "x")
    post(client, {"type": "conversation_deleted", "conversationId": _q(channel)})
    assert window.read(channel) == []
    assert ChannelConfig.objects.get(channel_id=channel).left_at is not None


def test_roman_token_is_encrypted_at_rest_and_user_joined_found_by_bot(client, published):
    bot, conv, token = str(uuid.uuid4()), str(uuid.uuid4()), "lifelong-token-abc"
    push = {
        "type": "conversation.bot_request",
        "botId": bot,
        "userId": "u1",
        "conversationId": conv,
        "conversation": "Roman room",
        "handle": "alice",
        "locale": "en",
        "token": token,
    }
    response = post(client, push, "/wire/roman", ROMAN_SECRET)
    assert response.status_code == 200 and "type" not in response.json()
    stored = RomanBot.objects.get(bot_id=bot)
    assert token not in stored.token_ciphertext and auth.decrypt_token(stored.token_ciphertext) == token
    channel = ChannelConfig.objects.get(channel_id=f"{conv}@wire.example")
    assert (channel.transport, channel.channel_name) == ("roman", "Roman room")
    assert ("wire_bridge.tasks.sync_roman_members", {"channel_id": channel.channel_id}) in published
    post(
        client,
        {"type": "conversation.user_joined", "botId": bot, "userId": "u2", "handle": "bob"},
        "/wire/roman",
        ROMAN_SECRET,
    )
    assert "u2@wire.example" in {m.user_id for m in members.all_members(channel.channel_id)}
    post(
        client, {"type": "conversation.bot_removed", "botId": bot, "conversationId": conv}, "/wire/roman", ROMAN_SECRET
    )
    channel.refresh_from_db()
    assert channel.left_at is not None


def _q(qualified: str) -> dict:
    ident, _, domain = qualified.partition("@")
    return {"id": ident, "domain": domain}


def test_a_group_stays_a_group_when_the_member_cache_is_lost(client, channel):
    """The flip the review found: Redis restarts (the member cache is gone), one person joins, and the
    group used to become a "1:1" answered from that person's records across the organisation."""
    members.flush(channel)
    post(
        client,
        {"type": "user_joined", "conversationId": _q(channel), "members": [{"userId": _q(BOB), "role": "MEMBER"}]},
    )
    config = ChannelConfig.objects.get(channel_id=channel)
    assert (config.conversation_type, config.is_personal) == ("GROUP", False)


def test_a_conversation_type_wire_does_not_name_is_a_group(client):
    conv = f"{uuid.uuid4()}@wire.example"
    event = sidecar_app_added(conv, [{"userId": ALICE, "role": "ADMIN"}, {"userId": APP_ID, "role": "MEMBER"}])
    del event["conversation"]["type"]
    post(client, event)
    config = ChannelConfig.objects.get(channel_id=conv)
    assert (config.conversation_type, config.is_personal) == ("UNKNOWN", False)


def test_roman_settles_the_type_from_its_member_list_and_a_join_makes_a_group(client, published):
    from wire_bridge import tasks

    with FakeRoman(ROMAN_SECRET) as roman_server, override_settings(JEEVES=wire_config(roman_url=roman_server.url)):
        bot = roman_server.new_bot(str(uuid.uuid4()), ["u1"])
        post(client, roman_server.bot_request(bot), "/wire/roman", ROMAN_SECRET)
        channel_id = f"{roman_server.bots[bot].conversation_id}@wire.example"
        assert ChannelConfig.objects.get(channel_id=channel_id).conversation_type == "UNKNOWN"
        tasks.sync_roman_members(channel_id)  # the task body, as the respond worker runs it
        assert ChannelConfig.objects.get(channel_id=channel_id).is_personal
        post(
            client,
            {"type": "conversation.user_joined", "botId": bot, "userId": "u2", "handle": "bob"},
            "/wire/roman",
            ROMAN_SECRET,
        )
        assert ChannelConfig.objects.get(channel_id=channel_id).conversation_type == "GROUP"
        roman_server.bots[bot].members.pop()  # Roman's list is behind: a later sync must not undo the join
        tasks.sync_roman_members(channel_id)
        assert not ChannelConfig.objects.get(channel_id=channel_id).is_personal


def test_a_message_whose_delete_arrived_first_is_never_recorded(client, channel, published):
    deleted = {"type": "message_deleted", "conversationId": _q(channel), "sender": _q(ALICE), "messageId": "m9"}
    assert post(client, deleted).json() == {"status": "forgotten"}
    assert say(client, channel, "m9", "on second thoughts, never mind").json() == {"status": "forgotten"}
    assert not MessageReceipt.objects.filter(channel_id=channel, wire_msg_id="m9").exists()
    assert window.read(channel) == [] and classify_tasks(published) == []
    assert claimcheck.claim(claimcheck.key_for(channel, "m9")) is None


def test_leaving_with_no_grace_asks_for_the_purge_at_once(client, channel, published):
    with override_settings(JEEVES=wire_config(retention_after_leave_days=0)):
        post(client, {"type": "conversation_deleted", "conversationId": _q(channel)})
    assert [name for name, _ in published if name == "pipeline.tasks.purge_left_channels"] == [
        "pipeline.tasks.purge_left_channels"
    ]
    post(client, sidecar_app_added(channel, [{"userId": ALICE, "role": "ADMIN"}]))
    post(client, {"type": "conversation_deleted", "conversationId": _q(channel)})  # the default grace: 7 days
    assert len([name for name, _ in published if name == "pipeline.tasks.purge_left_channels"]) == 1


@pytest.mark.django_db(transaction=True)
def test_on_its_own_the_admission_reads_its_commit_after_the_response(client, channel, published):
    """A message admitted in Postgres (cold gate) has its COMMIT sent before the answer and its answer read
    after it (Django's request_finished), or else by the next request; one admitted in Redis has its receipt
    sent after the answer; a request of the webhook starts without waiting for either, another one waits; a
    pause right after still holds."""
    import psycopg
    from django.core.signals import request_finished
    from django.db import connection

    from knowledge import gate, receipts

    def committed() -> int:  # what another connection sees
        receipts.settle()
        with psycopg.connect(**connection.get_connection_params()) as other:
            return other.execute("SELECT count(*) FROM message_receipts WHERE channel_id = %s", [channel]).fetchone()[0]

    assert say(client, channel, "m1", "read after the response").json() == {"status": "queued"}
    assert committed() == 1
    request_finished.disconnect(dispatch_uid="knowledge.receipts.settle")
    try:
        gate.forget(channel)
        assert say(client, channel, "m2", "left unread").json() == {"status": "queued"}
        assert connection.connection in receipts._UNREAD
        assert say(client, channel, "m3", "read by the next request").json() == {"status": "queued"}
    finally:
        request_finished.connect(receipts.request_finished, dispatch_uid="knowledge.receipts.settle")
    assert say(client, channel, "m4", "its receipt sent after the response").json() == {"status": "queued"}
    assert connection.connection in receipts._UNREAD or len(receipts._deferred.receipts) == 2
    receipts.request_started(environ={"PATH_INFO": "/admin/login/"})  # not the webhook: waits for the answers
    assert connection.connection not in receipts._UNREAD
    receipts.request_finished()  # sends what is left
    assert committed() == 4
    assert connection.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert say(client, channel, "p1", "@jeeves pause", at_jeeves=True).json() == {"status": "command"}
    assert say(client, channel, "m5", "while paused").json() == {"status": "dropped"}
    assert [t["wire_msg_id"] for t in classify_tasks(published)] == ["m1", "m2", "m3", "m4"]
    receipts.settle()
