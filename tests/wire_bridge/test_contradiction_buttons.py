"""Contradiction prompts end to end through both Wire fakes: a raising pass (frozen clock) → the respond worker
posts one composite (sidecar) or poll (Roman) per held pair → each button clicked → confirmed, answered, and the
pair closed for good (supersede / keep both / dismiss), never raised again."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta

import pytest
import time_machine
from django.utils import timezone

from knowledge import contradictions
from knowledge.models import ChannelConfig, ConflictStatus, Decision, DecisionConflict
from knowledge.sources import source_ref
from pipeline import contradictions as duty
from tests.fakes.wire import qid, sidecar_app_added
from tests.wire_bridge.conftest import APP_ID
from tests.wire_bridge.test_e2e import bridge, fakes, respond_worker  # noqa: F401 - fixtures
from wire_bridge import replies

pytestmark = pytest.mark.django_db(transaction=True)

CHOICES = ("supersede", "keep", "dismiss")


@pytest.fixture
def now() -> datetime:
    """The instant the clock is frozen at: the real present, since the workers and the broker's task expiry
    run on real time (a prompt published at a frozen past instant would be expired on arrival)."""
    return timezone.now().replace(microsecond=0)


def _held_pairs(channel_id: str, now: datetime) -> list[DecisionConflict]:
    """Three held pairs (DEC-0001/2, DEC-0003/4, DEC-0005/6), decided two hours before `now`."""
    at = now - timedelta(hours=2)
    ch = ChannelConfig.objects.get(channel_id=channel_id)
    pairs = []
    for n in (1, 2, 3):
        older, newer = (
            Decision.objects.create(
                channel=ch,
                organisation_id=ch.organisation_id,
                friendly_id=f"DEC-{k:04d}",
                summary=text,
                decided_at=at + timedelta(minutes=k),
                source_ref=source_ref([(f"m{k}", at)]),
                source_key=f"k{k}",
            )
            for k, text in (
                (2 * n - 1, f"The print run for leaflet {n} is 500 copies."),
                (2 * n, f"The print run for leaflet {n} is 800 copies."),
            )
        )
        verdict = contradictions.Verdict("contradicts", "The print runs differ.", 0.8)
        pairs.append(contradictions.record_verdict(older, newer, verdict, cosine=0.95, judge_model="local"))
    return pairs


def _raise(at: datetime) -> int:
    with time_machine.travel(at, tick=False):
        return duty.raise_due()


def _closed(pairs: list[DecisionConflict]) -> list[str]:
    return [DecisionConflict.objects.get(pk=p.pk).status for p in pairs]


def test_each_button_through_the_sidecar(bridge, fakes, respond_worker, now):  # noqa: F811
    url, _ = bridge
    sidecar, _ = fakes
    conv, alice = f"{uuid.uuid4()}@wire.example", f"{uuid.uuid4()}@wire.example"
    members = [{"userId": alice, "role": "ADMIN", "name": "Alice", "handle": "alice"}, {"userId": APP_ID}]
    assert sidecar.emit(url, sidecar_app_added(conv, members, name="print", tz="UTC")).status_code == 200
    pairs = _held_pairs(conv, now)
    start = len(sidecar.messages)

    assert _raise(now - timedelta(minutes=89)) == 0  # the hold: each newer decision is under 30 minutes old
    assert _raise(now) == 3
    prompts = sidecar.wait_for_messages(start + 3)[start:]

    by_pair = {tuple(b["id"] for b in p["buttons"])[0].rsplit(":", 1)[0]: p for p in prompts}
    first = by_pair["contradiction:DEC-0001:DEC-0002"]
    assert first["type"] == "composite" and first["conversationId"] == qid(conv)
    older, newer = (duty.on_date(d.decided_at, "UTC", now) for d in (pairs[0].older, pairs[0].newer))
    assert first["text"] == (
        f"One notes that DEC-0002, settled on {newer} (The print run for leaflet 1 is 800 copies), appears to differ "
        f"from the decision of {older} (DEC-0001: The print run for leaflet 1 is 500 copies). The print runs differ. "
        "Shall I record DEC-0001 as superseded by DEC-0002, or are both to stand?"
    )
    assert [(b["id"], b["text"]) for b in first["buttons"]] == [
        ("contradiction:DEC-0001:DEC-0002:supersede", "Supersede DEC-0001"),
        ("contradiction:DEC-0001:DEC-0002:keep", "Keep both"),
        ("contradiction:DEC-0001:DEC-0002:dismiss", "Dismiss"),
    ]

    answers = []
    for n, choice in enumerate(CHOICES, start=1):
        prompt = by_pair[f"contradiction:DEC-{2 * n - 1:04d}:DEC-{2 * n:04d}"]
        event = {
            "eventId": str(uuid.uuid4()),
            "type": "button_clicked",
            "conversationId": qid(conv),
            "sender": qid(alice),
            "messageId": f"click-{n}",
            "referencedMessageId": prompt["_messageId"],
            "buttonId": prompt["buttons"][n - 1]["id"],
        }
        assert sidecar.emit(url, event).json() == {"status": "button"}
        confirmation, reply = sidecar.wait_for_messages(start + 3 + 2 * n)[-2:]
        assert confirmation["type"] == "button_confirmation"
        assert confirmation["referencedMessageId"] == prompt["_messageId"]
        answers.append(reply["text"])

    assert answers == [
        "Very good. DEC-0001 is now recorded as superseded by DEC-0002; its history is kept.",
        replies.CONTRADICTION_KEPT,
        replies.DISMISSED,
    ]
    assert _closed(pairs) == [ConflictStatus.SUPERSEDED, ConflictStatus.KEPT, ConflictStatus.DISMISSED]
    older = Decision.objects.get(channel_id=conv, friendly_id="DEC-0001")
    assert (older.status, older.superseded_by.friendly_id, older.reviewed_by) == ("superseded", "DEC-0002", alice)
    assert Decision.objects.get(channel_id=conv, friendly_id="DEC-0003").status == "active"
    assert _raise(now + timedelta(seconds=1)) == 0
    assert sidecar.errors == []


def test_each_button_through_roman_poll_positions(bridge, fakes, respond_worker, now):  # noqa: F811
    url, _ = bridge
    _, roman = fakes
    conv, alice = str(uuid.uuid4()), str(uuid.uuid4())
    channel_id = f"{conv}@wire.example"
    bot = roman.add_bot(url, conv, [alice])
    pairs = _held_pairs(channel_id, now)
    start = len(roman.messages)

    assert _raise(now) == 3
    polls = [body for _, body in roman.wait_for_messages(start + 3)[start:]]

    by_pair = {re.search(r"Shall I record (DEC-\d{4})", p["text"]["data"]).group(1): p for p in polls}
    for older, poll in by_pair.items():
        assert poll["type"] == "poll" and poll["poll"]["buttons"] == [f"Supersede {older}", "Keep both", "Dismiss"]
    answers = []
    for n, _choice in enumerate(CHOICES, start=1):
        poll = by_pair[f"DEC-{2 * n - 1:04d}"]
        assert roman.emit(url, roman.poll_action(bot, alice, poll["poll"]["id"], n - 1)).json() == {"status": "button"}
        confirmation, reply = [body for _, body in roman.wait_for_messages(start + 3 + 2 * n)[-2:]]
        assert confirmation["poll"] == {
            "id": poll["poll"]["id"],
            "type": "confirmation",
            "offset": n - 1,
            "userId": alice,
        }
        answers.append(reply["text"]["data"])

    assert answers == [
        "Very good. DEC-0001 is now recorded as superseded by DEC-0002; its history is kept.",
        replies.CONTRADICTION_KEPT,
        replies.DISMISSED,
    ]
    assert _closed(pairs) == [ConflictStatus.SUPERSEDED, ConflictStatus.KEPT, ConflictStatus.DISMISSED]
    assert _raise(now + timedelta(seconds=1)) == 0
    assert roman.errors == []
