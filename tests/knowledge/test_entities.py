"""knowledge/entities.py on real Postgres: dedup on names and aliases; mentions and observations counted once
per run, and exactly under concurrent runs."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, transaction

from knowledge import entities, sources
from knowledge.models import ChannelConfig, Entity, EntityRelationship
from tests.knowledge.conftest import T0


def test_entities_dedup_on_alias_and_count_a_run_once(channel):
    a = entities.upsert_entity(
        channel, name="billing-worker", entity_type="service", aliases=["billing worker"], seen_at=T0, run_key="r1"
    )
    b = entities.upsert_entity(channel, name="Billing Worker", entity_type="service", seen_at=T0, run_key="r2")
    c = entities.upsert_entity(channel, name="billing worker", entity_type="service", seen_at=T0, run_key="r2")
    assert a.created and not b.created and not c.created
    assert Entity.objects.get().mention_count == 2


def test_relationships_strengthen_with_new_observations_only(channel):
    src = entities.upsert_entity(channel, name="Priya", entity_type="person", seen_at=T0).record
    dst = entities.upsert_entity(channel, name="retry migration", entity_type="project", seen_at=T0).record
    for ids in (["m013"], ["m013"], ["m035"]):
        rel = entities.upsert_relationship(
            channel,
            source=src,
            target=dst,
            relationship="works_on",
            observed_at=T0,
            ref=sources.source_ref([(i, T0) for i in ids]),
        ).record
    rel.refresh_from_db()
    assert rel.observation_count == 2 and rel.channel_ids == ["c1@wire.example"]


@pytest.mark.django_db(transaction=True)
def test_mentions_and_observations_are_exact_when_counted_concurrently():
    """Different runs naming the same entity and relationship at once: each run counts (the counters are added
    in the UPDATE, not read, incremented and written back)."""
    channel = ChannelConfig.objects.create(channel_id="c-mentions@wire.example", organisation_id="wire.example")
    src = entities.upsert_entity(channel, name="Priya", entity_type="person", seen_at=T0).record
    dst = entities.upsert_entity(channel, name="retry migration", entity_type="project", seen_at=T0).record
    runs = 24

    def run(n):
        try:
            entities.upsert_entity(channel, name="Retry Migration", entity_type="project", seen_at=T0, run_key=f"r{n}")
            entities.upsert_relationship(
                channel,
                source=src,
                target=dst,
                relationship="works_on",
                observed_at=T0,
                ref=sources.source_ref([(f"m{n}", T0)]),
            )
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(run, range(runs)))
    assert Entity.objects.get(pk=dst.pk).mention_count == 1 + runs
    assert EntityRelationship.objects.get(source=src, target=dst).observation_count == runs


@pytest.mark.django_db(transaction=True)
def test_a_merge_waiting_on_another_keeps_both_aliases():
    """Two runs merge an alias into one entity at once. The first holds its transaction open; the second,
    on its own connection, must wait for it and merge into what it committed (row lock), not overwrite it
    with the aliases it read before."""
    channel = ChannelConfig.objects.create(channel_id="c-alias@wire.example", organisation_id="wire.example")
    entity = entities.upsert_entity(channel, name="Retry Migration", entity_type="project", seen_at=T0).record
    first_merged, second_started = threading.Event(), threading.Event()
    release = threading.Event()

    def first():
        try:
            with transaction.atomic():
                entities.upsert_entity(
                    channel, name="Retry Migration", aliases=["the retry work"], entity_type="project", seen_at=T0
                )
                first_merged.set()
                release.wait(10)
        finally:
            connection.close()

    def second():
        try:
            first_merged.wait(10)
            second_started.set()
            entities.upsert_entity(
                channel, name="Retry Migration", aliases=["payment retries"], entity_type="project", seen_at=T0
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    second_started.wait(10)
    time.sleep(0.5)  # the second run has read (or is waiting to read) the entity while the first is open
    release.set()
    for thread in threads:
        thread.join(20)
    assert set(Entity.objects.get(pk=entity.pk).aliases) == {"the retry work", "payment retries"}


@pytest.mark.django_db(transaction=True)
def test_concurrent_merges_into_one_entity_lose_no_alias():
    channel = ChannelConfig.objects.create(channel_id="c-aliases@wire.example", organisation_id="wire.example")
    entity = entities.upsert_entity(channel, name="Billing Worker", entity_type="component", seen_at=T0).record
    start = threading.Barrier(8)

    def merge(n):
        try:
            start.wait(10)
            entities.upsert_entity(
                channel, name="Billing Worker", aliases=[f"worker {n}"], entity_type="component", seen_at=T0
            )
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(merge, range(8)))
    assert set(Entity.objects.get(pk=entity.pk).aliases) == {f"worker {n}" for n in range(8)}
