"""`jeeves replay` posts a message said to Jeeves only once the channel's pipeline has caught up.

A file's messages are posted back to back, but in the live conversation a pause or secure mode came minutes or
days after the talk before it, long handled by then. Posted at once, it made the workers drop the earlier
messages still queued (docs/guarantees.md §3): through the real stack they were never classified nor extracted,
where the in-process simulator (pipeline/offline/replay.py) had extracted them.
"""

from __future__ import annotations

from jeeves.management.commands import jeeves_replay as replay
from tests.pipeline import evalset
from tests.pipeline.evalset import ANA, BOT, ORG, TOM


def _conversation() -> dict:
    said = [
        (ANA, "the greenhouse heater stays on timer mode over the long weekend", False),
        (TOM, "fine by me, I will check the thermostat log on Tuesday morning", False),
        (TOM, "@jeeves ears off", True),
        (ANA, "between us the heater contract renewal looks pricey", False),
        (ANA, "@jeeves ears on", True),
        (TOM, "also the seed order goes to the second supplier this spring", False),
    ]
    return evalset.small_conversation(
        "pacing", said, channel="00000000-0000-4000-8000-0000000000c1", ts="2026-05-0{k}T10:00:00Z",
        msg_id="m{k:03d}", name="greenhouse",
    )  # fmt: skip


def test_a_message_to_jeeves_waits_until_the_channel_has_handled_what_came_before(monkeypatch):
    queued: list[str] = []  # the channel's messages the pipeline has not handled yet
    posted: list[tuple[str, list[str]]] = []  # each message posted, with what was still queued then
    replayer = replay.Replayer("http://bridge.invalid", "secret", f"{BOT}@{ORG}", timeout=5, quiet=True)

    def post(event: dict) -> str:
        if event["type"] == "text_message":
            posted.append((event["messageId"], list(queued)))
            if not event["mentions"]:
                queued.append(event["messageId"])
        return "queued"

    def wait_a_little(seconds: float) -> None:
        if queued:
            queued.pop(0)  # meanwhile the workers handle one message

    monkeypatch.setattr(replayer, "_post", post)
    monkeypatch.setattr(replay, "_busy", lambda channel_id: len(queued))
    monkeypatch.setattr(replay, "_queues_empty", lambda: True)
    monkeypatch.setattr(replay.time, "sleep", wait_a_little)
    replayer.replay(_conversation())

    waited = dict(posted)
    assert [m for m, _ in posted] == ["m001", "m002", "m003", "m004", "m005", "m006"]
    assert waited["m003"] == [] and waited["m005"] == []  # the commands: nothing of the channel left queued
    assert waited["m002"] == ["m001"]  # talk between people is posted as it comes
