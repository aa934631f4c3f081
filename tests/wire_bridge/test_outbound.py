"""The outbound client against the fakes: shapes, UTF-16 mention offsets, retries, the right channel only."""

from __future__ import annotations

import os
import uuid

import pytest
from django.test import override_settings

from knowledge import channels
from knowledge.models import ChannelConfig
from tests.fakes.wire import FakeRoman, FakeSidecar, RomanBotState, utf16_slice
from tests.wire_bridge.conftest import ROMAN_SECRET, WIRE_SECRET, wire_config
from wire_bridge import auth, outbound, roman
from wire_bridge.outbound import Button, MentionSpan, OutboundError, Reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def sidecar():
    with FakeSidecar(WIRE_SECRET) as fake, override_settings(JEEVES=wire_config(wire_sidecar_url=fake.url)):
        yield fake


@pytest.fixture
def fake_roman():
    with FakeRoman(ROMAN_SECRET) as fake, override_settings(JEEVES=wire_config(roman_url=fake.url)):
        yield fake


def _channel(transport: str = "sidecar") -> str:
    cid = f"{uuid.uuid4()}@wire.example"
    channels.ensure_channel(cid, organisation_id="wire.example", transport=transport)
    return cid


def test_mention_offsets_are_utf16_after_emoji(sidecar):
    text = "Noted 🚀🚀, @Zoë and @Bob."
    zoe, bob = text.index("@Zoë"), text.index("@Bob")
    reply = Reply(text, mentions=(MentionSpan("z@wire.example", zoe, 4), MentionSpan("b@wire.example", bob, 4)))
    outbound.send(_channel(), reply)
    [sent] = sidecar.wait_for_messages(1)
    assert [m["offset"] for m in sent["mentions"]] == [zoe + 2, bob + 2]  # each emoji is two UTF-16 units
    assert [utf16_slice(sent["text"], m["offset"], m["length"]) for m in sent["mentions"]] == ["@Zoë", "@Bob"]
    assert sidecar.errors == []


def test_composite_and_confirmation(sidecar):
    cid = _channel()
    outbound.send(cid, Reply("Shall I?", buttons=(Button("x:yes", "Yes"), Button("x:no", "No"))))
    outbound.confirm_button(cid, "ref-1", "x:yes", "u@wire.example")
    composite, confirmation = sidecar.wait_for_messages(2)
    assert composite["type"] == "composite" and [b["id"] for b in composite["buttons"]] == ["x:yes", "x:no"]
    assert confirmation == {
        **confirmation,
        "type": "button_confirmation",
        "referencedMessageId": "ref-1",
        "buttonId": "x:yes",
    }
    with pytest.raises(ValueError):
        Reply("dup", buttons=(Button("a", "A"), Button("a", "B")))


def test_a_5xx_is_left_to_the_task_to_retry_and_a_4xx_is_final(sidecar):
    """One POST per call: a 5xx raises PeerUnavailable (the respond task retries it, through Celery:
    tests/wire_bridge/test_outbound_retry.py), a 4xx a plain OutboundError that nothing retries."""
    cid = _channel()
    sidecar.fail_next(503, times=1)
    with pytest.raises(outbound.PeerUnavailable):
        outbound.send(cid, Reply("not yet"))
    outbound.send(cid, Reply("second time lucky"))
    assert [m["text"] for m in sidecar.wait_for_messages(1)] == ["second time lucky"]
    sidecar.fail_next(400, times=1)
    with pytest.raises(OutboundError) as refused:
        outbound.send(cid, Reply("refused"))
    assert not isinstance(refused.value, outbound.PeerUnavailable)
    assert len(sidecar.messages) == 1


def test_connection_errors_are_left_to_the_task_to_retry():
    with override_settings(JEEVES=wire_config(wire_sidecar_url="http://127.0.0.1:9")):
        with pytest.raises(outbound.PeerUnavailable):
            outbound.send(_channel(), Reply("nobody home"))


def test_one_http_client_per_process_and_a_forked_child_builds_its_own(sidecar):
    client = outbound.http_client()
    outbound.send(_channel(), Reply("over the pooled client"))
    assert outbound.http_client() is client and not client.is_closed
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        try:
            os.write(write, b"own" if outbound.http_client() is not client else b"inherited")
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 16) == b"own"
    os.close(read)
    assert outbound.http_client() is client


def test_a_reply_parked_for_a_retry_is_the_reply_that_was_built():
    reply = Reply(
        "Noted 🚀, @Zoë.",
        mentions=(MentionSpan("z@wire.example", 9, 4),),
        buttons=(Button("cmd:resume", "Resume"),),
        reply_to="m1",
    )
    assert Reply.from_json(reply.to_json()) == reply


def test_roman_reply_uses_the_channels_own_token_and_polls_map_back(fake_roman):
    first, second = _channel("roman"), _channel("roman")
    for cid in (first, second):
        bot_id = str(uuid.uuid4())
        fake_roman.bots[bot_id] = state = RomanBotState(bot_id, cid.split("@")[0], f"tok-{bot_id}", ["u1"])
        channels.store_roman_bot(bot_id, cid, auth.encrypt_token(state.token))
    poll_id = outbound.send(second, Reply("Shall I?", buttons=(Button("cmd:resume", "Resume"),)))
    [(bot_id, body)] = fake_roman.wait_for_messages(1)
    assert fake_roman.bots[bot_id].conversation_id == second.split("@")[0]
    assert body["poll"]["buttons"] == ["Resume"] and body["poll"]["id"] == poll_id
    assert roman.poll_button(poll_id, second, 0) == "cmd:resume"
    assert roman.poll_button(poll_id, first, 0) is None  # a click relayed from another channel maps to nothing
    # A removed bot: Roman answers 409 and the channel is marked left.
    fake_roman.bots[bot_id].removed = True
    with pytest.raises(outbound.ChannelGone):
        outbound.send(second, Reply("hello?"))
    assert ChannelConfig.objects.get(channel_id=second).left_at is not None
    assert fake_roman.errors == []


def test_send_message_posts_only_the_text_of_the_channel_it_writes_to(sidecar):
    """A task sent by hand (Flower's API can send any) names a channel and a ref, never a text key:
    another channel's parked text cannot be posted here."""
    from pipeline import claimcheck
    from wire_bridge.tasks import send_message

    theirs, mine = _channel(), _channel()
    claimcheck.park(theirs, "stale:ACT-0001:1", "their private nudge")
    send_message(channel_id=mine, message_ref="stale:ACT-0001:1")  # the task's body, as a worker runs it
    with pytest.raises(TypeError):
        send_message(channel_id=mine, key=claimcheck.key_for(theirs, "stale:ACT-0001:1"))
    send_message(channel_id=theirs, message_ref="stale:ACT-0001:1")
    [sent] = sidecar.wait_for_messages(1)
    assert (sent["conversationId"]["id"], sent["text"]) == (theirs.partition("@")[0], "their private nudge")
