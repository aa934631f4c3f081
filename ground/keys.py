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

DAY_S = 24 * 3600


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
    ttl: int | Callable[[], float] | None  # seconds; a callable reads the settings
    ttl_setting: str = ""  # the setting the TTL follows, when it is configurable
    no_ttl: str = ""  # why the keys have no TTL (required when ttl is None)

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


# --------------------------------------------------------------------------- transient text

WINDOW = Family(
    name="window",
    prefix="jeeves:window:",
    parts=("channel_id",),
    type="list",
    text=True,
    holds="the channel's recent messages as JSON (id, author, timestamp, text, mentions, quoted id, arrival)",
    owner="pipeline/window.py",
    description="the sliding window: the only place raw text rests; trimmed to JEEVES_WINDOW_SIZE and by age",
    ttl=lambda: _cfg().window_max_age_s,
    ttl_setting="JEEVES_WINDOW_MAX_AGE_S",
)
CLAIM_CHECK = Family(
    name="claim-check",
    prefix="jeeves:msg:",
    parts=("channel_id", "wire_msg_id"),
    type="string",
    text=True,
    holds="one message's text, or a command's body and mentions (JSON)",
    owner="pipeline/claimcheck.py",
    description="text parked for the task that carries only its key (classify, respond)",
    ttl=lambda: _cfg().queue_ttl_s,
    ttl_setting="JEEVES_QUEUE_TTL_S",
)

WINDOW_VECTORS = Family(
    name="window-vectors",
    prefix="jeeves:window-vectors:",
    parts=("channel_id",),
    type="hash",
    text=False,
    holds="wire_msg_id -> a digest of the message's text and its bundled MiniLM vector (384 float32); never the text",
    owner="pipeline/window.py",
    description="Tier 1's vectors of window messages, read by the offline engine's Tier 2 instead of embedding the "
    "messages again; pruned to the window's messages by each extraction run, removed with them from the window",
    ttl=lambda: _cfg().window_max_age_s,
    ttl_setting="JEEVES_WINDOW_MAX_AGE_S",
)

# --------------------------------------------------------------------------- members

MEMBERS = Family(
    name="members",
    prefix="jeeves:members:",
    parts=("channel_id",),
    type="hash",
    text=False,
    holds="qualified user id -> JSON role, name, handle",
    owner="pipeline/members.py",
    description="the channel's member cache (members live in Redis, not Postgres)",
    ttl=None,
    no_ttl="kept while Jeeves is in the channel; flushed when it leaves, on purge and on a personal data request",
)
EARLY_JOINS = Family(
    name="early-joins",
    prefix="jeeves:early-joins:",
    parts=("channel_id",),
    type="list",
    text=False,
    holds="members (JSON user id, role, name, handle) of a user_joined that overtook its app_added",
    owner="wire_bridge/ingest.py",
    description="joins waiting for the app_added that introduces their conversation",
    ttl=3600,
)

# --------------------------------------------------------------------------- debounced extraction

EXTRACT_PENDING = Family(
    name="extract-pending",
    prefix="jeeves:extract:pending:",
    parts=("channel_id",),
    type="set",
    text=False,
    holds="wire_msg_ids classified and not yet extracted",
    owner="pipeline/debounce.py",
    description="the extraction watermark: a run takes these and removes them once its writes committed",
    # Outlives the window by a margin so an eviction is still seen and counted.
    ttl=lambda: _cfg().window_max_age_s * 2,
    ttl_setting="JEEVES_WINDOW_MAX_AGE_S (x2)",
)
EXTRACT_BURST = Family(
    name="extract-burst",
    prefix="jeeves:extract:burst:",
    parts=("channel_id",),
    type="string",
    text=False,
    holds="JSON: the wire_msg_ids of the last run's open burst and its countdown",
    owner="pipeline/debounce.py",
    description="the offline engine's burst the last run left open: the next run's first messages continue it",
    ttl=lambda: _cfg().window_max_age_s * 2,
    ttl_setting="JEEVES_WINDOW_MAX_AGE_S (x2)",
)
EXTRACT_LOCK = Family(
    name="extract-lock",
    prefix="jeeves:extract:lock:",
    parts=("channel_id",),
    type="string",
    text=False,
    holds="the unix time the scheduled run is due",
    owner="pipeline/debounce.py",
    description="a run is scheduled; high-signal messages arriving meanwhile ride on it",
    # A scheduled run that no worker reached by then has expired; the lock must not outlive it.
    ttl=lambda: int(_cfg().extract_debounce_s) + 120,
    ttl_setting="JEEVES_EXTRACT_DEBOUNCE_S (+120 s)",
)
EXTRACT_RUNNING = Family(
    name="extract-running",
    prefix="jeeves:extract:running:",
    parts=("channel_id",),
    type="string",
    text=False,
    holds="the running run's token",
    owner="pipeline/debounce.py",
    description="a run is in progress; a second run waits for it (a lease, renewed while the run lives)",
    ttl=lambda: int(_cfg().task_lease_s),
    ttl_setting="JEEVES_TASK_LEASE_S",
)

CLASSIFY_TAKEN = Family(
    name="classify-taken",
    prefix="jeeves:classify:taken:",
    parts=("channel_id", "wire_msg_id"),
    type="string",
    text=False,
    holds='"1"; "done" once its receipt is at tier 1',
    owner="pipeline/batch.py",
    description="a classify task's batch is classifying this message (other batches leave it out), or has "
    "classified it (its own task then does nothing, without a query)",
    # As long as its own task may still be delivered (it expires then); at least a classify task's time limit.
    ttl=lambda: max(60, _cfg().queue_ttl_s + int(_cfg().clock_skew_s)),
    ttl_setting="JEEVES_QUEUE_TTL_S + JEEVES_CLOCK_SKEW_S (at least 60 s)",
)

# --------------------------------------------------------------------------- liveness

LEASE = Family(
    name="lease",
    prefix="jeeves:lease:",
    parts=("task_id",),
    type="string",
    text=False,
    holds='"1"',
    owner="pipeline/liveness.py",
    description="a running task's lease, renewed every third of it by the process running the task",
    ttl=lambda: int(_cfg().task_lease_s),
    ttl_setting="JEEVES_TASK_LEASE_S",
)
SWEEP_LOCK = Family(
    name="sweep-lock",
    prefix="jeeves:sweep:lock",
    parts=(),
    type="string",
    text=False,
    holds="the pid of the sweeping process",
    owner="pipeline/liveness.py",
    description="one sweeper per interval across the workers",
    # Set in milliseconds: 90 % of the interval, at least 100 ms.
    ttl=lambda: max(int(_cfg().sweep_interval_s * 900), 100) / 1000,
    ttl_setting="JEEVES_SWEEP_INTERVAL_S (x0.9)",
)
SWEEP_RESTORED = Family(
    name="sweep-restored",
    prefix="jeeves:sweep:restored",
    parts=(),
    type="string",
    text=False,
    holds="a counter: tasks the sweepers put back",
    owner="pipeline/liveness.py",
    description="exported at /metrics (jeeves_tasks_put_back)",
    ttl=None,
    no_ttl="a counter since Redis started (Redis keeps nothing across restarts): one key, a number, no ids",
)
RECONCILE_LOCK = Family(
    name="reconcile-lock",
    prefix="jeeves:sweep:reconcile",
    parts=(),
    type="string",
    text=False,
    holds="the pid of the process that published the reconcile task",
    owner="pipeline/liveness.py",
    description="one reconcile task per period across the workers (its TTL is the period)",
    ttl=30,
)
CLOCK = Family(
    name="clock",
    prefix="jeeves:clock",
    parts=(),
    type="hash",
    text=False,
    holds='"host:pid" -> "offset_s unix_time"',
    owner="pipeline/liveness.py",
    description="each worker process's clock offset to Redis, exported at /metrics",
    ttl=None,
    no_ttl="one field per process, overwritten every sweep; /metrics shows only those seen in the last 10 minutes",
)

# --------------------------------------------------------------------------- the bridge

SEEN = Family(
    name="seen",
    prefix="jeeves:seen:",
    parts=("channel_id", "event_key"),
    type="string",
    text=False,
    holds='"1" (the event key: a message\'s or a command\'s wire_msg_id, or "button:" and the click\'s dedupe key)',
    owner="wire_bridge/ingest.py",
    description="once-only marker: a text message admitted (the webhook's dedupe, before its receipt is written)"
    ", a command, a button click",
    ttl=DAY_S,
)
GATE = Family(
    name="gate",
    prefix="jeeves:gate:",
    parts=("channel_id",),
    type="hash",
    text=False,
    holds='"g": the channel\'s state and epoch ("active:3", "paused:3", "secure:4", "left:3"); "t:<wire_msg_id>": '
    "a message its author deleted",
    owner="knowledge/gate.py",
    description="the webhook's admission gate, a copy of channel_config's state, epoch and left_at and of the "
    "channel's tombstones: filled from Postgres when missing, deleted by every writer of those columns under the "
    "row's lock",
    ttl=3600,
)
BUCKET = Family(
    name="bucket",
    prefix="jeeves:bucket:",
    parts=("channel_id",),
    type="hash",
    text=False,
    holds="tokens, at (the token bucket's state, on Redis' clock)",
    owner="wire_bridge/ingest.py",
    description="fairness: the channel's token bucket (JEEVES_CHANNEL_RATE messages/s, JEEVES_CHANNEL_BURST)",
    # The time a bucket takes to fill, and a minute (the bucket is only used when the rate is above 0).
    ttl=lambda: math.ceil(_cfg().channel_burst / _cfg().channel_rate) + 60 if _cfg().channel_rate > 0 else 60,
    ttl_setting="JEEVES_CHANNEL_BURST / JEEVES_CHANNEL_RATE (+60 s)",
)
REPLIED = Family(
    name="replied",
    prefix="jeeves:replied:",
    parts=("channel_id", "ref"),
    type="string",
    text=False,
    holds='"1" (ref: the wire_msg_id answered, or a button reply\'s reference)',
    owner="wire_bridge/respond.py",
    description="a reply was sent: a redelivered respond task does not answer twice",
    ttl=DAY_S,
)
QUESTIONS = Family(
    name="questions",
    prefix="jeeves:questions:",
    parts=("user_id",),
    type="string",
    text=False,
    holds="a counter: questions the person asked this minute",
    owner="wire_bridge/dispatch.py",
    description="JEEVES_QUESTIONS_PER_MINUTE per person, a fixed one-minute window on Redis' clock",
    ttl=60,
)
POLL = Family(
    name="poll",
    prefix="jeeves:poll:",
    parts=("poll_id",),
    type="string",
    text=False,
    holds="JSON channel id and the poll's button ids",
    owner="wire_bridge/roman.py",
    description="Roman buttons are polls answered by position: the button ids to map a position back",
    # A click on a poll older than this gets a polite "lapsed".
    ttl=30 * DAY_S,
)

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
