"""knowledge/records.py on real Postgres: friendly ids, idempotent writes, restatements, continued actions;
knowledge/embeddings.py: one vector per record."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection

from knowledge import embeddings, records, sources, verbatim
from knowledge.models import Action, Decision, Embedding
from tests.knowledge.conftest import MESSAGE, T0


def _decision(channel, key="dec:a:0", ids=("m010",), summary="The team chose queue retries with backoff."):
    return records.record_decision(
        channel,
        records.DecisionDraft(
            summary=summary, rationale=None, decided_by=["u1@wire.example"], decided_at=T0, confidence=0.9
        ),
        source=sources.source_ref([(i, T0) for i in ids]),
        sources_text=[MESSAGE],
        key=key,
    )


def test_a_decision_is_written_once_per_key(channel):
    first = _decision(channel)
    again = _decision(channel)
    assert first.created and not again.created
    assert Decision.objects.get().friendly_id == "DEC-0001"


def test_a_verbatim_decision_is_refused(channel):
    with pytest.raises(verbatim.VerbatimText):
        _decision(channel, summary=MESSAGE)
    assert not Decision.objects.exists()


def test_the_model_saying_restates_extends_the_source_ref(channel):
    _decision(channel)
    out = records.record_decision(
        channel,
        records.DecisionDraft(
            summary="Queue retries confirmed.",
            rationale=None,
            decided_by=["u2@wire.example"],
            decided_at=T0,
            confidence=0.8,
        ),
        source=sources.source_ref([("m030", T0)]),
        sources_text=[],
        key="dec:b:0",
        restates="DEC-0001",
    )
    assert not out.created
    row = Decision.objects.get()
    assert row.source_ref["wire_msg_ids"] == ["m010", "m030"] and row.decided_by == [
        "u1@wire.example",
        "u2@wire.example",
    ]


def test_a_continuation_extends_the_decision_it_joins_and_never_makes_one(channel):
    _decision(channel)
    continued = records.continue_decision(
        channel, source=sources.source_ref([("m010", T0), ("m012", T0)]), continues_ids=["m010"]
    )
    assert continued is not None and Decision.objects.get().source_ref["wire_msg_ids"] == ["m010", "m012"]
    orphan = records.continue_decision(
        channel, source=sources.source_ref([("m020", T0), ("m021", T0)]), continues_ids=["m020"]
    )
    assert orphan is None and Decision.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_friendly_ids_are_unique_under_concurrency():
    def take(_):
        try:
            return records.next_friendly_id("c-conc@wire.example", "ACT")
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        ids = list(pool.map(take, range(40)))
    assert sorted(ids) == [f"ACT-{n:04d}" for n in range(1, 41)]


def _toms(description: str, status: str) -> records.ActionDraft:
    return records.ActionDraft(
        description=description,
        owner_id="u1@wire.example",
        owner_name="Tom",
        deadline=None,
        status=status,
        confidence=0.8,
    )


def test_an_action_continued_by_a_completion_message_is_updated_not_duplicated(channel):
    first = records.record_action(
        channel,
        _toms("Tom raises the alert threshold.", "open"),
        source=sources.source_ref([("m018", T0)]),
        sources_text=[],
        key="act:a:0",
    )
    assert first.record.staleness_at is not None  # created + JEEVES_STALENESS_DAYS
    done = records.record_action(
        channel,
        _toms("Tom raised the alert threshold.", "done"),
        source=sources.source_ref([("m018", T0), ("m027", T0)]),
        sources_text=[],
        key="act:b:0",
        continues_ids=["m018"],
    )
    assert not done.created
    action = Action.objects.get()
    assert action.status == "done" and action.source_ref["wire_msg_ids"] == ["m018", "m027"]


def test_a_completion_is_dated_by_the_message_that_reports_it(channel):
    # A backlog replayed (or a worker that was busy) must not date last month's "done" today.
    reported = T0 + timedelta(days=2, hours=3)
    records.record_action(
        channel, _toms("Tom archives the old dashboards.", "open"),
        source=sources.source_ref([("m101", T0)]), sources_text=[], key="act:c:0",
    )  # fmt: skip
    records.record_action(
        channel, _toms("Tom archived the old dashboards.", "done"),
        source=sources.source_ref([("m101", T0), ("m109", reported)]), sources_text=[], key="act:d:0",
        continues_ids=["m101"],
    )  # fmt: skip
    born_done = records.record_action(
        channel, _toms("Tom renewed the domain.", "done"),
        source=sources.source_ref([("m120", T0), ("m121", reported)]), sources_text=[], key="act:e:0",
    )  # fmt: skip
    assert Action.objects.get(source_key="act:c:0").completed_at == reported
    assert born_done.record.completed_at == reported


def test_embeddings_are_idempotent_per_record(channel, settings):
    d = _decision(channel).record
    vector = [0.1] * settings.JEEVES.embed_dims
    kwargs = dict(channel_id=channel.channel_id, organisation_id="wire.example", author_id=None, created_at=T0)
    assert embeddings.record_embedding("decision", d.pk, vector, **kwargs)
    assert not embeddings.record_embedding("decision", d.pk, vector, **kwargs)
    assert Embedding.objects.count() == 1
