"""The paths side by side (retrieval/parallel.py): outside a transaction they run on retrieval's own threads and
connections, and find exactly what they find one after another on the caller's connection; the records are
then hydrated once, inside the scope."""

from __future__ import annotations

import dataclasses

import pytest
from django.db import connection, transaction

from pipeline import embedder
from retrieval import parallel
from retrieval.ask import retrieve
from retrieval.config import RetrievalConfig
from retrieval.scope import RetrievalScope
from tests.retrieval import factory as f

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def channel_world():
    alice, bob = f.user(), f.user()
    ch, other = f.channel(name="release-train"), f.channel(name="elsewhere")
    release, vendor = f.entity(ch, "release-train"), f.entity(ch, "signing-vendor")
    f.relate(vendor, release, "blocks", [ch.channel_id])
    records = [
        f.decision(ch, "Release train moves to a fortnightly cadence from May", by=[alice], days_ago=3),
        f.decision(ch, "Signing vendor contract renewed for one more year", by=[bob], days_ago=9),
        f.action(ch, "Alice prepares the fortnightly release checklist", owner=alice, owner_name="Alice Bell"),
        f.signal(ch, "Bob reported a blocker: the signing vendor certificate expired", participants=[bob]),
        f.decision(other, "Release train in another channel stays weekly", by=[alice], days_ago=2),
    ]
    texts = [getattr(r, "summary", None) or r.description for r in records]
    for record, vector in zip(records, embedder.embed(texts), strict=True):
        f.embed(record, vector)
    f.summary(ch, "Release cadence and the signing vendor were discussed", start_days_ago=4, end_days_ago=3)
    return ch, other, alice


def _found(question: str, scope: RetrievalScope, cfg: RetrievalConfig):
    found = retrieve(question, scope, cfg)
    return [f.key for f in found.fused], {k: (r.text, r.similarity, r.coverage) for k, r in found.records.items()}


@pytest.mark.parametrize(
    "question",
    [
        "What did we decide about the release train cadence?",
        "What is blocking the release-train?",
        "What are Alice's open actions?",
        "What happened with the signing vendor in the last week?",
    ],
)
def test_side_by_side_finds_what_one_after_another_finds(channel_world, question):
    ch, other, alice = channel_world
    scope = RetrievalScope.for_asker(ch.channel_id, alice)
    cfg = RetrievalConfig.from_settings()
    side_by_side = _found(question, scope, cfg)
    with transaction.atomic():  # inside a transaction: the caller's connection, one path after another
        one_by_one = _found(question, scope, cfg)
    assert side_by_side == one_by_one
    assert side_by_side[0], "nothing found"
    # Hydrated inside the scope: nothing of the other channel.
    assert all(r.channel_id == ch.channel_id for r in retrieve(question, scope, cfg).records.values())


def test_paths_run_on_connections_of_their_own(channel_world):
    ch, _other, alice = channel_world
    scope = RetrievalScope.for_asker(ch.channel_id, alice)
    cfg = dataclasses.replace(RetrievalConfig.from_settings(), path_threads=3)
    parallel.close()  # a fresh pool of three threads
    retrieve("What is blocking the release-train?", scope, cfg)
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        mine = cur.fetchone()[0]
    threads = list(parallel._connections)
    assert 1 <= len(threads) <= 3
    assert all(w.connection is not None for w in threads)
    pids = set()
    for wrapper in threads:
        pids.add(wrapper.connection.info.backend_pid)
    assert mine not in pids
    parallel.close()
    assert parallel._connections == []


def test_the_offline_plans_accounting_row_is_written_beside_the_paths(channel_world):
    """The offline plan's llm_calls row is written with the paths' statements (in a group's pipeline, off the
    question's critical path), by the time the step returns, side by side and one after another alike."""
    from knowledge.models import LlmCall

    ch, _other, alice = channel_world
    scope = RetrievalScope.for_asker(ch.channel_id, alice)
    cfg = RetrievalConfig.from_settings()
    rows = LlmCall.objects.filter(slot="query_analyse", model="local", outcome="ok", channel_id=ch.channel_id)
    found = retrieve("What is blocking the release-train?", scope, cfg)
    assert rows.count() == 1
    assert not any(name.startswith("_") for name in found.path_ms)  # the row's job is not a path
    with transaction.atomic():
        retrieve("What is blocking the release-train?", scope, cfg)
    assert rows.count() == 2


def test_pool_connections_run_the_small_paths_with_generic_plans(channel_world):
    """On retrieval's own connections the structured, graph and summary paths and the hydration (entities
    included) and the full-text path are prepared statements run with their generic plan: planned once per
    connection, not per question. The semantic path is planned for its scope every time."""
    ch, _other, alice = channel_world
    scope = RetrievalScope.for_asker(ch.channel_id, alice)
    cfg = dataclasses.replace(RetrievalConfig.from_settings(), path_threads=1)
    parallel.close()  # one pool thread: every statement on the same connection
    question = "What is blocking the release-train in the last week?"
    first = retrieve(question, scope, cfg)
    again = retrieve(question, scope, cfg)
    assert [h.key for h in first.fused] == [h.key for h in again.fused]
    (wrapper,) = parallel._connections
    wrapper.inc_thread_sharing()
    try:
        with wrapper.cursor() as cur:
            cur.execute("SHOW plan_cache_mode")
            assert cur.fetchone()[0] == "force_generic_plan"
            cur.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
            prepared = cur.fetchall()
    finally:
        wrapper.dec_thread_sharing()
    assert prepared, "no prepared statement on the pool connection"
    assert all(custom == 0 and generic >= 1 for _sql, generic, custom in prepared)
    statements = " ".join(sql for sql, _g, _c in prepared)
    assert "entity_relationships" in statements  # the graph path
    assert any(sql.lstrip().startswith("WITH q AS MATERIALIZED") for sql, _g, _c in prepared)  # full text
    assert not any("embedding <=>" in sql and "scoped AS MATERIALIZED" in sql for sql, _g, _c in prepared)
    assert any("FROM hits h JOIN entities" in sql for sql, _g, _c in prepared)  # the entities' hydration
    parallel.close()
