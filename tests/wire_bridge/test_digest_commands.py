"""`my week` and `digest on` end to end: a 1:1 joined through the fake sidecar (Wire's ONE_TO_ONE type) → the
respond worker answers from the asker's records across their channels, and keeps the subscription; in a group
channel the digest stays the channel's own and `digest on` is declined."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from knowledge.models import Action, ChannelConfig, DigestSubscription
from knowledge.sources import source_ref
from tests.fakes.wire import mention_of, sidecar_app_added, sidecar_text
from tests.wire_bridge.conftest import APP_ID
from tests.wire_bridge.test_e2e import bridge, fakes, respond_worker  # noqa: F401 - fixtures
from wire_bridge import replies

pytestmark = pytest.mark.django_db(transaction=True)


def _action(channel_id: str, fid: str, text: str, owner: str, due_days: float) -> None:
    ch = ChannelConfig.objects.get(channel_id=channel_id)
    at = timezone.now()
    Action.objects.create(
        channel=ch, organisation_id=ch.organisation_id, friendly_id=fid, description=text, owner_id=owner,
        deadline=at + timedelta(days=due_days), source_ref=source_ref([(f"m-{fid}", at)]), source_key=fid,
    )  # fmt: skip


def test_my_week_and_digest_on_in_a_1to1_and_in_a_group(bridge, fakes, respond_worker):  # noqa: F811
    url, _ = bridge
    sidecar, _ = fakes
    alice, bob = f"{uuid.uuid4()}@wire.example", f"{uuid.uuid4()}@wire.example"
    group, personal = f"{uuid.uuid4()}@wire.example", f"{uuid.uuid4()}@wire.example"
    people = [{"userId": alice, "name": "Alice", "handle": "alice"}, {"userId": bob, "name": "Bob", "handle": "bob"}]
    sidecar.emit(url, sidecar_app_added(group, [*people, {"userId": APP_ID}], name="launch"))
    sidecar.emit(url, sidecar_app_added(personal, [people[0], {"userId": APP_ID}], name=None, kind="ONE_TO_ONE"))
    _action(group, "ACT-0001", "Alice to book the venue", alice, -1)
    _action(group, "ACT-0002", "Bob to print the badges", bob, 2)
    start = len(sidecar.messages)

    def ask(conv: str, msg: str, text: str) -> str:
        event = sidecar_text(conv, alice, msg, text, [mention_of(text, "@jeeves", APP_ID)])
        before = len(sidecar.messages)
        assert sidecar.emit(url, event).json() == {"status": "command"}
        return sidecar.wait_for_messages(before + 1)[before]["text"]

    week = ask(personal, "p1", "@jeeves my week")
    assert week.startswith("Your week, if I may")
    assert "Overdue:\n- ACT-0001 (launch, was due " in week and "ACT-0002" not in week
    assert ask(personal, "p2", "@jeeves digest on") == replies.DIGEST_ON
    subscription = DigestSubscription.objects.get(user_id=alice)
    assert subscription.channel_id == personal and subscription.enabled
    assert ask(group, "g1", "@jeeves digest on") == replies.DIGEST_PRIVATE_ONLY
    in_group = ask(group, "g2", "@jeeves my week")
    assert "- ACT-0001 (was due " in in_group and "ACT-0002" not in in_group
    assert DigestSubscription.objects.count() == 1 and len(sidecar.messages) == start + 4
    assert sidecar.errors == []
