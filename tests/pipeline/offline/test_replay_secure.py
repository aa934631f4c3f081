"""The in-process simulator (pipeline/offline/replay.py) does what the bridge does at secure mode: the window is
flushed (docs/guarantees.md §3), so what is said after it is extracted without what came before, and what was
pending before it is extracted first. A pause drops messages but flushes nothing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pipeline.offline import corpus, replay
from pipeline.schemas import ExtractResult
from tests.pipeline import evalset
from tests.pipeline.evalset import ANA, TOM

ENDS = {"ears off": "ears on", "secure mode": "secure mode off", "pause": "resume"}


def _conversation(command: str) -> corpus.Conversation:
    said = [
        (ANA, "we keep the bakery order at forty loaves a day for now", False),
        (TOM, "agreed, and I will tell the supplier on Friday", False),
        (TOM, f"@jeeves {command}", True),
        (ANA, "salary bands for the new hires are in the sheet", False),
        (ANA, f"@jeeves {ENDS[command]}", True),
        (TOM, "one more thing: the delivery van goes to the garage on Monday", False),
    ]
    return corpus.from_dict(
        evalset.small_conversation(
            "secure-flush", said, channel="00000000-0000-4000-8000-0000000000c2", ts="2026-06-0{k}T09:00:00Z"
        )
    )


def _runs(monkeypatch, conv: corpus.Conversation) -> tuple[list[list[str]], list[tuple[list[str], list[str]]]]:
    """What Tier 1 saw before each message, and each extraction's window and pending ids."""
    seen: list[list[str]] = []
    bursts: list[tuple[list[str], list[str]]] = []

    def classify(text, ctx, author_id, mentions, window, ts, engine=None):
        seen.append([m.id for m in window])
        return SimpleNamespace(categories=["routine"], is_high_signal=False)

    def extract(window, ctx, pending, engine=None):
        bursts.append(([m.id for m in window], sorted(pending)))
        return ExtractResult()

    monkeypatch.setattr(replay, "classify", classify)
    monkeypatch.setattr(replay, "extract", extract)
    replay.run(conv, engine=None)  # type: ignore[arg-type]
    return seen, bursts


@pytest.mark.parametrize("command", ["ears off", "secure mode"])
def test_secure_mode_flushes_the_window_after_extracting_what_was_pending(monkeypatch, command):
    conv = _conversation(command)
    assert conv.secured == {"m3"} and conv.dropped == {"m4"}
    seen, bursts = _runs(monkeypatch, conv)
    assert bursts == [(["m1", "m2"], ["m1", "m2"]), (["m6"], ["m6"])]
    assert seen == [[], ["m1"], []]  # Tier 1 reads the message after secure mode with nothing before it


def test_a_pause_drops_its_stretch_and_keeps_the_window(monkeypatch):
    conv = _conversation("pause")
    assert conv.secured == set() and conv.dropped == {"m4"}
    seen, bursts = _runs(monkeypatch, conv)
    assert bursts == [(["m1", "m2", "m6"], ["m1", "m2", "m6"])]
    assert seen == [[], ["m1"], ["m1", "m2"]]


def test_a_burst_reads_the_next_heard_message_as_the_stack_does(monkeypatch):
    """Each extraction reads `LOOKAHEAD` heard messages past its last pending one (the stack's extraction reads
    them when they have arrived), skipping talk to Jeeves, and never past secure mode."""
    said = [
        (ANA, "the greenhouse sprinkler timer needs a new battery", False),
        (TOM, "I can pick one up at the hardware shop", False),
        (TOM, "@jeeves what did we say about the timer?", True),
        (ANA, "lovely, thanks Tom", False),
        (ANA, "also the compost bins are full again", False),
        (TOM, "@jeeves secure mode", True),
        (ANA, "door code for the shed is in the drawer", False),
    ]
    conv = corpus.from_dict(
        evalset.small_conversation(
            "lookahead", said, channel="00000000-0000-4000-8000-0000000000c3", ts="2026-06-0{k}T09:00:00Z"
        )
    )
    monkeypatch.setattr(replay, "BATCH", 2)
    monkeypatch.setattr(replay, "LOOKAHEAD", 1)
    _, bursts = _runs(monkeypatch, conv)
    assert bursts == [
        (["m1", "m2", "m4"], ["m1", "m2"]),  # the reply after the burst, not the question to Jeeves
        (["m1", "m2", "m4", "m5"], ["m4", "m5"]),  # nothing past secure mode
    ]
