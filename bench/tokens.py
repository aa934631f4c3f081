"""Model tokens: the debounced burst extraction against the naive scheme, and the size of an answer's context.

    python bench/tokens.py            # every dev conversation (a few minutes)
    python bench/tokens.py --quick    # a smoke run (CI): one conversation

Extraction. The dev conversations are replayed through the real stack — its own gunicorn, classify and
extract workers, embedded Postgres and Valkey — with the extract slot pointed at the fake OpenAI-compatible
server of the tests (tests/fakes/openai_server.py, answering an empty extraction) and Tier 1 on the offline
engine, so which messages are high-signal is what Jeeves decides. Every request the fake server receives is
counted with litellm's `token_counter`: that is the debounced scheme (one run per burst; its prompt shows
the burst after at most JEEVES_EXTRACT_CONTEXT_MESSAGES earlier messages of the window, as
pipeline.extract._messages builds it). The fake's empty extractions store no record, so no prompt here lists
active decisions, nor the open actions a real run lists in place of the window's other earlier messages
(short restatements, at most 10). The naive scheme is counted on the same requests' format: one
extraction per high-signal message with its window as it stood when the message arrived (≤ 30 messages,
≤ 15 minutes), the message alone marked new. Both are reported per 100 messages posted. Messages are
posted as `jeeves replay` posts them (as fast as the pipeline takes them, holding back when half a window
waits), which packs a burst closer than people type; so the same comparison is also simulated at the
conversations' own timestamps (the debounce, batch and window rules applied to the recorded times, prompts
built the same way).

Answers. The gold records of the same conversations are seeded (as `bench/retrieval_qa.py --gold` does)
and every gold question asked through `retrieval.ask` with the `respond` / `complex` slots pointed at the
fake server; the median of the prompt tokens of those requests is the answer context (a question answered
"no record" makes no model call and is not counted).

Targets: debounced ≤ 25 % of the naive scheme's tokens per 100 messages; median answer context ≤ 2,000 tokens.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import logging
import os
import statistics
import sys
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import psycopg
from _common import ROOT, exit_on_sigterm, migrate, services, start_web, start_worker

sys.path.insert(0, str(ROOT))  # the project's packages before bench/ (bench/ has no module named like one)

SECRET = "bench-secret"
APP_ID = f"{uuid.uuid4()}@bench.example"
EXTRACT_MODEL = "bench-extract"
RESPOND_MODEL = "bench-respond"
HIGH_SIGNAL = ("pending_extract", "extracted", "evicted")  # what Tier 1 sent on to extraction


def conversations(limit: int | None) -> list[dict]:
    convs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((ROOT / "evalsets" / "dev").glob("conv-*.json"))]
    return convs[:limit] if limit else convs


def tokens(messages: list[dict]) -> int:
    from litellm import token_counter

    # litellm's default tokenizer (the fake models' names are unknown to it), as the context pack counts.
    return int(token_counter(model="local", messages=messages))


# --------------------------------------------------------------------------- replay


@dataclass
class Channel:
    conv: dict
    channel_id: str
    added: dict
    posted: list[dict]  # the evalset messages posted, in order


def _channel(conv: dict) -> Channel:
    """A fresh channel for the conversation; its text messages (commands to Jeeves left out, as in
    bench/pipeline_throughput.py)."""
    qid = {"id": str(uuid.uuid4()), "domain": "bench.example"}
    org = conv["channel"]["org"]
    bot = next((m["id"] for m in conv["channel"]["members"] if (m.get("handle") or "").lower() == "jeeves"), None)
    added = {
        "type": "app_added",
        "conversation": {"id": qid, "name": conv["channel"].get("name"), "type": "GROUP"},
        "members": [
            {
                "userId": {"id": m["id"], "domain": org},
                "role": "MEMBER",
                "name": m.get("name"),
                "handle": m.get("handle"),
            }
            for m in conv["channel"]["members"]
            if m["id"] != bot
        ],
        "timezone": conv["channel"].get("timezone"),
    }
    posted = [m for m in conv["messages"] if m["author"] != bot and not m.get("mentions")]
    return Channel(conv, f"{qid['id']}@{qid['domain']}", added, posted)


def _busy(conn: psycopg.Connection, channel_id: str) -> int:
    return conn.execute(
        "SELECT count(*) FROM message_receipts WHERE channel_id = %s AND outcome IN ('queued', 'pending_extract')",
        [channel_id],
    ).fetchone()[0]


def _wait(done, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


def replay(url: str, conn: psycopg.Connection, ch: Channel, window_size: int, timeout: float) -> None:
    """Post the conversation as `jeeves replay` does, then wait until nothing of it waits for a worker."""
    org = ch.conv["channel"]["org"]
    conv_qid = ch.added["conversation"]["id"]
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {SECRET}"}, timeout=30) as client:
        client.post("/wire/events", json=ch.added).raise_for_status()
        for m in ch.posted:
            event = {
                "type": "text_message",
                "conversationId": conv_qid,
                "sender": {"id": m["author"], "domain": org},
                "messageId": m["id"],
                "timestamp": m["ts"],
                "text": m["text"],
                "mentions": [],
            }
            client.post("/wire/events", json=event).raise_for_status()
            if _busy(conn, ch.channel_id) >= window_size // 2:
                _wait(lambda: _busy(conn, ch.channel_id) == 0, timeout, "the channel's extraction")
    _wait(lambda: _busy(conn, ch.channel_id) == 0, timeout, "the channel's extraction")


# --------------------------------------------------------------------------- the naive scheme


def _entry(m: dict, conv: dict, new: bool) -> dict:
    """A message as the extract prompt shows it (pipeline.extract._messages)."""
    org, tz = conv["channel"]["org"], ZoneInfo(conv["channel"]["timezone"])
    names = {u["id"]: u.get("name") or f"@{u.get('handle')}" for u in conv["channel"]["members"]}
    ts = datetime.fromisoformat(m["ts"].replace("Z", "+00:00"))
    return {
        "id": m["id"],
        "new": new,
        "time": ts.astimezone(tz).strftime("%a %Y-%m-%d %H:%M"),
        "author_id": f"{m['author']}@{org}",
        "author": names.get(m["author"], f"{m['author']}@{org}"),
        "mentions": [],
        "text": m["text"],
    }


def _prompt(template: list[dict], entries: list[dict]) -> list[dict]:
    """A recorded extract request of the channel with its window replaced by `entries`."""
    payload = json.loads(template[-1]["content"])
    payload["messages"] = entries
    return [*template[:-1], {"role": "user", "content": json.dumps(payload, ensure_ascii=False)}]


def naive(ch: Channel, high: set[str], template: list[dict], window_size: int) -> tuple[int, int]:
    """(calls, tokens): one extraction per high-signal message over the last `window_size` messages up to it."""
    calls = total = 0
    for i, m in enumerate(ch.posted):
        if m["id"] in high:
            window = ch.posted[max(0, i + 1 - window_size) : i + 1]
            total += tokens(_prompt(template, [_entry(w, ch.conv, w["id"] == m["id"]) for w in window]))
            calls += 1
    return calls, total


def _shown(win: list[dict], new: set[str], conv: dict, lead: int, budget: int) -> list[dict]:
    """A run's prompt messages as pipeline.extract._messages picks them (pipeline.window.excerpt): the burst
    after a short tail of earlier messages. The records that stand in for the rest are none here (the fake
    server answers an empty extraction)."""
    from pipeline.window import excerpt

    entries = {m["id"]: _entry(m, conv, m["id"] in new) for m in win}
    shown = excerpt(win, new, lead=lead, budget=budget, size=lambda m: _size(entries[m["id"]]), key=lambda m: m["id"])
    return [entries[m["id"]] for m in shown]


def _size(entry: dict) -> int:
    from litellm import token_counter

    return int(token_counter(text=json.dumps(entry, ensure_ascii=False)))  # as pipeline.extract._tokens


def at_own_pace(
    ch: Channel,
    high: set[str],
    template: list[dict],
    debounce_s: float,
    batch: int,
    size: int,
    max_age: float,
    lead: int,
    budget: int,
) -> tuple[tuple[int, int], tuple[int, int]]:
    """Both schemes at the conversation's own timestamps: ((debounced calls, tokens), (naive calls, tokens)).

    The rules of pipeline.debounce and pipeline.window applied to the recorded times (classification taken
    as instant): a high-signal message runs at once when `batch` messages are pending, else schedules a run
    `debounce_s` later unless one is scheduled; a run takes every pending message still in the window, and
    waits (keeps them pending) when none of them is high-signal. A run's prompt shows its burst after at most
    `lead` earlier messages within `budget` tokens, as the pipeline's does."""
    arrivals: list[tuple[float, dict]] = []
    pending: list[str] = []
    due: float | None = None
    runs: list[tuple[list[dict], set[str]]] = []
    naive_windows: list[tuple[list[dict], str]] = []

    def window(at: float) -> list[dict]:
        return [m for t, m in arrivals if t > at - max_age][-size:]

    def run(at: float) -> None:
        nonlocal pending
        win = window(at)
        ids = {m["id"] for m in win}
        mine = [p for p in pending if p in ids]
        if not any(p in high for p in mine):
            pending = mine  # only low-signal ones: they wait as context
            return
        runs.append((win, set(mine)))
        pending = []

    for m in ch.posted:
        t = datetime.fromisoformat(m["ts"].replace("Z", "+00:00")).timestamp()
        if due is not None and due <= t:
            run(due)
            due = None
        arrivals.append((t, m))
        pending.append(m["id"])
        if m["id"] in high:
            naive_windows.append((window(t), m["id"]))
            if len(pending) >= batch:
                run(t)
                due = None
            elif due is None:
                due = t + debounce_s
    if due is not None:
        run(due)
    debounced = sum(tokens(_prompt(template, _shown(w, new, ch.conv, lead, budget))) for w, new in runs)
    naive_total = sum(
        tokens(_prompt(template, [_entry(m, ch.conv, m["id"] == one) for m in w])) for w, one in naive_windows
    )
    return (len(runs), debounced), (len(naive_windows), naive_total)


# --------------------------------------------------------------------------- answers


def answer_contexts(env: dict[str, str], convs: list[dict]) -> tuple[list[int], int]:
    """(prompt tokens of every respond/complex request, questions asked) over the gold-seeded conversations."""
    import dj_database_url
    import django
    from django.conf import settings

    # jeeves.settings was read when services() imported jeeves (before the services existed): point it at them.
    settings.DATABASES["default"].update(dj_database_url.parse(env["DATABASE_URL"]))
    settings.REDIS_URL = env["REDIS_URL"]
    django.setup()
    logging.disable(logging.INFO)  # the bench prints its figures; the per-question log lines are noise here
    from django.db import connection

    from retrieval.answer import NO_RECORD
    from retrieval.ask import ask
    from retrieval.evaluation import asker
    from tests.fakes.openai_server import answer, serving

    with connection.cursor() as cur:
        cur.execute("SELECT current_database()")
        if cur.fetchone()[0] != "jeeves_bench":
            raise SystemExit("bench: not connected to the jeeves_bench database; refusing to seed")
    spec = importlib.util.spec_from_file_location("bench_retrieval_qa", Path(__file__).with_name("retrieval_qa.py"))
    qa = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(qa)
    entities: dict = {}
    for conv in convs:
        qa.seed_gold(conv, entities)
    asked = 0
    with serving(settings, {"respond": RESPOND_MODEL, "complex": RESPOND_MODEL}) as fake:
        # A valid answer that cites nothing: the request is what is measured, the reply need only pass.
        fake.default(RESPOND_MODEL, answer({"answer": NO_RECORD, "cited": []}))
        for conv in convs:
            for q in conv["gold"]["questions"]:
                ask(conv["channel"]["id"], asker(conv), q["q"])
                asked += 1
        sizes = [tokens(r.body["messages"]) for r in fake.calls(RESPOND_MODEL)]
    return sizes, asked


# --------------------------------------------------------------------------- main


def report(
    convs: int, posted: int, high: int, debounced: tuple[int, int], naive_: tuple[int, int], own: list[int]
) -> None:
    per100 = 100 / max(posted, 1)
    print(f"{convs} dev conversations, {posted} messages posted, {high} high-signal (Tier 1, offline engine)")
    print("extraction prompt tokens per 100 messages (litellm token_counter):")
    print(f"  {'':48}{'calls':>7}{'tokens':>10}")
    print(f"  {'debounced bursts, replay pace (measured)':48}{debounced[0] * per100:7.1f}{debounced[1] * per100:10.0f}")
    print(f"  {'naive: one per high-signal message + window':48}{naive_[0] * per100:7.1f}{naive_[1] * per100:10.0f}")
    print(f"  ratio debounced / naive: {debounced[1] / max(naive_[1], 1):.1%} (target ≤ 25 %)")
    if own[3]:
        print(f"  {'debounced, at the conversations own times':48}{own[0] * per100:7.1f}{own[1] * per100:10.0f}")
        print(f"  {'naive, at the conversations own times':48}{own[2] * per100:7.1f}{own[3] * per100:10.0f}")
        print(f"  ratio at their own times (simulated): {own[1] / own[3]:.1%}")
        print(f"  debounced at their own times / naive (30 messages, any age): {own[1] / max(naive_[1], 1):.1%}")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke run: one conversation")
    parser.add_argument("--conversations", type=int, default=0, help="dev conversations (default: all)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for one channel's pipeline")
    args = parser.parse_args()
    exit_on_sigterm()
    if args.quick:
        args.conversations = args.conversations or 1
    convs = conversations(args.conversations)
    from ground.config import JeevesConfig
    from tests.fakes.openai_server import FakeOpenAI, answer

    default = {f.name: f.default for f in dataclasses.fields(JeevesConfig)}  # the defaults are what is measured
    size, max_age = default["window_size"], float(default["window_max_age_s"])
    debounce_s, batch = default["extract_debounce_s"], default["extract_batch"]
    lead, budget = default["extract_context_messages"], default["extract_context_tokens"]
    posted = extract_calls = extract_tokens = naive_calls = naive_tokens = high_total = 0
    own = [0, 0, 0, 0]  # at their own times: debounced calls, tokens, naive calls, tokens
    with ExitStack() as stack:
        fake = FakeOpenAI().start()
        stack.callback(fake.stop)
        fake.default(EXTRACT_MODEL, answer({}))  # a valid, empty extraction: no record changes the next prompt
        env = {**os.environ, **services(stack)}
        for name in (
            "JEEVES_WINDOW_SIZE",
            "JEEVES_WINDOW_MAX_AGE_S",
            "JEEVES_EXTRACT_DEBOUNCE_S",
            "JEEVES_EXTRACT_BATCH",
            "JEEVES_EXTRACT_CONTEXT_MESSAGES",
            "JEEVES_EXTRACT_CONTEXT_TOKENS",
        ):
            env.pop(name, None)
        env.update(
            DJANGO_SETTINGS_MODULE="jeeves.settings",
            JEEVES_WIRE_SECRET=SECRET,
            JEEVES_WIRE_APP_ID=APP_ID,
            JEEVES_LOG_LEVEL="WARNING",
            JEEVES_LLM_BASE_URL=fake.base_url,
            JEEVES_LLM_API_KEY="bench",
            JEEVES_MODEL_EXTRACT=EXTRACT_MODEL,
        )
        migrate(env)
        with ExitStack() as processes:  # stopped before the answers are measured
            url = start_web(processes, env, workers=1)
            start_worker(processes, env, "classify", 1)
            start_worker(processes, env, "extract", 1)
            conn = processes.enter_context(psycopg.connect(env["DATABASE_URL"], autocommit=True))
            for ch in [_channel(c) for c in convs]:
                before = len(fake.calls(EXTRACT_MODEL))
                replay(url, conn, ch, size, args.timeout)
                mine = fake.calls(EXTRACT_MODEL)[before:]  # channels are replayed one at a time
                high = {
                    row[0]
                    for row in conn.execute(
                        "SELECT wire_msg_id FROM message_receipts WHERE channel_id = %s AND outcome = ANY(%s)",
                        [ch.channel_id, list(HIGH_SIGNAL)],
                    )
                }
                posted += len(ch.posted)
                high_total += len(high)
                extract_calls += len(mine)
                extract_tokens += sum(tokens(r.body["messages"]) for r in mine)
                if not mine:
                    continue  # nothing high-signal: neither scheme calls the model
                template = mine[0].body["messages"]
                calls, total = naive(ch, high, template, size)
                naive_calls += calls
                naive_tokens += total
                (dc, dt), (nc, nt) = at_own_pace(ch, high, template, debounce_s, batch, size, max_age, lead, budget)
                own = [own[0] + dc, own[1] + dt, own[2] + nc, own[3] + nt]
        report(len(convs), posted, high_total, (extract_calls, extract_tokens), (naive_calls, naive_tokens), own)
        sizes, asked = answer_contexts(env, convs)
    if sizes:
        print(
            f"answer context: {len(sizes)} of {asked} gold questions called the model; prompt tokens median "
            f"{statistics.median(sizes):.0f}, max {max(sizes)} (target median ≤ 2,000)"
        )
    else:
        print(f"answer context: none of {asked} questions called the model")


if __name__ == "__main__":
    main()
