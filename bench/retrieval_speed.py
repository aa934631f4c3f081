"""Retrieval benchmark: p50/p95 of plan → paths → fusion (no model call) next to a bare pgvector HNSW top-10.

    python bench/retrieval_speed.py            # 100,000 decisions+actions, 1,000,000 embeddings, 1,000 channels
    python bench/retrieval_speed.py --quick    # 10x smaller, for CI
    python bench/retrieval_speed.py --reuse    # keep the loaded database and reuse it on the next run

It builds its OWN database: a fresh embedded PostgreSQL (pgvector) in a temp dir, or, when
DATABASE_URL is set, a new database `jeeves_bench` on that server (dropped afterwards). Data is
synthetic (clustered random 384-d vectors, text from a small vocabulary), loaded with batched
COPY (binary for vectors); the HNSW index is built after the load and its build time reported.
With `--reuse` the embedded server lives in `--pgdata` (default `.jeeves/bench-retrieval-pg`) and
`jeeves_bench` is kept: a later run at the same scale whose load completed (a `bench_meta` row
written after the index build, row counts and the HNSW index checked) skips the ~20 min load.
Both timed queries get the same query vector: embedding the question is not part of the step.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORDS = (
    "billing retry payments release ios android budget hiring offer cdn deploy freeze migration dashboard churn "
    "sponsorship contractor rollout postmortem vendor database replica failover cache invoice pricing roadmap "
    "security audit certificate onboarding laptop travel expenses newsletter launch webinar campaign api sdk"
).split()
DIMS = 384


def _database(tmp: Path, reuse: bool = False, pgdata_dir: Path | None = None) -> tuple[str, object]:
    """(DATABASE_URL of the bench database, cleanup callable). With `reuse` nothing is dropped or deleted."""
    import psycopg

    base = os.environ.get("DATABASE_URL", "").strip()
    if base:
        admin = base.rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = 'jeeves_bench'").fetchone()
            if not reuse:
                conn.execute("DROP DATABASE IF EXISTS jeeves_bench")
            if not (reuse and exists):
                conn.execute("CREATE DATABASE jeeves_bench")

        def drop() -> None:
            if reuse:
                return
            from django.db import connections

            connections.close_all()
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute("DROP DATABASE IF EXISTS jeeves_bench")

        return base.rsplit("/", 1)[0] + "/jeeves_bench", drop
    from jeeves import embedded

    if reuse:
        # A server of the bench's own, kept between runs (not the dev server `jeeves up` may stop).
        pgdata = pgdata_dir or ROOT / ".jeeves" / "bench-retrieval-pg"
        admin = embedded.start_postgres(pgdata)
    else:
        pgdata = tmp / "pg"
        admin = embedded.start_postgres(pgdata, delete_on_exit=True)
    embedded.ensure_database(admin, "jeeves_bench")

    def stop() -> None:
        from django.db import connections

        connections.close_all()
        if not reuse:
            embedded.stop_postgres(pgdata)

    return admin.rsplit("/", 1)[0] + "/jeeves_bench", stop


def _vectors(rng, centres, n: int):
    import numpy as np

    picks = rng.integers(0, len(centres), size=n)
    v = centres[picks] + rng.normal(scale=0.35, size=(n, DIMS)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


ORGS = [f"org{i}.example" for i in range(10)]
SEED = 5


def layout(n_channels: int, seed: int = SEED) -> tuple[random.Random, object, dict[str, object]]:
    """Channels, users and vector cluster centres: a function of the seed, so a reused database needs no load."""
    import numpy as np

    rnd = random.Random(seed)
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(64, DIMS)).astype(np.float32)
    channels = [(f"{uuid.UUID(int=rnd.getrandbits(128))}@{ORGS[i % 10]}", ORGS[i % 10]) for i in range(n_channels)]
    users = {o: [f"{uuid.UUID(int=rnd.getrandbits(128))}@{o}" for _ in range(200)] for o in ORGS}
    return rnd, rng, {"channels": channels, "users": users, "centres": centres}


def load(n_channels: int, n_records: int, n_embeddings: int, seed: int = SEED) -> dict[str, object]:
    """COPY the synthetic organisation into the (migrated) bench database; returns what the queries need."""
    from django.db import connection
    from pgvector.psycopg import register_vector

    rnd, rng, shape = layout(n_channels, seed)
    channels, users, centres = shape["channels"], shape["users"], shape["centres"]
    orgs = ORGS
    now = datetime.now(UTC)

    def text(k: int = 6) -> str:
        return " ".join(rnd.choice(WORDS) for _ in range(k))

    def ref(at: datetime, n: int) -> str:
        iso = at.isoformat()
        return f'{{"wire_msg_ids": ["m{n}"], "timestamp_range": {{"start": "{iso}", "end": "{iso}"}}}}'

    def spread(count: int):
        """`count` records round the channels: n, channel, organisation, a time in the last year, an id, a person."""
        for n in range(count):
            cid, org = channels[n % n_channels]
            at = now - timedelta(days=rnd.random() * 365)
            rid, who = uuid.uuid4(), rnd.choice(users[org])
            yield n, cid, org, at, rid, who

    conn = connection.connection  # the psycopg 3 connection under Django's
    register_vector(conn)
    t0 = time.perf_counter()
    with conn.cursor() as cur:
        with cur.copy("COPY channel_config (channel_id, channel_name, organisation_id, tags, stakeholders, "
                      "related_channels) FROM STDIN") as cp:  # fmt: skip
            for i, (cid, org) in enumerate(channels):
                cp.write_row((cid, f"channel-{i}", org, "{}", "{}", "{}"))
        sources: list[tuple[str, uuid.UUID, str, str, str, datetime]] = []
        per_kind = n_records // 2
        with cur.copy("COPY decisions (id, friendly_id, channel_id, organisation_id, summary, decided_by, "
                      "decided_at, tags, source_ref, source_key, restatement) FROM STDIN") as cp:  # fmt: skip
            for n, cid, org, at, rid, who in spread(per_kind):
                cp.write_row((rid, f"DEC-{n // n_channels + 1:04d}", cid, org, text(), "{" + who + "}", at,
                              "{" + rnd.choice(WORDS) + "}", ref(at, n), f"d{n}", "{}"))  # fmt: skip
                sources.append(("decision", rid, cid, org, who, at))
        with cur.copy("COPY actions (id, friendly_id, channel_id, organisation_id, description, owner_id, "
                      "owner_name, tags, source_ref, source_key, status, restatement) FROM STDIN") as cp:  # fmt: skip
            for n, cid, org, at, rid, who in spread(per_kind):
                cp.write_row((rid, f"ACT-{n // n_channels + 1:04d}", cid, org, text(), who, f"Person {n % 200}",
                              "{}", ref(at, n), f"a{n}", rnd.choice(["open", "done"]), "{}"))  # fmt: skip
                sources.append(("action", rid, cid, org, who, at))
        n_signals = max(0, n_embeddings - len(sources))
        signal_cols = "participants, tags, related_entities, occurred_at, source_ref, source_key, restatement"
        with cur.copy("COPY conversation_signals (id, channel_id, organisation_id, signal_type, summary, "
                      f"{signal_cols}) FROM STDIN") as cp:  # fmt: skip
            for n, cid, org, at, rid, who in spread(n_signals):
                cp.write_row((rid, cid, org, "discussion", text(), "{" + who + "}", "{}", "{}", at, ref(at, n),
                              f"s{n}", "{}"))  # fmt: skip
                sources.append(("signal", rid, cid, org, who, at))
        with cur.copy("COPY entities (id, channel_id, channel_ids, organisation_id, entity_type, name, "
                      "normalised_name, aliases) FROM STDIN") as cp:  # fmt: skip
            entity_ids: dict[str, list[uuid.UUID]] = {o: [] for o in orgs}
            for org in orgs:
                org_channels = [c for c, o in channels if o == org]
                for word in WORDS:
                    eid = uuid.uuid4()
                    chans = "{" + ",".join(rnd.sample(org_channels, min(30, len(org_channels)))) + "}"
                    cp.write_row((eid, org_channels[0], chans, org, "concept", word, word, "{}"))
                    entity_ids[org].append(eid)
        with cur.copy("COPY entity_relationships (id, source_id, target_id, relationship, organisation_id, "
                      "channel_ids) FROM STDIN") as cp:  # fmt: skip
            seen = set()
            for org in orgs:
                org_channels = [c for c, o in channels if o == org]
                for _ in range(120):
                    a, b = rnd.sample(entity_ids[org], 2)
                    if (a, b) in seen:
                        continue
                    seen.add((a, b))
                    chans = "{" + ",".join(rnd.sample(org_channels, min(30, len(org_channels)))) + "}"
                    cp.write_row((uuid.uuid4(), a, b, rnd.choice(["blocks", "depends_on", "owns"]), org, chans))
        summary_cols = "granularity, summary, key_decisions, key_actions, active_topics, participants"
        with cur.copy("COPY summaries (id, scope_type, scope_id, organisation_id, period_start, period_end, "
                      f"{summary_cols}) FROM STDIN") as cp:  # fmt: skip
            for cid, org in channels:
                for d in range(10):
                    start = now - timedelta(days=d + 1)
                    cp.write_row((uuid.uuid4(), "channel", cid, org, start, start + timedelta(days=1), "daily",
                                  text(12), "{}", "{}", "{}", "{}"))  # fmt: skip
        records_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        cur.execute("DROP INDEX IF EXISTS embeddings_hnsw_cosine")
        # The covering index (knowledge/migrations/0003) carries each vector: built once after the COPY.
        cur.execute("SELECT pg_get_indexdef(%s::regclass)", [COVER])
        cover_def = cur.fetchone()[0]
        cur.execute(f"DROP INDEX {COVER}")
        batch = 50_000
        with cur.copy("COPY embeddings (id, source_type, source_id, channel_id, organisation_id, author_id, "
                      "created_at, topic_tags, embedding) FROM STDIN WITH (FORMAT BINARY)") as cp:  # fmt: skip
            cp.set_types(["uuid", "text", "uuid", "text", "text", "text", "timestamptz", "text[]", "vector"])
            for start in range(0, len(sources), batch):
                chunk = sources[start : start + batch]
                for (kind, rid, cid, org, who, at), vec in zip(chunk, _vectors(rng, centres, len(chunk)), strict=True):
                    cp.write_row((uuid.uuid4(), kind, rid, cid, org, who, at, [], vec))
        copy_s = time.perf_counter() - t1
        cur.execute(cover_def)
    return {
        **shape,
        "records_s": records_s,
        "embeddings_copy_s": copy_s,
        "n_embeddings": len(sources),
    }


META = "bench_meta"
COVER = "embeddings_scope_cover_idx"


def complete(n_channels: int, n_records: int, n_embeddings: int) -> bool:
    """True when jeeves_bench holds a finished load of exactly this scale, HNSW index included."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL, to_regclass('embeddings_hnsw_cosine') IS NOT NULL", [META])
        has_meta, has_index = cur.fetchone()
        if not (has_meta and has_index):
            return False
        cur.execute(f"SELECT n_channels, n_records, n_embeddings FROM {META}")
        if cur.fetchone() != (n_channels, n_records, n_embeddings):
            return False
        # Cheap exact counts (index-only scans on 1M rows take ~0.1 s): a half-written load shows here.
        cur.execute(
            "SELECT (SELECT count(*) FROM channel_config), (SELECT count(*) FROM decisions)"
            " + (SELECT count(*) FROM actions), (SELECT count(*) FROM embeddings)"
        )
        return cur.fetchone() == (n_channels, n_records, n_embeddings)


def mark_complete(n_channels: int, n_records: int, n_embeddings: int) -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(f"CREATE TABLE IF NOT EXISTS {META} (n_channels int, n_records int, n_embeddings int)")
        cur.execute(f"DELETE FROM {META}")
        cur.execute(f"INSERT INTO {META} VALUES (%s, %s, %s)", [n_channels, n_records, n_embeddings])


def reset() -> None:
    """Empty a partial or other-scale load before loading again (the schema stays migrated)."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {META}")
        cur.execute(
            "TRUNCATE embeddings, entity_relationships, entities, summaries, conversation_signals, actions,"
            " decisions, channel_config CASCADE"
        )


def build_index() -> float:
    from django.db import connection

    conn = connection.connection  # Django keeps it in autocommit: CREATE INDEX runs on its own
    t = time.perf_counter()
    with conn.cursor() as cur:
        cur.execute("SET maintenance_work_mem = '3GB'")
        cur.execute("SET max_parallel_maintenance_workers = 2")
        cur.execute(
            "CREATE INDEX embeddings_hnsw_cosine ON embeddings USING hnsw (embedding vector_cosine_ops)"
            " WITH (m = 16, ef_construction = 64)"
        )
        # VACUUM as autovacuum would soon after: the visibility map lets the covering indexes answer
        # index-only (a live table has it for all but its newest pages).
        cur.execute("VACUUM (ANALYZE)")
    return time.perf_counter() - t


def prewarm() -> float:
    """Read the searched tables and indexes into shared buffers (a server in steady state holds its working
    set in memory; a bench right after a load or a restart does not). Both timed queries profit alike."""
    from django.db import connection

    t = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        cur.execute("SHOW shared_buffers")
        print(f"  shared_buffers {cur.fetchone()[0]}")
        # Read last what the timed queries read most (a full buffer pool evicts what came first).
        for rel in (
            "embeddings",
            "conversation_signals",
            "decisions",
            "actions",
            "summaries",
            "entities",
            "entity_relationships",
            "signals_scope_text_cover_idx",
            COVER,
            "embeddings_hnsw_cosine",
        ):
            cur.execute("SELECT pg_prewarm(%s::regclass)", [rel])
    return time.perf_counter() - t


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _questions(data: dict[str, object], n_queries: int) -> list[tuple[str, str, str, str, list[float]]]:
    """(channel, organisation, user, question, query vector) of the timed questions."""
    import numpy as np

    rnd = random.Random(9)
    qrng = np.random.default_rng(SEED + 1)  # query vectors: same on a fresh or a reused database
    channels, users = data["channels"], data["users"]
    templates = [
        "What did we decide about the {a} {b}?",
        "Who owns the {a} work?",
        "What is blocking the {a}?",
        "Why did we change the {a} {b} plan?",
        "What are my open actions?",
    ]
    questions = []
    for _ in range(n_queries):
        cid, org = rnd.choice(channels)
        q = rnd.choice(templates).format(a=rnd.choice(WORDS), b=rnd.choice(WORDS))
        vec = _vectors(qrng, data["centres"], 1)[0]
        questions.append((cid, org, rnd.choice(users[org]), q, [float(x) for x in vec]))
    return questions


def measure(data: dict[str, object], n_queries: int) -> dict[str, float]:
    from django.db import connection

    from retrieval.ask import retrieve
    from retrieval.config import RetrievalConfig
    from retrieval.scope import RetrievalScope

    cfg = RetrievalConfig.from_settings()
    questions = _questions(data, n_queries)
    from pipeline import embedder

    # Warm-up: imports, caches and the first plans are not the steady state.
    for cid, org, user, q, vec in questions[:10]:
        retrieve(q, RetrievalScope(org, cid, user), cfg, query_vector=vec)
    step, bare, counts, embed_ms = [], [], [], []
    parts: dict[str, list[float]] = {}
    for cid, _org, user, q, vec in questions:
        scope = RetrievalScope.for_asker(cid, user)
        t = time.perf_counter()
        found = retrieve(q, scope, cfg, query_vector=vec)
        step.append((time.perf_counter() - t) * 1000)
        counts.append(len(found.path_hits.get("semantic", [])))
        for name, ms in {"plan": found.timings_ms["plan"], **found.path_ms, "fuse": found.timings_ms["fuse"]}.items():
            parts.setdefault(name, []).append(ms)
        literal = "[" + ",".join(f"{x:.6f}" for x in vec) + "]"
        t = time.perf_counter()
        with connection.cursor() as cur:
            cur.execute("SELECT id FROM embeddings ORDER BY embedding <=> %s::vector LIMIT 10", [literal])
            cur.fetchall()
        bare.append((time.perf_counter() - t) * 1000)
    # The question's own vector, timed apart: torch's worker threads spin on after each call and would
    # slow the queries timed next to it. The step above gets a vector of the synthetic data's distribution.
    embedder.embed(["warm-up"])
    for _cid, _org, _user, q, _vec in questions:
        t = time.perf_counter()
        embedder.embed([q])
        embed_ms.append((time.perf_counter() - t) * 1000)
    return {
        "step_p50": pct(step, 50),
        "step_p95": pct(step, 95),
        "bare_p50": pct(bare, 50),
        "bare_p95": pct(bare, 95),
        "semantic_hits_mean": statistics.mean(counts),
        "embed_p50": pct(embed_ms, 50),
        "embed_p95": pct(embed_ms, 95),
        "with_embed_p50": pct([a + b for a, b in zip(step, embed_ms, strict=True)], 50),
        "with_embed_p95": pct([a + b for a, b in zip(step, embed_ms, strict=True)], 95),
        "parts": {name: (pct(v, 50), pct(v, 95)) for name, v in parts.items()},
    }


def compare_plans(data: dict[str, object], n_queries: int) -> None:
    """Each question twice, the order alternating: the small statements prepared and run with their generic plans
    (`parallel.Statement.generic`, as the code runs), and planned on every run (the code before): same process, pool and
    server, so the machine's load falls on both alike."""
    from django.db import connection

    from retrieval import parallel, paths
    from retrieval.ask import retrieve
    from retrieval.config import RetrievalConfig
    from retrieval.scope import RetrievalScope

    cfg = RetrievalConfig.from_settings()
    questions = _questions(data, n_queries)
    real, real_pipeline, use_generic = paths._fetch, parallel.pipeline, [True]

    def fetch(sql: str, params: dict[str, object], *, generic: bool = False) -> list[tuple]:
        return real(sql, params, generic=generic and use_generic[0])

    def pipeline(statements, *, prepared: bool) -> list[list[tuple]]:
        return real_pipeline(statements, prepared=prepared and use_generic[0])

    paths._fetch, parallel.pipeline = fetch, pipeline
    times: dict[bool, list[float]] = {True: [], False: []}
    bare, same = [], 0
    try:
        for i, (cid, _org, user, q, vec) in enumerate(questions[:10] * 2 + questions):
            scope, found = RetrievalScope.for_asker(cid, user), {}
            for mode in (True, False) if i % 2 == 0 else (False, True):
                use_generic[0] = mode
                t = time.perf_counter()
                r = retrieve(q, scope, cfg, query_vector=vec)
                if i >= 20:
                    times[mode].append((time.perf_counter() - t) * 1000)
                found[mode] = ([f.key for f in r.fused], r.path_hits)
            if i < 20:
                continue
            same += found[True] == found[False]
            t = time.perf_counter()
            with connection.cursor() as cur:
                literal = "[" + ",".join(f"{x:.6f}" for x in vec) + "]"
                cur.execute("SELECT id FROM embeddings ORDER BY embedding <=> %s::vector LIMIT 10", [literal])
                cur.fetchall()
            bare.append((time.perf_counter() - t) * 1000)
    finally:
        paths._fetch, parallel.pipeline = real, real_pipeline
    diff = statistics.median(a - b for a, b in zip(times[True], times[False], strict=True))
    print(f"\ngeneric plans against planned every time, {n_queries} questions each way (interleaved):")
    for mode, name in ((True, "generic plans"), (False, "planned every time")):
        p50, p95 = pct(times[mode], 50), pct(times[mode], 95)
        print(f"  {name}: step p50 {p50:.1f} ms   p95 {p95:.1f} ms   ratio p95/bare p95 {p95 / pct(bare, 95):.1f}x")
    print(
        f"  bare HNSW top-10 p50 {pct(bare, 50):.1f} ms   p95 {pct(bare, 95):.1f} ms; per question, generic - planned:"
    )
    print(f"  median {diff:+.2f} ms; the same fused records and path hits both ways: {same}/{n_queries}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x smaller data (CI)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--reuse", action="store_true", help="keep jeeves_bench and reuse a complete load")
    parser.add_argument("--pgdata", type=Path, default=None, help="embedded server directory kept with --reuse")
    parser.add_argument(
        "--prewarm", action="store_true", help="pg_prewarm the searched tables and indexes first (both queries)"
    )
    parser.add_argument(
        "--compare-plans",
        action="store_true",
        help="instead: each question with generic plans and planned every time, interleaved (retrieval.paths)",
    )
    args = parser.parse_args()
    # A SIGTERM ends it like Ctrl-C, so the finally below stops the embedded Postgres it started.
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    scale = 10 if args.quick else 1
    n_channels, n_records, n_embeddings = 1000 // scale, 100_000 // scale, 1_000_000 // scale

    tmp = Path(tempfile.mkdtemp(prefix="jeeves-bench-retrieval-"))
    url, cleanup = _database(tmp, args.reuse, args.pgdata)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jeeves.settings")
    import dj_database_url
    import django
    from django.conf import settings

    # Importing `jeeves` (for the embedded server) already read the settings: point them at the bench
    # database before the first connection, and refuse to write anywhere else.
    settings.DATABASES["default"].update(dj_database_url.parse(url))
    # Loading a million rows and building the HNSW index take minutes per statement: no statement timeout
    # (the settings' JEEVES_DB_STATEMENT_TIMEOUT_S was read before this script could say so).
    settings.DATABASES["default"].setdefault("OPTIONS", {})["options"] = "-c statement_timeout=0"
    django.setup()
    from django.core.management import call_command
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT current_database()")
        if cur.fetchone()[0] != "jeeves_bench":
            raise SystemExit("bench: not connected to the jeeves_bench database; refusing to load data")

    try:
        call_command("migrate", verbosity=0)
        if args.reuse and complete(n_channels, n_records, n_embeddings):
            print(f"reusing jeeves_bench: {n_channels} channels, {n_records} records, {n_embeddings} embeddings")
            data = layout(n_channels)[2]
        else:
            reset()
            print(f"loading {n_channels} channels, {n_records} decisions+actions, {n_embeddings} embeddings ...")
            data = load(n_channels, n_records, n_embeddings)
            print(f"  records COPY {data['records_s']:.1f} s; embeddings COPY {data['embeddings_copy_s']:.1f} s")
            build_s = build_index()
            print(f"  HNSW build (m=16, ef_construction=64, 2 parallel workers) {build_s:.1f} s")
            mark_complete(n_channels, n_records, n_embeddings)
        if args.prewarm:
            print(f"  prewarmed {prewarm():.1f} s")
        if args.compare_plans:
            compare_plans(data, args.queries)
            return
        r = measure(data, args.queries)
        print(f"\nretrieval step (plan -> 5 paths -> fusion), {args.queries} questions:")
        print(f"  p50 {r['step_p50']:.1f} ms   p95 {r['step_p95']:.1f} ms", end="   ")
        print(f"(semantic hits per question: {r['semantic_hits_mean']:.1f})")
        print("  per part p50/p95 ms: " + ", ".join(f"{k} {a:.1f}/{b:.1f}" for k, (a, b) in r["parts"].items()))
        print(
            f"  query embedding (MiniLM, CPU, warm) p50 {r['embed_p50']:.1f} ms   p95 {r['embed_p95']:.1f} ms;", end=" "
        )
        print(f"step + embedding p50 {r['with_embed_p50']:.1f} ms   p95 {r['with_embed_p95']:.1f} ms")
        print(f"bare pgvector HNSW top-10 (no scope):  p50 {r['bare_p50']:.1f} ms   p95 {r['bare_p95']:.1f} ms")
        print(f"ratio step/bare:  p50 {r['step_p50'] / r['bare_p50']:.1f}x   p95 {r['step_p95'] / r['bare_p95']:.1f}x")
    finally:
        cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
