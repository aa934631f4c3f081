"""Each retrieval path against real Postgres: it finds what it should, inside the scope only."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from retrieval import paths
from retrieval.config import RetrievalConfig
from retrieval.plan import QueryPlan, TimeRange
from retrieval.scope import RetrievalScope
from tests.retrieval import factory as f

pytestmark = pytest.mark.django_db

CFG = dataclasses.replace(
    RetrievalConfig(
        path_weights={"structured": 1, "semantic": 1, "fulltext": 0.8, "graph": 0.6, "summary": 0.5},
        recency_half_life_days=30,
        context_tokens=6000,
        complexity_threshold=0.7,
        contradiction_threshold=0.78,
    )
)


@pytest.fixture
def world():
    alice, bob = f.user(), f.user()
    billing = f.channel(name="billing")
    other = f.channel(name="other")
    dm = f.channel(name="alice-dm", personal=True)
    foreign = f.channel(org="northwind.example", name="foreign")
    d1 = f.decision(billing, "Retry failed card payments three times over 72 hours", by=[alice], days_ago=3)
    d2 = f.decision(other, "Retry failed card payments five times", by=[bob], days_ago=2)
    a1 = f.action(billing, "Write the retry_attempts migration", owner=alice, deadline=f.NOW + timedelta(days=2))
    a2 = f.action(billing, "Review the retry dashboard", owner=bob, status="done")
    a3 = f.action(other, "Write the retry runbook", owner=alice)
    f.decision(foreign, "Retry failed card payments forever", by=[alice])
    return locals()


def scope(ch, user, personal=False):
    return RetrievalScope(organisation_id=ch.organisation_id, channel_id=ch.channel_id, user_id=user, personal=personal)


def test_structured_by_owner_status_and_friendly_id(world):
    w = world
    s = scope(w["billing"], w["bob"])
    mine = paths.structured(QueryPlan(owner_ids=[w["alice"]], record_types=["action"]), s, CFG)
    assert mine == [("action", str(w["a1"].id))]  # not a3: another channel
    done = paths.structured(QueryPlan(statuses=["done"], record_types=["action"]), s, CFG)
    assert done == [("action", str(w["a2"].id))]
    by_id = paths.structured(QueryPlan(friendly_ids=[w["d1"].friendly_id]), s, CFG)
    assert by_id == [("decision", str(w["d1"].id))]
    other_channels_id = paths.structured(QueryPlan(friendly_ids=[w["d2"].friendly_id]), s, CFG)
    assert other_channels_id == []


def test_structured_by_date_range(world):
    w = world
    s = scope(w["billing"], w["bob"])
    plan = QueryPlan(
        record_types=["decision"],
        time_range=TimeRange(start=f.NOW - timedelta(days=4), end=f.NOW - timedelta(days=2)),
    )
    assert paths.structured(plan, s, CFG) == [("decision", str(w["d1"].id))]
    plan = QueryPlan(record_types=["decision"], time_range=TimeRange(start=f.NOW - timedelta(days=1), end=f.NOW))
    assert paths.structured(plan, s, CFG) == []


def test_structured_personal_scope_is_org_wide_but_own_records(world):
    w = world
    s = scope(w["dm"], w["alice"], personal=True)
    got = set(paths.structured(QueryPlan(record_types=["action"], statuses=["open"]), s, CFG))
    assert got == {("action", str(w["a1"].id)), ("action", str(w["a3"].id))}
    decisions = paths.structured(QueryPlan(record_types=["decision"]), s, CFG)
    assert decisions == [("decision", str(w["d1"].id))]  # not the foreign org's, not Bob's


def test_fulltext_ranks_by_coverage_and_stays_in_channel(world):
    w = world
    s = scope(w["billing"], w["bob"])
    got = paths.fulltext(QueryPlan(keywords=["retry", "card", "payments"]), s, CFG)
    assert got[0] == ("decision", str(w["d1"].id))
    assert ("decision", str(w["d2"].id)) not in got
    assert paths.fulltext(QueryPlan(keywords=["kubernetes", "helm"]), s, CFG) == []


def test_fulltext_needs_enough_of_the_words(world):
    w = world
    s = scope(w["billing"], w["bob"])
    # One word of four is noise, not an answer.
    assert paths.fulltext(QueryPlan(keywords=["migration", "salary", "offer", "kofi"]), s, CFG) == []
    got = paths.fulltext(QueryPlan(keywords=["migration", "retry_attempts"]), s, CFG)
    assert got == [("action", str(w["a1"].id))]


def test_semantic_path_with_embedder_vectors(world):
    from pipeline import embedder

    w = world
    texts = [w["d1"].summary, w["a1"].description, w["a2"].description, w["d2"].summary]
    vectors = embedder.embed([*texts, "How many times do we retry a failed card payment?"])
    for record, vector in zip([w["d1"], w["a1"], w["a2"], w["d2"]], vectors, strict=False):
        f.embed(record, vector)
    got = paths.semantic(QueryPlan(), scope(w["billing"], w["bob"]), CFG, vectors[-1])
    assert got[0] == ("decision", str(w["d1"].id))
    assert ("decision", str(w["d2"].id)) not in got


@pytest.mark.parametrize("exact_scan_max_rows", [3000, 0], ids=["exact-scan", "hnsw-iterative"])
def test_semantic_small_channel_in_a_big_organisation_still_gets_k(exact_scan_max_rows):
    big, small = f.channel(name="big"), f.channel(name="small")
    # 600 near neighbours in another channel crowd the index; the small channel's 12 are farther away.
    for i in range(600):
        f.embed(f.signal(big, f"big note {i}"), f.unit(0, noise={1 + i % 50: 0.05}))
    small_ids = {
        str(f.embed(f.signal(small, f"small note {i}"), f.unit(0, noise={300: 0.6})).source_id) for i in range(12)
    }
    cfg = dataclasses.replace(
        CFG,
        k={**CFG.k, "semantic": 10},
        hnsw_ef_search=10,
        min_similarity=0.1,
        exact_scan_max_rows=exact_scan_max_rows,
    )
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("ANALYZE embeddings")
    got = paths.semantic(QueryPlan(), scope(small, f.user()), cfg, f.unit(0))
    assert len(got) == 10
    assert {rid for _t, rid in got} <= small_ids


def test_semantic_exact_scan_and_hnsw_agree_in_scope():
    """The two branches of the semantic path: same in-scope neighbours, best first, on a small dataset."""
    import random

    rng = random.Random(3)
    org_channels = [f.channel(name=f"sem-{i}") for i in range(4)]
    dm = f.channel(name="sem-dm", personal=True)
    foreign = f.channel(org="northwind.example", name="sem-foreign")
    alice = f.user()
    for i in range(160):
        ch = [*org_channels, foreign][i % 5]
        author = alice if i % 3 == 0 else f.user()
        # A shared axis (7) with a distinct weight per row: no two rows tie on distance to the queries.
        vector = f.unit(i % 7, noise={7: rng.uniform(0.05, 0.95), 8 + rng.randrange(300): rng.uniform(0.1, 0.9)})
        f.embed(f.signal(ch, f"note {i}", participants=[author]), vector, author=author)
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("ANALYZE embeddings")
    # ef_search 200 over 160 rows: the HNSW walk sees every row, so both branches must agree exactly.
    exact = dataclasses.replace(CFG, min_similarity=-1.0, hnsw_ef_search=200, exact_scan_max_rows=3000)
    hnsw = dataclasses.replace(exact, exact_scan_max_rows=0)
    for s in (scope(org_channels[1], f.user()), scope(dm, alice, personal=True)):
        for query in (f.unit(0, noise={7: 0.3}), f.unit(3, noise={7: 0.5, 40: 0.5})):
            by_exact = paths.semantic(QueryPlan(), s, exact, query)
            by_hnsw = paths.semantic(QueryPlan(), s, hnsw, query)
            assert len(by_exact) == CFG.k["semantic"]
            assert by_exact == by_hnsw


def test_graph_bfs_depth_three_within_scope():
    ch, other = f.channel(name="g"), f.channel(name="g2")
    c = [ch.channel_id]
    release = f.entity(ch, "release", "project")
    sync = f.entity(ch, "fleet sync", "service")
    vendor = f.entity(ch, "mapbox", "tool")
    deep = f.entity(ch, "billing api", "service")
    too_deep = f.entity(ch, "legal", "team")
    hidden = f.entity(other, "secret project", "project")
    f.relate(sync, release, "blocks", c)
    f.relate(sync, vendor, "depends_on", c)
    f.relate(vendor, deep, "depends_on", c)
    f.relate(deep, too_deep, "reports_to", c)
    f.relate(hidden, release, "blocks", [other.channel_id])  # seen only in the other channel
    d = f.decision(ch, "Wait for fleet sync before the release date is fixed")
    got = paths.graph(QueryPlan(entities=["release"]), scope(ch, f.user()), CFG)
    entity_ids = [rid for t, rid in got if t == "entity"]
    assert entity_ids[0] == str(release.id)
    assert set(entity_ids) == {str(release.id), str(sync.id), str(vendor.id), str(deep.id)}
    assert ("decision", str(d.id)) in got  # names a reached neighbour


def test_summary_path_overlaps_time_range():
    ch, other = f.channel(name="s"), f.channel(name="s2")
    inside = f.summary(ch, "Payments incident day: failover held", start_days_ago=5, end_days_ago=4)
    f.summary(ch, "Quiet day", start_days_ago=20, end_days_ago=19)
    f.summary(other, "Other channel day", start_days_ago=5, end_days_ago=4)
    plan = QueryPlan(time_range=TimeRange(start=f.NOW - timedelta(days=6), end=f.NOW - timedelta(days=3)))
    assert paths.summary(plan, scope(ch, f.user()), CFG) == [("summary", str(inside.id))]
    by_words = paths.summary(QueryPlan(keywords=["failover", "payments"]), scope(ch, f.user()), CFG)
    assert by_words == [("summary", str(inside.id))]


@pytest.mark.parametrize(
    ("table", "index", "run"),
    [
        ("embeddings", "embeddings_scope_cover_idx", lambda s: paths.semantic(QueryPlan(), s, CFG, f.unit(0))),
        (
            "conversation_signals",
            "signals_scope_text_cover_idx",
            lambda s: paths.fulltext(QueryPlan(keywords=["retry", "runbook"]), s, CFG),
        ),
    ],
    ids=["semantic-exact-scan", "fulltext-signals"],
)
def test_channel_reads_can_use_the_covering_index(world, table, index, run):
    """A channel's rows are read through the covering index (migration 0003): its partial predicate and
    columns still match the path's SQL. The table's other indexes on channel_id are dropped inside the
    test's transaction (rolled back), so the index is the only way in short of a sequential scan."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    w = world
    f.embed(f.signal(w["billing"], "Retry runbook drafted"), f.unit(0))
    s = scope(w["billing"], w["bob"])
    with CaptureQueriesContext(connection) as ctx:
        run(s)
    sql = ctx.captured_queries[-1]["sql"]
    with connection.cursor() as cur:
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")  # fire the deferred FK checks: the table can be altered
        cur.execute(
            "SELECT i.indexrelid::regclass::text, c.conname FROM pg_index i"
            " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
            " LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid"
            " WHERE i.indrelid = %s::regclass AND a.attname = 'channel_id' AND i.indexrelid <> %s::regclass",
            [table, index],
        )
        for name, constraint in cur.fetchall():
            cur.execute(f"ALTER TABLE {table} DROP CONSTRAINT {constraint}" if constraint else f"DROP INDEX {name}")
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("EXPLAIN " + sql)
        plan = "\n".join(row[0] for row in cur.fetchall())
    assert index in plan, plan


def test_an_entity_shows_the_same_six_relations_however_its_statement_is_planned():
    """Past six relations an entity's record names the first six in order, not whichever six the plan met."""
    from retrieval.records import hydrate

    ch = f.channel(name="warehouse-systems")
    hub = f.entity(ch, "Pallet Router")
    for name in ("Zebra scanner", "Dock board", "Yard map", "Label printer", "Crane feed", "Bay lights", "Alarm hub"):
        f.relate(hub, f.entity(ch, name), "depends_on", [ch.channel_id])
    scope = RetrievalScope.for_asker(ch.channel_id, f.user())
    [record] = hydrate([("entity", str(hub.id))], scope).values()
    lines = record.detail["relations"].split("; ")
    assert len(lines) == 6 and lines == sorted(lines) and "Pallet Router depends on Zebra scanner" not in lines


def test_a_records_term_coverage_counts_only_the_words_text_search_keeps(world):
    """Text search's stop words ("through", "own", "some") match no record, so a record matching
    every other term of the question covers all of it, as the full-text path counts it."""
    from retrieval.records import hydrate

    w = world
    key = ("decision", str(w["d1"].id))
    s = scope(w["billing"], w["alice"])
    [record] = hydrate([key], s, terms=["retry", "card", "payments", "through", "own", "some"]).values()
    assert record.coverage == 1.0
    [record] = hydrate([key], s, terms=["retry", "refunds", "through"]).values()
    assert record.coverage == 0.5
