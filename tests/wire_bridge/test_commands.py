"""The command grammar: addressing Jeeves, the commands of docs/wire-protocols.md §6, UTF-16 offsets."""

from __future__ import annotations

import pytest

from wire_bridge.commands import Kind, addressed_body, blank_mentions, parse, split_list, utf16_to_index
from wire_bridge.events import Mention, QualifiedId

BOT = "b0t@wire.example"


def body(text: str, mentions: tuple[Mention, ...] = ()) -> str | None:
    return addressed_body(text, mentions, BOT, "jeeves")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("@jeeves pause", Kind.PAUSE),
        ("@Jeeves step out.", Kind.PAUSE),
        ("@jeeves resume", Kind.RESUME),
        ("@jeeves come back please", Kind.RESUME),
        ("@jeeves unpause", Kind.RESUME),
        ("salary talk next. @jeeves secure mode", Kind.SECURE),
        ("@jeeves ears off", Kind.SECURE),
        ("@jeeves secure mode off", Kind.SECURE_OFF),
        ("@JEEVES Ears on!", Kind.SECURE_OFF),
        ("jeeves, status?", Kind.STATUS),
        ("home from the conference! @jeeves catch me up 🧳", Kind.CATCH_UP),
        ("@jeeves what did I miss?", Kind.CATCH_UP),
        ("@jeeves decisions", Kind.DECISIONS),
        ("@jeeves actions", Kind.ACTIONS),
        ("@jeeves actions mine", Kind.ACTIONS_MINE),
        ("@jeeves dismiss", Kind.DISMISS),
        ("@jeeves help", Kind.HELP),
        ("@jeeves", Kind.EMPTY),
        ("@jeeves what did we settle on for the snapshot schedule?", Kind.QUESTION),
        ("@jeeves pause the rollout, or not?", Kind.QUESTION),
    ],
)
def test_the_documented_commands(text, expected):
    assert parse(body(text)).kind == expected


def test_context_commands_keep_their_argument():
    assert parse("context: billing platform — invoicing").argument == "billing platform — invoicing"
    for sub, kind in [
        ("type", Kind.CONTEXT_TYPE),
        ("tags", Kind.CONTEXT_TAGS),
        ("stakeholders", Kind.CONTEXT_STAKEHOLDERS),
        ("related", Kind.CONTEXT_RELATED),
    ]:
        command = parse(f"Context {sub}: a, b")
        assert (command.kind, command.argument) == (kind, "a, b")
    assert split_list("#ops #billing, retries and dunning") == ["ops", "billing", "retries", "dunning"]


def test_friendly_ids_are_normalised():
    assert parse("done ACT-12").ids == ("ACT-0012",)
    assert parse("supersede dec-3 with DEC-0007").ids == ("DEC-0003", "DEC-0007")


def test_not_addressed():
    assert body("let's ship it on friday") is None
    assert body("mail ops@jeeves.example about it") is None
    assert body("the jeeves project slipped") is None


def test_a_mention_of_the_bot_id_addresses_jeeves_whatever_its_label():
    text = "🚀 @Butler pause"
    mention = Mention(QualifiedId("b0t", "wire.example"), offset=3, length=7)  # UTF-16: the emoji is 2 units
    assert body(text, (mention,)) == "pause"
    other = Mention(QualifiedId("someone", "wire.example"), offset=3, length=7)
    assert body(text, (other,)) is None


def test_utf16_offsets_and_blanking():
    text = "👍 @Ann and @jeeves"
    assert utf16_to_index(text, 3) == 2
    ann = Mention(QualifiedId("ann", "d"), offset=3, length=4)
    bot = Mention(QualifiedId("b0t", "wire.example"), offset=13, length=7)
    assert blank_mentions(text, (ann, bot), BOT) == "👍      and @jeeves"
