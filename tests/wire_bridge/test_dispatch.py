"""The command table (wire_bridge/dispatch.py): one handler per command kind the grammar produces, each taking
the documented `Request`; and the commands that write (done ACT-n, supersede), worded by the bridge.

The table tests are pure (no database, no Redis): they look at the grammar and the handlers' signatures only.
"""

from __future__ import annotations

import inspect
import typing
from collections import Counter

import pytest

from knowledge.models import Action, Decision
from tests.retrieval import factory as f
from wire_bridge import dispatch
from wire_bridge.commands import Command, Kind, parse
from wire_bridge.outbound import Reply

# One body per line of the command table of docs/wire-protocols.md §6, as people type them.
SAID = [
    "pause",
    "step out",
    "resume",
    "come back",
    "unpause",
    "secure mode",
    "secure mode on",
    "ears off",
    "secure mode off",
    "ears on",
    "status",
    "catch me up",
    "what did I miss?",
    "context: the mobile releases",
    "context type: project",
    "context tags: ios, android",
    "context stakeholders: Alice and Bob",
    "context related: #mobile-qa",
    "decisions",
    "actions",
    "actions mine",
    "my actions please",
    "my week",
    "my digest",
    "digest on",
    "digest off",
    "done ACT-4",
    "mark done act-0004",
    "supersede DEC-2 with DEC-3",
    "supersede dec-2 by dec-3",
    "dismiss",
    "help",
    "",
    "👍",
    "what did we decide about the retry budget?",
]


def _grammar_kinds() -> set[Kind]:
    return {parse(body).kind for body in SAID}


def test_the_grammar_produces_every_kind_and_nothing_else():
    assert _grammar_kinds() == set(Kind)


def test_every_kind_the_grammar_produces_has_exactly_one_entry_in_the_table():
    entries = Counter(route.kind for route in dispatch.ROUTES)
    assert {kind: entries[kind] for kind in _grammar_kinds()} == dict.fromkeys(_grammar_kinds(), 1)
    assert set(entries) <= set(Kind), "an entry for a kind the grammar never produces"
    assert dispatch.HANDLERS == {route.kind: route.handler for route in dispatch.ROUTES}


@pytest.mark.parametrize("route", dispatch.ROUTES, ids=lambda route: route.kind.value)
def test_every_handler_takes_the_documented_request_and_returns_a_reply(route):
    handler = route.handler
    assert callable(handler)
    request = dispatch.Request(
        channel_id="c@wire.example",
        user_id="u@wire.example",
        wire_msg_id="m1",
        command=Command(route.kind),
        mentioned=("v@wire.example",),
        outcome="paused",
    )
    inspect.signature(handler).bind(request)  # raises TypeError when the handler wants other arguments
    hints = typing.get_type_hints(handler)
    assert hints.pop("return") is Reply
    assert list(hints.values()) == [dispatch.Request]


# --------------------------------------------------------------------------- the commands that write


@pytest.fixture
def records():
    return f.release_channel()


@pytest.mark.django_db
def test_done_sets_status_and_completed_at(records):
    c = records
    fid = c["a1"].friendly_id
    reply = dispatch.done_text(c["ch"].channel_id, c["alice"], fid.lower())
    action = Action.objects.get(pk=c["a1"].pk)
    assert action.status == "done" and action.completed_at is not None
    assert reply == f"Very good. I have marked {fid} as done: Submit 4.12 to the App Store"
    assert dispatch.done_text(c["other"].channel_id, c["alice"], fid) == (
        f"I'm afraid I have no record of {fid} in this channel."
    )
    assert dispatch.done_text(c["ch"].channel_id, c["alice"], "DEC-0001") == (
        "I'm afraid I did not recognise that action number. It should look like ACT-0003."
    )


@pytest.mark.django_db
def test_done_through_the_table(records):
    c = records
    number = int(c["a1"].friendly_id.split("-")[1])
    command = parse(f"done ACT-{number}")
    reply = dispatch.dispatch(dispatch.Request(c["ch"].channel_id, c["bob"], "m1", command))
    assert reply == Reply(f"Very good. I have marked {c['a1'].friendly_id} as done: Submit 4.12 to the App Store")
    assert Action.objects.get(pk=c["a1"].pk).status == "done"


@pytest.mark.django_db
def test_supersede_sets_status_superseded_by_and_valid_until(records):
    c = records
    old, new = c["d1"], c["d2"]
    reply = dispatch.supersede_text(c["ch"].channel_id, c["bob"], old.friendly_id, new.friendly_id)
    old = Decision.objects.get(pk=old.pk)
    assert old.status == "superseded" and old.superseded_by_id == new.id and old.valid_until == new.decided_at
    assert old.reviewed_by == c["bob"]
    assert reply == (
        f"Very good. {old.friendly_id} is now recorded as superseded by {new.friendly_id}; its history is kept."
    )
    assert dispatch.supersede_text(c["other"].channel_id, c["bob"], old.friendly_id, new.friendly_id) == (
        f"I'm afraid I have no record of both {old.friendly_id} and {new.friendly_id} in this channel."
    )
    assert dispatch.supersede_text(c["ch"].channel_id, c["bob"], new.friendly_id, new.friendly_id) == (
        "I'm afraid I cannot do that: a decision cannot supersede itself."
    )
    assert dispatch.supersede_text(c["ch"].channel_id, c["bob"], "ACT-0001", new.friendly_id) == (
        "I'm afraid I did not recognise those decision numbers. They should look like DEC-0002."
    )
