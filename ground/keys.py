"""Every Redis key Jeeves writes, in one table: where transient text (and everything else) rests.

Each key family says how its keys are named (`Family.key` builds one from its parts), how long they
live (from the settings where that is configurable), whether they may hold message text or ids only,
and what they are for. Every module builds its keys here; `jeeves audit` checks the families that may
hold text (`TEXT_FAMILIES`). The key strings are what they were before this table: data already in
Redis is still found.

This module imports nothing of Jeeves' own (settings are read when a TTL is asked for), so every layer
(pipeline, retrieval, knowledge, wire_bridge, the jeeves commands) may import it.

Not in the table: Celery's own keys on the broker (the queues, kombu's `unacked` and `unacked_index`,
read by pipeline/liveness.py), which hold task ids and arguments (ids only, never text).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.conf import settings

ROOT = "jeeves:"

HOUR_S = 3600
DAY_S = 24 * HOUR_S


def glob_escape(value: str) -> str:
    """`value` with the glob characters of Redis' SCAN MATCH escaped (a channel id may hold any of them)."""
    return re.sub(r"([\\*?\[\]])", r"\\\1", value)


@dataclass(frozen=True)
class Family:
    """One family of Redis keys: `prefix` followed by `parts` joined by ':' (no parts: a single key)."""

    name: str
    prefix: str
    parts: tuple[str, ...]
    type: str  # the Redis type: string, list, hash, set
    text: bool  # may hold message text (transient text); False: ids, counters, member names, timestamps
    holds: str  # what a value holds
    owner: str  # the module that writes it
    description: str
    ttl: int | Callable[[], float] | None = None  # seconds; a callable reads the settings
    ttl_setting: str = ""  # the setting the TTL follows, when it is configurable
    no_ttl: str = ""  # why the keys have no TTL: a family says either this or its `ttl`

    def __post_init__(self) -> None:
        if (self.ttl is None) != bool(self.no_ttl.strip()):
            raise ValueError(f"{self.name}: a family has a TTL or says why it has none (no_ttl), not both or neither")

    def key(self, *parts: str) -> str:
        if len(parts) != len(self.parts):
            raise TypeError(f"{self.name} keys take {len(self.parts)} part(s) {self.parts}, not {len(parts)}")
        return self.prefix + ":".join(parts)

    def pattern(self, *leading: str) -> str:
        """A SCAN MATCH pattern for the family's keys, or for those whose first parts are `leading`."""
        if not leading:
            return f"{self.prefix}*"
        return glob_escape(self.prefix + ":".join(leading) + ":") + "*"

    def ttl_s(self) -> float | None:
        """The keys' TTL in seconds now (None: they have none)."""
        return self.ttl() if callable(self.ttl) else self.ttl

    def channel_of(self, key: str, known: Iterable[str] = ()) -> str:
        """The channel id a key of a per-channel family names. Known ids first: a channel id and a later
        part may both hold ':'."""
        rest = key[len(self.prefix) :]
        if len(self.parts) == 1:
            return rest
        for cid in sorted(known, key=len, reverse=True):
            if rest.startswith(cid + ":"):
                return cid
        return rest.rpartition(":")[0]


def _cfg():
    return settings.JEEVES


def _sweep_lock_s() -> float:
    """90 % of the sweep interval, at least 100 ms (the lock is set in milliseconds)."""
    return max(int(_cfg().sweep_interval_s * 900), 100) / 1000


def _bucket_fill_s() -> float:
    """The time a token bucket takes to fill, and a minute (the bucket is only used when the rate is above 0)."""
    return math.ceil(_cfg().channel_burst / _cfg().channel_rate) + 60 if _cfg().channel_rate > 0 else 60


# The table. Each family: its name, key prefix, key parts, Redis type and whether it may hold message text; the
# module that writes it and its TTL (with the setting the TTL follows, or why there is none); what a key holds; what
# the family is for.
# fmt: off

# --------------------------------------------------------------------------- transient text

WINDOW = Family("window", "jeeves:window:", ("channel_id",), "list", text=True,
    owner="pipeline/window.py", ttl=lambda: _cfg().window_max_age_s, ttl_setting="JEEVES_WINDOW_MAX_AGE_S",
    holds="the channel's recent messages as JSON (id, author, timestamp, text, mentions, quoted id, arrival)",
    description="the sliding window: the only place raw text rests; trimmed to JEEVES_WINDOW_SIZE and by age")
CLAIM_CHECK = Family("claim-check", "jeeves:msg:", ("channel_id", "wire_msg_id"), "string", text=True,
    owner="pipeline/claimcheck.py", ttl=lambda: _cfg().queue_ttl_s, ttl_setting="JEEVES_QUEUE_TTL_S",
    holds="one message's text, or a command's body and mentions (JSON)",
    description="text parked for the task that carries only its key (classify, respond)")

WINDOW_VECTORS = Family("window-vectors", "jeeves:window-vectors:", ("channel_id",), "hash", text=False,
    owner="pipeline/window.py", ttl=lambda: _cfg().window_max_age_s, ttl_setting="JEEVES_WINDOW_MAX_AGE_S",
    holds="wire_msg_id -> a digest of the message's text and its bundled MiniLM vector (384 float32); never the text",
    description="Tier 1's vectors of window messages, read by the offline engine's Tier 2 instead of embedding the "
    "messages again; pruned to the window's messages by each extraction run, removed with them from the window")

# --------------------------------------------------------------------------- members

MEMBERS = Family("members", "jeeves:members:", ("channel_id",), "hash", text=False,
    owner="pipeline/members.py",
    no_ttl="kept while Jeeves is in the channel; flushed when it leaves, on purge and on a personal data request",
    holds="qualified user id -> JSON role, name, handle",
    description="the channel's member cache (members live in Redis, not Postgres)")
EARLY_JOINS = Family("early-joins", "jeeves:early-joins:", ("channel_id",), "list", text=False,
    owner="wire_bridge/ingest.py", ttl=HOUR_S,
    holds="members (JSON user id, role, name, handle) of a user_joined that overtook its app_added",
    description="joins waiting for the app_added that introduces their conversation")

# --------------------------------------------------------------------------- debounced extraction

# Outlives the window by a margin so an eviction is still seen and counted.
EXTRACT_PENDING = Family("extract-pending", "jeeves:extract:pending:", ("channel_id",), "set", text=False,
    owner="pipeline/debounce.py", ttl=lambda: _cfg().window_max_age_s * 2, ttl_setting="JEEVES_WINDOW_MAX_AGE_S (x2)",
    holds="wire_msg_ids classified and not yet extracted",
    description="the extraction watermark: a run takes these and removes them once its writes committed")
EXTRACT_BURST = Family("extract-burst", "jeeves:extract:burst:", ("channel_id",), "string", text=False,
    owner="pipeline/debounce.py", ttl=lambda: _cfg().window_max_age_s * 2, ttl_setting="JEEVES_WINDOW_MAX_AGE_S (x2)",
    holds="JSON: the wire_msg_ids of the last run's open burst and its countdown",
    description="the offline engine's burst the last run left open: the next run's first messages continue it")
# A scheduled run that no worker reached by then has expired; the lock must not outlive it.
EXTRACT_LOCK = Family("extract-lock", "jeeves:extract:lock:", ("channel_id",), "string", text=False,
    owner="pipeline/debounce.py", ttl=lambda: int(_cfg().extract_debounce_s) + 120,
    ttl_setting="JEEVES_EXTRACT_DEBOUNCE_S (+120 s)",
    holds="the unix time the scheduled run is due",
    description="a run is scheduled; high-signal messages arriving meanwhile ride on it")
EXTRACT_RUNNING = Family("extract-running", "jeeves:extract:running:", ("channel_id",), "string", text=False,
    owner="pipeline/debounce.py", ttl=lambda: int(_cfg().task_lease_s), ttl_setting="JEEVES_TASK_LEASE_S",
    holds="the running run's token",
    description="a run is in progress; a second run waits for it (a lease, renewed while the run lives)")

# As long as its own task may still be delivered (it expires then); at least a classify task's time limit.
CLASSIFY_TAKEN = Family("classify-taken", "jeeves:classify:taken:", ("channel_id", "wire_msg_id"), "string", text=False,
    owner="pipeline/batch.py", ttl=lambda: max(60, _cfg().queue_ttl_s + int(_cfg().clock_skew_s)),
    ttl_setting="JEEVES_QUEUE_TTL_S + JEEVES_CLOCK_SKEW_S (at least 60 s)",
    holds='"1"; "done" once its receipt is at tier 1',
    description="a classify task's batch is classifying this message (other batches leave it out), or has "
    "classified it (its own task then does nothing, without a query)")

# --------------------------------------------------------------------------- liveness

LEASE = Family("lease", "jeeves:lease:", ("task_id",), "string", text=False,
    owner="pipeline/liveness.py", ttl=lambda: int(_cfg().task_lease_s), ttl_setting="JEEVES_TASK_LEASE_S",
    holds='"1"',
    description="a running task's lease, renewed every third of it by the process running the task")
SWEEP_LOCK = Family("sweep-lock", "jeeves:sweep:lock", (), "string", text=False,
    owner="pipeline/liveness.py", ttl=_sweep_lock_s, ttl_setting="JEEVES_SWEEP_INTERVAL_S (x0.9)",
    holds="the pid of the sweeping process",
    description="one sweeper per interval across the workers")
SWEEP_RESTORED = Family("sweep-restored", "jeeves:sweep:restored", (), "string", text=False,
    owner="pipeline/liveness.py",
    no_ttl="a counter since Redis started (Redis keeps nothing across restarts): one key, a number, no ids",
    holds="a counter: tasks the sweepers put back",
    description="exported at /metrics (jeeves_tasks_put_back)")
RECONCILE_LOCK = Family("reconcile-lock", "jeeves:sweep:reconcile", (), "string", text=False,
    owner="pipeline/liveness.py", ttl=30,
    holds="the pid of the process that published the reconcile task",
    description="one reconcile task per period across the workers (its TTL is the period)")
CLOCK = Family("clock", "jeeves:clock", (), "hash", text=False,
    owner="pipeline/liveness.py",
    no_ttl="one field per process, overwritten every sweep; /metrics shows only those seen in the last 10 minutes",
    holds='"host:pid" -> "offset_s unix_time"',
    description="each worker process's clock offset to Redis, exported at /metrics")

# --------------------------------------------------------------------------- the bridge

SEEN = Family("seen", "jeeves:seen:", ("channel_id", "event_key"), "string", text=False,
    owner="wire_bridge/ingest.py", ttl=DAY_S,
    holds='"1" (the event key: a message\'s or a command\'s wire_msg_id, or "button:" and the click\'s dedupe key)',
    description="once-only marker: a text message admitted (the webhook's dedupe, before its receipt is written)"
    ", a command, a button click")
GATE = Family("gate", "jeeves:gate:", ("channel_id",), "hash", text=False,
    owner="knowledge/gate.py", ttl=HOUR_S,
    holds='"g": the channel\'s state and epoch ("active:3", "paused:3", "secure:4", "left:3"); "t:<wire_msg_id>": '
    "a message its author deleted",
    description="the webhook's admission gate, a copy of channel_config's state, epoch and left_at and of the "
    "channel's tombstones: filled from Postgres when missing, deleted by every writer of those columns under the "
    "row's lock")
BUCKET = Family("bucket", "jeeves:bucket:", ("channel_id",), "hash", text=False,
    owner="wire_bridge/ingest.py", ttl=_bucket_fill_s, ttl_setting="JEEVES_CHANNEL_BURST / JEEVES_CHANNEL_RATE (+60 s)",
    holds="tokens, at (the token bucket's state, on Redis' clock)",
    description="fairness: the channel's token bucket (JEEVES_CHANNEL_RATE messages/s, JEEVES_CHANNEL_BURST)")
REPLIED = Family("replied", "jeeves:replied:", ("channel_id", "ref"), "string", text=False,
    owner="wire_bridge/respond.py", ttl=DAY_S,
    holds='"1" (ref: the wire_msg_id answered, or a button reply\'s reference)',
    description="a reply was sent: a redelivered respond task does not answer twice")
QUESTIONS = Family("questions", "jeeves:questions:", ("user_id",), "string", text=False,
    owner="wire_bridge/dispatch.py", ttl=60,
    holds="a counter: questions the person asked this minute",
    description="JEEVES_QUESTIONS_PER_MINUTE per person, a fixed one-minute window on Redis' clock")
# A click on a poll older than this gets a polite "lapsed".
POLL = Family("poll", "jeeves:poll:", ("poll_id",), "string", text=False,
    owner="wire_bridge/roman.py", ttl=30 * DAY_S,
    holds="JSON channel id and the poll's button ids",
    description="Roman buttons are polls answered by position: the button ids to map a position back")
# fmt: on

FAMILIES: tuple[Family, ...] = (
    CLAIM_CHECK,
    WINDOW,
    WINDOW_VECTORS,
    MEMBERS,
    EARLY_JOINS,
    EXTRACT_PENDING,
    EXTRACT_BURST,
    EXTRACT_LOCK,
    EXTRACT_RUNNING,
    CLASSIFY_TAKEN,
    LEASE,
    SWEEP_LOCK,
    SWEEP_RESTORED,
    RECONCILE_LOCK,
    CLOCK,
    SEEN,
    GATE,
    BUCKET,
    REPLIED,
    QUESTIONS,
    POLL,
)
# The families that may hold message text: what a secure channel must not keep and `jeeves audit` checks.
TEXT_FAMILIES: tuple[Family, ...] = tuple(f for f in FAMILIES if f.text)


def naming_channel(channel_id: str) -> str:
    """A SCAN MATCH pattern for every key of Jeeves' whose name holds `channel_id` (anywhere)."""
    return f"{ROOT}*{glob_escape(channel_id)}*"
