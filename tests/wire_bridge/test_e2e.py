"""Both protocols end to end: fake peer → live web server → Postgres/Redis → real respond worker → fake peer.

join → messages → pause (nothing queued) → resume → secure (window empty, epoch bumped, range
opened) → commands answered in the original plan's wording, with buttons and a click round trip.
"""

from __future__ import annotations

import time
import uuid

import pytest
import redis
from django.test import override_settings

from knowledge.models import ChannelConfig, MessageReceipt
from pipeline import window
from tests.fakes.wire import FakeRoman, FakeSidecar, mention_of, qid, sidecar_app_added, sidecar_text
from tests.wire_bridge.conftest import APP_ID, CLASSIFY, ROMAN_SECRET, WIRE_SECRET, wire_config, wire_worker
from wire_bridge import replies

pytestmark = pytest.mark.django_db(transaction=True)

ALICE = f"{uuid.uuid4()}@wire.example"
BOB = f"{uuid.uuid4()}@wire.example"


@pytest.fixture(scope="module")
def fakes():
    with FakeSidecar(WIRE_SECRET) as sidecar, FakeRoman(ROMAN_SECRET) as roman:
        yield sidecar, roman


@pytest.fixture(scope="module")
def respond_worker(django_db_setup, django_db_blocker, isolated_redis, fakes):
    sidecar, roman = fakes
    worker = wire_worker(
        isolated_redis,
        "bridge-respond",
        JEEVES_ROMAN_SECRET=ROMAN_SECRET,
        JEEVES_WIRE_SIDECAR_URL=sidecar.url,
        JEEVES_ROMAN_URL=roman.url,
    )
    yield worker
    worker.stop()


@pytest.fixture
def bridge(live_server, respond_worker, isolated_redis, fakes):
    sidecar, roman = fakes
    with override_settings(JEEVES=wire_config(wire_sidecar_url=sidecar.url, roman_url=roman.url)):
        yield live_server.url, redis.Redis.from_url(isolated_redis, decode_responses=True)


def test_sidecar_end_to_end(bridge, fakes, respond_worker):
    url, r = bridge
    sidecar, _ = fakes
    conv = f"{uuid.uuid4()}@wire.example"
    start = len(sidecar.messages)

    def say(msg: str, text: str, sender: str = ALICE) -> str:
        mentions = [mention_of(text, "@jeeves", APP_ID)] if "@jeeves" in text else []
        response = sidecar.emit(url, sidecar_text(conv, sender, msg, text, mentions))
        assert response.status_code == 200, response.text
        return response.json()["status"]

    def replies_after(count: int) -> list[dict]:
        return sidecar.wait_for_messages(start + count)[start:]

    def click(button_id: str, ref: str, msg: str) -> None:
        event = {
            "eventId": str(uuid.uuid4()),
            "type": "button_clicked",
            "conversationId": qid(conv),
            "sender": qid(BOB),
            "messageId": msg,
            "referencedMessageId": ref,
            "buttonId": button_id,
        }
        assert sidecar.emit(url, event).json() == {"status": "button"}

    members = [
        {"userId": ALICE, "role": "ADMIN", "name": "Zoë 🚀", "handle": "zoe"},
        {"userId": BOB, "role": "MEMBER", "name": "Bob", "handle": "bob"},
        {"userId": APP_ID, "role": "MEMBER"},
    ]
    assert sidecar.emit(url, sidecar_app_added(conv, members, name="billing")).json() == {"status": "joined"}
    queued = r.llen(CLASSIFY)
    assert [say("m1", "shall we retry three times"), say("m2", "yes, three")] == ["queued", "queued"]
    assert r.llen(CLASSIFY) == queued + 2

    assert say("c1", "@jeeves pause") == "command"
    [paused] = replies_after(1)
    assert paused["type"] == "composite" and paused["text"] == replies.PAUSED
    assert say("m3", "the offer is 90k") == "dropped"
    assert r.llen(CLASSIFY) == queued + 2
    assert not MessageReceipt.objects.filter(channel_id=conv, wire_msg_id="m3").exists()

    assert say("c2", "@jeeves resume") == "command"
    assert replies_after(2)[1]["text"] == replies.RESUMED
    assert say("m4", "back on it") == "queued"
    assert len(window.read(conv)) == 3

    assert say("c3", "salary talk next. @jeeves secure mode") == "command"
    secured = replies_after(3)[2]
    assert secured["text"] == replies.SECURED and [b["id"] for b in secured["buttons"]] == ["cmd:secure_off"]
    config = ChannelConfig.objects.get(channel_id=conv)
    assert (config.state, config.epoch, config.secure_ranges[0]["end"]) == ("secure", 1, None)
    assert window.read(conv) == [] and not r.keys(f"jeeves:msg:{conv}:m*")
    assert say("m5", "pay correction") == "dropped"
    click("cmd:secure_off", secured["_messageId"], "b1")
    confirmation, resumed = replies_after(5)[3:5]
    assert confirmation["type"] == "button_confirmation" and confirmation["buttonId"] == "cmd:secure_off"
    assert confirmation["referencedMessageId"] == secured["_messageId"]
    assert resumed["text"] == replies.RESUMED
    config.refresh_from_db()
    assert config.state == "active" and config.secure_ranges[0]["end"] is not None

    assert say("c4", "@jeeves help") == "command"
    assert replies_after(6)[5]["text"] == replies.HELP.format(handle="jeeves")
    text = "@jeeves context stakeholders: @Zoë 🚀 and @Bob"
    mentions = [mention_of(text, "@jeeves", APP_ID), mention_of(text, "@Zoë 🚀", ALICE), mention_of(text, "@Bob", BOB)]
    sidecar.emit(url, sidecar_text(conv, ALICE, "c5", text, mentions))
    noted = replies_after(7)[6]
    assert noted["text"] == "Very good. I have noted the stakeholders: @Zoë 🚀, @Bob."
    assert [m["userId"]["id"] for m in noted["mentions"]] == [ALICE.split("@")[0], BOB.split("@")[0]]
    assert ChannelConfig.objects.get(channel_id=conv).stakeholders == [ALICE, BOB]

    question = sidecar_text(conv, BOB, "q1", "@jeeves what did we decide about retries?", [(APP_ID, 0, 7)])
    assert sidecar.emit(url, question).json() == {"status": "command"}
    answer = replies_after(8)[7]
    assert answer["type"] == "text" and answer["replyToMessageId"] == "q1" and "!" not in answer["text"]
    # Redelivered: acknowledged, no second task, no second answer.
    assert sidecar.emit(url, question).json() == {"status": "duplicate"}
    assert sidecar.emit(url, sidecar_text(conv, ALICE, "m4", "back on it")).json() == {"status": "duplicate"}
    time.sleep(1.5)
    assert len(sidecar.messages) == start + 8
    # Receipts (no content) for what arrived while active; none for m3/m5 nor the resume sent while paused.
    received = set(MessageReceipt.objects.filter(channel_id=conv).values_list("wire_msg_id", flat=True))
    assert received == {"m1", "m2", "c1", "m4", "c3", "c4", "c5", "q1"}
    assert sidecar.errors == []


def test_roman_end_to_end(bridge, fakes, respond_worker):
    url, r = bridge
    _, roman = fakes
    alice, bob = str(uuid.uuid4()), str(uuid.uuid4())
    conv = str(uuid.uuid4())
    channel_id = f"{conv}@wire.example"
    start = len(roman.messages)
    bot = roman.add_bot(url, conv, [alice, bob])
    # The member list comes from Roman's REST API, off the request path.
    from pipeline import members
    from tests.conftest import wait_for

    wait_for(lambda: len(members.all_members(channel_id)) == 2, timeout=30)
    assert ChannelConfig.objects.get(channel_id=channel_id).transport == "roman"

    def say(msg: str, text: str) -> str:
        mentions = [(bot, text.index("@jeeves"), 7)] if "@jeeves" in text else []
        response = roman.emit(url, roman.new_text(bot, alice, msg, text, mentions))
        assert response.status_code == 200 and "type" not in response.json()
        return response.json()["status"]

    def replies_after(count: int) -> list[dict]:
        return [body for _, body in roman.wait_for_messages(start + count)[start:]]

    queued = r.llen(CLASSIFY)
    assert say("m1", "let's go with the queue") == "queued"
    assert say("c1", "@jeeves pause") == "command"
    [poll] = replies_after(1)
    assert (
        poll["type"] == "poll"
        and poll["text"]["data"] == replies.PAUSED
        and poll["poll"]["buttons"] == ["Resume", "Secure mode"]
    )
    assert say("m2", "off the record") == "dropped"
    assert r.llen(CLASSIFY) == queued + 1
    # Click "Resume" (position 0): confirmed by position, state active again, answered.
    assert roman.emit(url, roman.poll_action(bot, bob, poll["poll"]["id"], 0)).json() == {"status": "button"}
    confirmation, resumed = replies_after(3)[1:3]
    assert confirmation["poll"] == {"id": poll["poll"]["id"], "type": "confirmation", "offset": 0, "userId": bob}
    assert resumed["text"]["data"] == replies.RESUMED
    assert ChannelConfig.objects.get(channel_id=channel_id).state == "active"
    assert say("c2", "@jeeves ears off") == "command"
    assert replies_after(4)[3]["text"]["data"] == replies.SECURED
    assert ChannelConfig.objects.get(channel_id=channel_id).epoch == 1 and window.read(channel_id) == []
    assert say("c3", "@jeeves ears on") == "command"
    assert replies_after(5)[4]["text"]["data"] == replies.RESUMED
    roman.emit(url, {"type": "conversation.user_joined", "botId": bot, "userId": "carol-id", "handle": "carol"})
    assert "carol-id@wire.example" in {m.user_id for m in members.all_members(channel_id)}
    assert roman.remove_bot(url, bot).status_code == 200
    assert ChannelConfig.objects.get(channel_id=channel_id).left_at is not None
    assert say("m3", "is anyone there") == "dropped"
    assert roman.errors == []
