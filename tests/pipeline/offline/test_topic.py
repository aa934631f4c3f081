"""The thread topic of an extracted record: what it is about, never who said it or a copied run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pipeline.context import ChannelContext
from pipeline.members import Member
from pipeline.offline import topic
from pipeline.window import WindowMessage

ALICE, PRIYA = "a1@wire.example", "p1@wire.example"
CTX = ChannelContext(
    channel_id="c@wire.example",
    organisation_id="wire.example",
    name="billing",
    purpose=None,
    context_type=None,
    tags=(),
    timezone="UTC",
    members=(Member(ALICE, name="Alice Martin", handle="alice"), Member(PRIYA, name="Priya Raman", handle="priya")),
    bot_ids=(),
    known_entities=(),
)
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _m(i: int, author: str, text: str) -> WindowMessage:
    return WindowMessage(id=f"m{i}", author_id=author, ts=T0 + timedelta(minutes=i), text=text)


WINDOW = [
    _m(1, ALICE, "morning all"),
    _m(2, PRIYA, "what if we moved card payment retries onto the billing-worker queue with exponential backoff?"),
    _m(3, ALICE, "priya, yes, do it: retries on the queue, backoff too, token a9f3k2z8q1"),
]


def test_the_lead_in_proposal_gives_the_topic_of_a_terse_agreement():
    thread = topic.context_messages(WINDOW, ["m3"])
    assert {"m2", "m3"} <= {m.id for m in thread}
    terms = topic.terms(thread, CTX, ["m3"])
    assert "billing-worker" in terms
    assert "retries" in terms or "retry" in terms
    # Who spoke and opaque tokens are not topics.
    assert not {"priya", "alice", "a9f3k2z8q1"} & set(terms)
    assert all(t == t.lower() for t in terms)


def test_a_terse_agreement_takes_its_topic_from_the_message_it_agrees_to() -> None:
    msgs = [
        _m(1, PRIYA, "I'd suggest we invite twelve candidates to the assessment day"),
        _m(2, ALICE, "sounds right. let's do it"),
    ]
    thread = topic.context_messages(msgs, ["m2"])
    terms = topic.terms(thread, CTX, ["m2"])
    assert {"candidates", "assessment"} <= set(terms)


def test_a_record_with_its_own_content_keeps_single_lead_in_words_out() -> None:
    msgs = [
        _m(1, PRIYA, "unrelated, the coffee machine is broken again"),
        _m(2, ALICE, "agreed: the nightly export moves to the batch-worker queue from Monday"),
    ]
    terms = topic.terms(topic.context_messages(msgs, ["m2"]), CTX, ["m2"])
    assert "coffee" not in terms and "batch-worker" in terms
