"""The sliding window in real Redis: bounded by count and by age, removable, flushable."""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import UTC, datetime

from django.test import override_settings

from ground import keys
from pipeline import window
from pipeline.window import WindowMessage


def _msg(i: int, received_at: float | None = None) -> WindowMessage:
    extra = {} if received_at is None else {"received_at": received_at}
    return WindowMessage(
        id=f"m{i}", author_id="u@wire.example", ts=datetime(2026, 3, 2, tzinfo=UTC), text=f"t{i}", **extra
    )


def test_window_keeps_the_newest_messages_up_to_its_size(settings, redis_client):
    with override_settings(JEEVES=dataclasses.replace(settings.JEEVES, window_size=5)):
        for i in range(8):
            window.push("c1@wire.example", _msg(i))
    assert [m.id for m in window.read("c1@wire.example")] == ["m3", "m4", "m5", "m6", "m7"]
    assert 0 < redis_client.ttl(window.key_for("c1@wire.example")) <= settings.JEEVES.window_max_age_s


def test_aged_messages_leave_the_window_even_in_a_busy_channel(settings, redis_client):
    old = time.time() - settings.JEEVES.window_max_age_s - 5
    window.push("c2@wire.example", _msg(1, received_at=old))
    window.push("c2@wire.example", _msg(2, received_at=old))
    window.push("c2@wire.example", _msg(3))
    assert [m.id for m in window.read("c2@wire.example")] == ["m3"]
    assert redis_client.llen(window.key_for("c2@wire.example")) == 1  # gone from Redis, not just hidden


def test_remove_and_flush(redis_client):
    for i in range(3):
        window.push("c3@wire.example", _msg(i))
    assert window.remove("c3@wire.example", "m1")
    assert not window.remove("c3@wire.example", "m9")
    assert [m.id for m in window.read("c3@wire.example")] == ["m0", "m2"]
    window.flush("c3@wire.example")
    assert not redis_client.exists(window.key_for("c3@wire.example"))


def test_a_message_round_trips_through_its_json_with_every_field():
    message = WindowMessage(
        id="m9", author_id="u@wire.example", ts=datetime(2026, 3, 2, 9, 30, tzinfo=UTC), text="t9 ☕",
        mentions=["v@wire.example"], quoted_id="m8", received_at=1234.5,
    )  # fmt: skip
    assert WindowMessage.from_json(message.to_json()) == message
    assert set(json.loads(message.to_json())) == {f.name for f in dataclasses.fields(WindowMessage)}


def test_a_prompt_excerpt_is_the_burst_after_a_short_tail_bounded_by_count_and_size():
    msgs = [_msg(i) for i in range(12)]
    size = {f"m{i}": 10 for i in range(12)} | {"m3": 50}

    def shown(new: set[str], lead: int, budget: int) -> list[str]:
        return [m.id for m in window.excerpt(msgs, new, lead=lead, budget=budget, size=lambda m: size[m.id])]

    # From the first new message to the last (the one between them too), after at most `lead` earlier ones;
    # m11 comes after the last new one (not classified yet): the next run has it.
    assert shown({"m8", "m10"}, lead=3, budget=100) == ["m5", "m6", "m7", "m8", "m9", "m10"]
    assert shown({"m8", "m10"}, lead=0, budget=100) == ["m8", "m9", "m10"]
    # The tail stops at the first earlier message that would pass the budget, nearest first.
    assert shown({"m5"}, lead=4, budget=59) == ["m4", "m5"]
    assert shown({"m5"}, lead=4, budget=60) == ["m3", "m4", "m5"]
    assert shown({"m5"}, lead=4, budget=100) == ["m1", "m2", "m3", "m4", "m5"]
    assert shown({"m1"}, lead=4, budget=100) == ["m0", "m1"]
    assert shown(set(), lead=4, budget=100) == []


def test_tier_1_vectors_go_with_their_messages(settings, redis_client):
    """Vectors kept beside the window (`keep_vectors`): read back, kept only for the messages the window an
    extraction run read holds, and removed with their message, the window, or their author's messages."""
    ch, other, author = "c4@wire.example", "c5@wire.example", "w@wire.example"
    for ch_ in (ch, other):
        window.flush(ch_)
    for i in range(4):
        window.push(ch, dataclasses.replace(_msg(i), author_id=author))
    window.push(other, dataclasses.replace(_msg(7), author_id=author))
    window.keep_vectors({ch: {f"m{i}": f"v{i}" for i in range(4)}, other: {"m7": "v7"}})
    vectors = keys.WINDOW_VECTORS.key(ch)
    assert 0 < redis_client.ttl(vectors) <= settings.JEEVES.window_max_age_s
    # A run whose window no longer holds m0 asks for m1 and m9 (never stored): m0's vector goes.
    assert window.vectors(ch, ["m1", "m2", "m3"], ["m1", "m9"]) == {"m1": "v1"}
    assert set(redis_client.hkeys(vectors)) == {"m1", "m2", "m3"}
    window.remove(ch, "m2")
    assert set(redis_client.hkeys(vectors)) == {"m1", "m3"}
    assert window.remove_author(author) == 4  # m0, m1, m3 and the other channel's m7
    assert not redis_client.exists(vectors) and not redis_client.exists(keys.WINDOW_VECTORS.key(other))
    window.keep_vectors({ch: {"m5": "v5"}})
    window.flush(ch)
    assert not redis_client.exists(vectors)
