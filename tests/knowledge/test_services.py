"""knowledge/services.py on real Postgres: guard, friendly ids, idempotent writes, dedup."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
from django.db import connection

from knowledge import services, verbatim
from knowledge.models import Action, ChannelConfig, Decision, Embedding, Entity, EntityRelationship, PipelineCounter

T0 = datetime(2026, 3, 2, 9, 20, tzinfo=UTC)
MESSAGE = "right then, we settle on nightly snapshots kept for thirty days in cold storage from April"


@pytest.fixture
def channel(db):
    return ChannelConfig.objects.create(channel_id="c1@wire.example", organisation_id="wire.example")


def _decision(channel, key="dec:a:0", ids=("m010",), summary="The team chose queue retries with backoff."):
    return services.record_decision(
        channel,
        summary=summary,
        rationale=None,
        decided_by=["u1@wire.example"],
        decided_at=T0,
        confidence=0.9,
        source=services.source_ref([(i, T0) for i in ids]),
        sources_text=[MESSAGE],
        key=key,
    )


def test_guard_refuses_a_ten_word_run_and_allows_nine():
    nine = "we settle on nightly snapshots kept for thirty days"
    assert services.guard_text(f"Alice said {nine}", [MESSAGE])
    with pytest.raises(services.VerbatimText):
        services.guard_text(f"Alice said {nine} in", [MESSAGE])


# Tricky texts for the one verbatim rule (knowledge/verbatim.py): (stored text, source, longest shared run).
_SOURCE = "We'll ship the café's new crème brûlée menu to all twelve sites on Monday"
_TRICKY = [
    # curly apostrophes are straight ones, case is folded: 12 words shared
    ("we\u2019ll SHIP the caf\u00e9\u2019s new cr\u00e8me br\u00fbl\u00e9e menu to all twelve sites", _SOURCE, 12),
    ("We'll ship the café's new crème brûlée menu to", _SOURCE, 9),  # nine words: allowed
    ("WE'LL, ship; the café's... new crème-brûlée menu! to all twelve", _SOURCE, 11),  # punctuation is no word
    ("We'll ship the cafe's new creme brulee menu to all twelve sites", _SOURCE, 5),  # accents are kept
    # Greek: casefold makes the final sigma a sigma, so ΣΊΣΥΦΟΣ and σίσυφος are one word
    ("ΣΊΣΥΦΟΣ a b c d e f g h", "σίσυφος a b c d e f g h i", 9),
    ("σίσυφος a b c d e f g h i", "ΣΊΣΥΦΟΣ a b c d e f g h", 9),
    ("σίσυφος a b c d e f g h i", "ΣΊΣΥΦΟΣ a b c d e f g h i", 10),
    ("Straße 1 2 3 4 5 6 7 8 9", "STRASSE 1 2 3 4 5 6 7 8 9", 10),  # casefold: ß is ss
    ("a_b c d e f g h i j k", "a b c d e f g h i j k", 11),  # the underscore splits words
    ("1,000 users 2.5 GB on 3 nodes by 4 pm today", "1 000 users 2 5 GB on 3 nodes by 4 pm today", 13),
    ("", _SOURCE, 0),
]


@pytest.mark.parametrize(("text", "source", "run"), _TRICKY)
def test_guard_text_and_verbatim_is_safe_agree(text, source, run):
    assert verbatim.longest_common_run(text, [source]) == run
    assert verbatim.is_safe(text, [source]) == (run <= verbatim.MAX_RUN)
    if run <= verbatim.MAX_RUN:
        assert services.guard_text(text, [source]) == text
    else:
        with pytest.raises(services.VerbatimText):
            services.guard_text(text, [source])


def test_a_decision_is_written_once_per_key(channel):
    first = _decision(channel)
    again = _decision(channel)
    assert first.created and not again.created
    assert Decision.objects.get().friendly_id == "DEC-0001"


def test_a_verbatim_decision_is_refused(channel):
    with pytest.raises(services.VerbatimText):
        _decision(channel, summary=MESSAGE)
    assert not Decision.objects.exists()


def test_the_model_saying_restates_extends_the_source_ref(channel):
    _decision(channel)
    out = services.record_decision(
        channel,
        summary="Queue retries confirmed.",
        rationale=None,
        decided_by=["u2@wire.example"],
        decided_at=T0,
        confidence=0.8,
        source=services.source_ref([("m030", T0)]),
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


@pytest.mark.django_db(transaction=True)
def test_friendly_ids_are_unique_under_concurrency():
    def take(_):
        try:
            return services.next_friendly_id("c-conc@wire.example", "ACT")
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        ids = list(pool.map(take, range(40)))
    assert sorted(ids) == [f"ACT-{n:04d}" for n in range(1, 41)]


def test_an_action_continued_by_a_completion_message_is_updated_not_duplicated(channel):
    common = dict(owner_id="u1@wire.example", owner_name="Tom", deadline=None, confidence=0.8, sources_text=[])
    first = services.record_action(
        channel,
        description="Tom raises the alert threshold.",
        status="open",
        source=services.source_ref([("m018", T0)]),
        key="act:a:0",
        **common,
    )
    assert first.record.staleness_at is not None  # created + JEEVES_STALENESS_DAYS
    done = services.record_action(
        channel,
        description="Tom raised the alert threshold.",
        status="done",
        source=services.source_ref([("m018", T0), ("m027", T0)]),
        key="act:b:0",
        continues_ids=["m018"],
        **common,
    )
    assert not done.created
    action = Action.objects.get()
    assert action.status == "done" and action.source_ref["wire_msg_ids"] == ["m018", "m027"]


def test_entities_dedup_on_alias_and_count_a_run_once(channel):
    a = services.upsert_entity(
        channel, name="billing-worker", entity_type="service", aliases=["billing worker"], seen_at=T0, run_key="r1"
    )
    b = services.upsert_entity(channel, name="Billing Worker", entity_type="service", seen_at=T0, run_key="r2")
    c = services.upsert_entity(channel, name="billing worker", entity_type="service", seen_at=T0, run_key="r2")
    assert a.created and not b.created and not c.created
    assert Entity.objects.get().mention_count == 2


def test_relationships_strengthen_with_new_observations_only(channel):
    src = services.upsert_entity(channel, name="Priya", entity_type="person", seen_at=T0).record
    dst = services.upsert_entity(channel, name="retry migration", entity_type="project", seen_at=T0).record
    for ids in (["m013"], ["m013"], ["m035"]):
        rel = services.upsert_relationship(
            channel,
            source=src,
            target=dst,
            relationship="works_on",
            observed_at=T0,
            ref=services.source_ref([(i, T0) for i in ids]),
        ).record
    rel.refresh_from_db()
    assert rel.observation_count == 2 and rel.channel_ids == ["c1@wire.example"]


def test_embeddings_are_idempotent_per_record(channel, settings):
    d = _decision(channel).record
    vector = [0.1] * settings.JEEVES.embed_dims
    kwargs = dict(channel_id=channel.channel_id, organisation_id="wire.example", author_id=None, created_at=T0)
    assert services.record_embedding("decision", d.pk, vector, **kwargs)
    assert not services.record_embedding("decision", d.pk, vector, **kwargs)
    assert Embedding.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_counters_are_exact_when_bumped_concurrently():
    # Threads, each on its own connection, bump one counter (from nothing: the first bumps race to insert it).
    channel_id = "c-count@wire.example"

    def bump(n):
        try:
            services.bump_counter(channel_id, "expired", 1 + n % 3)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(bump, range(60)))
    counter = PipelineCounter.objects.get(channel_id=channel_id, name="expired")
    assert counter.value == sum(1 + n % 3 for n in range(60))
    assert counter.updated_at is not None


@pytest.mark.django_db(transaction=True)
def test_mentions_and_observations_are_exact_when_counted_concurrently():
    """Different runs naming the same entity and relationship at once: each run counts (the counters are added
    in the UPDATE, not read, incremented and written back)."""
    channel = ChannelConfig.objects.create(channel_id="c-mentions@wire.example", organisation_id="wire.example")
    src = services.upsert_entity(channel, name="Priya", entity_type="person", seen_at=T0).record
    dst = services.upsert_entity(channel, name="retry migration", entity_type="project", seen_at=T0).record
    runs = 24

    def run(n):
        try:
            services.upsert_entity(channel, name="Retry Migration", entity_type="project", seen_at=T0, run_key=f"r{n}")
            services.upsert_relationship(
                channel,
                source=src,
                target=dst,
                relationship="works_on",
                observed_at=T0,
                ref=services.source_ref([(f"m{n}", T0)]),
            )
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(run, range(runs)))
    assert Entity.objects.get(pk=dst.pk).mention_count == 1 + runs
    assert EntityRelationship.objects.get(source=src, target=dst).observation_count == runs
