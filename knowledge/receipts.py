"""Message receipts (`message_receipts`), their one writer: a message's ids and how far it went (tier 0
received, 1 classified, 2 extracted; its outcome), never its text.

Written by the webhook after its response (`defer_receipt`; with its Redis gate missing, at admission:
`admit_message`, one statement) or by the worker that finds none (`ensure_receipt`, `ensure_receipts`); a
command's own receipt by `record_receipt`; moved on by the tiers (`mark_receipt`, `mark_expired`,
`mark_evicted`, `mark_extracted`). Reads that only count stay with their readers.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime

import psycopg
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Case, F, Q, TextField, Value, When

from ground import metrics
from knowledge import gate
from knowledge.counters import bump_counter
from knowledge.models import ChannelState, MessageReceipt

logger = logging.getLogger(__name__)

# The webhook's admission, one statement: the gate (state, epoch, left, tombstone) under a share lock on the
# channel row, and the receipt written only when the gate is open. set_config(..., true) lasts for this
# transaction only. synchronous_commit off: a receipt lost to a crash in the next few milliseconds only
# weakens dedupe of a redelivery, which the tiers' natural keys cover. lock_timeout / statement_timeout: a
# state change holding the row, or a stalled server, fails the webhook with 503 within the backend timeout.
_ADMIT = f"""WITH gate AS (
  SELECT set_config('synchronous_commit', 'off', true), set_config('lock_timeout', %(budget)s, true),
         set_config('statement_timeout', %(budget)s, true),
         c.state, c.epoch, c.left_at IS NOT NULL AS left_channel,
         EXISTS (SELECT 1 FROM message_tombstones t WHERE t.channel_id = c.channel_id
                 AND t.wire_msg_id = %(msg)s AND t.expires_at > now()) AS forgotten,
         (SELECT coalesce(json_agg(t.wire_msg_id), '[]'::json)::text FROM message_tombstones t
          WHERE t.channel_id = c.channel_id AND t.expires_at > now()) AS tombstones
  FROM channel_config c WHERE c.channel_id = %(channel)s FOR SHARE OF c
), receipt AS (
  INSERT INTO {MessageReceipt._meta.db_table}
    (channel_id, wire_msg_id, author_id, sent_at, received_at, tier, categories, outcome)
  SELECT %(channel)s, %(msg)s, %(author)s, %(sent_at)s, now(), 0, '{{}}', %(queued)s FROM gate
  WHERE gate.state = %(active)s AND NOT gate.left_channel AND NOT gate.forgotten
  ON CONFLICT (channel_id, wire_msg_id) DO NOTHING RETURNING id
)
SELECT gate.state, gate.epoch, gate.left_channel, gate.forgotten, EXISTS (SELECT 1 FROM receipt), gate.tombstones
FROM gate"""
# On the webhook's own path the admission is a prepared statement, made once per connection (`_PREPARED`):
# the server neither parses nor plans it again. It is executed in a simple query together with BEGIN (one
# round trip), its arguments bound client-side (literals escaped by libpq) like every Django query.
_ADMIT_ARGS = ("budget", "msg", "channel", "author", "sent_at", "queued", "active")
_ADMIT_NAME = "jeeves_admit"
_PREPARE_ADMIT = f"PREPARE {_ADMIT_NAME} AS " + re.sub(
    r"%\((\w+)\)s", lambda m: f"${_ADMIT_ARGS.index(m.group(1)) + 1}", _ADMIT
)
_PREPARED: weakref.WeakSet[psycopg.Connection] = weakref.WeakSet()


@contextmanager
def admit_message(
    channel_id: str, wire_msg_id: str, *, author_id: str, sent_at: datetime, commit_unread: bool = False
) -> Iterator[Admission]:
    """Admit one message: yields an `Admission`, its outcome unknown | dropped | forgotten | duplicate | admitted.

    Holds a share lock on the channel row until the block ends, so a state change (an UPDATE)
    waits for admissions in flight and later ones see the new state: a secure-mode flush that
    runs after the change commits catches everything admitted before it. The receipt (no
    content) is the dedupe: a redelivered message is a `duplicate`. The block commits when it
    ends and rolls back when it raises (a failed publish leaves no receipt).

    Two round trips, this being the webhook's hot path: `BEGIN` and the admission statement in one simple
    query (the statement prepared once per connection, so the server neither parses nor plans it
    again), then `COMMIT` or `ROLLBACK`. It runs on the connection's own libpq handle (psycopg's
    `pgconn`: the query's literals escaped by libpq, sent with `PQexec`; psycopg's cursor machinery
    cost more CPU than the rest of the admission), not through a Django cursor, so nothing in the
    block may use the ORM (this transaction is outside Django's bookkeeping), and Django's per-request
    health check (a `SELECT 1` round trip before the first cursor) is not run: a kept connection found
    broken by the admission itself (Postgres restarted since) is replaced and the admission sent once
    more, as nothing was written on it. Inside a caller's transaction (a test's) it runs in a savepoint
    instead.

    `commit_unread` (the webhook's): an admitted message's `COMMIT` is sent but its answer not waited for;
    `settle()` reads it, after the response has gone (Django's `request_finished`) or before the
    connection's next admission, whichever comes first, and nothing else may use the connection
    before then. The server runs the `COMMIT` as soon as it reads it, whoever waits: the share lock
    lasts as long as before, and a state change waiting on it goes on as soon. A `COMMIT` that fails
    after the answer (the connection lost in between) leaves what a web process that died after the
    publish leaves: a task whose worker writes the receipt (`ensure_receipt`), so nothing is lost.
    """
    params = {
        "budget": str(int(settings.JEEVES.backend_timeout_s * 1000)),
        "msg": wire_msg_id,
        "channel": channel_id,
        "author": author_id,
        "sent_at": sent_at,
        "queued": MessageReceipt.Outcome.QUEUED,
        "active": ChannelState.ACTIVE,
    }
    if connection.in_atomic_block:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_ADMIT, params)
            yield _admission(cursor.fetchone())
        return
    with connection.wrap_database_errors:
        settle()
        pg, row = _begin_and_admit(params)
    admission = _admission(row)
    try:
        yield admission
    except BaseException:
        _rollback(pg)
        raise
    with connection.wrap_database_errors:
        if commit_unread and admission.outcome == "admitted":
            pg.pgconn.send_query(b"COMMIT")
            _UNREAD.add(pg)
        else:
            _exec(pg, b"COMMIT", psycopg.pq.ExecStatus.COMMAND_OK)


# Connections whose admission's COMMIT was sent and whose answer is not read yet (`admit_message(commit_unread=True)`).
_UNREAD: weakref.WeakSet[psycopg.Connection] = weakref.WeakSet()


# The receipts of messages the webhook admitted in Redis (wire_bridge/ingest.py), written after the response: one
# statement each, sent in one simple query with `synchronous_commit` off (as the admission's) and read at the next
# request's start. ON CONFLICT: the classify worker may have written it first (`ensure_receipt`); a tombstone
# committed meanwhile keeps it out.
_RECEIPT = f"""INSERT INTO {MessageReceipt._meta.db_table}
  (channel_id, wire_msg_id, author_id, sent_at, received_at, tier, categories, outcome)
SELECT %(channel)s, %(msg)s, %(author)s, %(sent_at)s, %(received_at)s, 0, '{{}}', %(queued)s
WHERE NOT EXISTS (SELECT 1 FROM message_tombstones t WHERE t.channel_id = %(channel)s AND t.wire_msg_id = %(msg)s
                  AND t.expires_at > now())
ON CONFLICT (channel_id, wire_msg_id) DO NOTHING"""
_RECEIPT_ARGS = ("channel", "msg", "author", "sent_at", "received_at", "queued")


class _Deferred(threading.local):
    def __init__(self) -> None:
        self.in_request = False  # between Django's request_started and request_finished
        self.receipts: list[dict] = []
        self.since = 0.0  # when the oldest receipt not sent yet was deferred
        self.failed_at = -60.0  # when sending receipts last failed (Postgres away: not tried again for a while)


_deferred = _Deferred()
# The paths whose requests touch the database only through `admit_message` or after `settle()` (wire_bridge/ingest.py):
# a request there starts without waiting for the previous request's answers.
UNWAITED_PATHS = frozenset({"/wire/events"})
# Receipts wait while the previous ones are still being written, up to this many or this long.
_DEFER_MAX, _DEFER_MAX_S = 64, 1.0
# After a failed send, receipts are left to the classify worker for this long.
_RETRY_AFTER_S = 5.0


def defer_receipt(
    channel_id: str, wire_msg_id: str, *, author_id: str | None, sent_at: datetime | None, received_at: datetime
) -> None:
    """Write the receipt of a message the webhook admitted in Redis: after the response when in a request (sent by
    `request_finished`, its answer read when Postgres has given it), at once otherwise (in a caller's
    transaction, a test's, or outside a request). Until it lands the webhook's dedupe is Redis' (`keys.SEEN`,
    a day; its gate, filled from Postgres, lives an hour), and a classify worker that gets there first writes
    it (`ensure_receipt`), as it does when a web process dies before sending it."""
    params = {
        "channel": channel_id,
        "msg": wire_msg_id,
        "author": author_id,
        "sent_at": sent_at,
        "received_at": received_at,
        "queued": MessageReceipt.Outcome.QUEUED,
    }
    if _deferred.in_request and not connection.in_atomic_block:
        if not _deferred.receipts:
            _deferred.since = time.monotonic()
        _deferred.receipts.append(params)
        return
    settle()
    with connection.cursor() as cursor:
        cursor.execute(_RECEIPT, params)


def request_started(environ: dict | None = None, **_signal: object) -> None:
    """Django's `request_started`: the answers the previous request left unread are read first, so the
    connection is free; on the webhook's path only those already there (the rest when it needs the connection)."""
    settle(block=(environ or {}).get("PATH_INFO") not in UNWAITED_PATHS)
    _deferred.in_request = True


def request_finished(**_signal: object) -> None:
    """Django's `request_finished` (the response has gone): the answers already there are read, then the deferred
    receipts are sent in one query (its answer left to `settle`). While earlier ones are still being written they
    wait, up to `_DEFER_MAX` receipts or `_DEFER_MAX_S` seconds."""
    _deferred.in_request = False
    free = settle(block=False)
    pending = _deferred.receipts
    if not pending:
        return
    if not free:
        if len(pending) < _DEFER_MAX and time.monotonic() - _deferred.since < _DEFER_MAX_S:
            return
        settle()
    _deferred.receipts = []
    if time.monotonic() - _deferred.failed_at < _RETRY_AFTER_S:
        return  # Postgres was away a moment ago: not a connect timeout after every answer; the worker writes them
    try:
        with connection.wrap_database_errors:
            connection.ensure_connection()
            pg = connection.connection
            escape = psycopg.pq.Escaping(pg.pgconn).escape_literal
            statements = [
                _RECEIPT_LITERAL % {k.encode(): _literal(escape, p[k]) for k in _RECEIPT_ARGS} for p in pending
            ]
            pg.pgconn.send_query(b"BEGIN; SET LOCAL synchronous_commit TO off; " + b"; ".join(statements) + b"; COMMIT")
            _UNREAD.add(pg)
    except Exception as exc:
        _deferred.failed_at = time.monotonic()
        logger.warning("receipts after the response not sent (%s); the worker writes them", type(exc).__name__)


_RECEIPT_LITERAL = re.sub(r"%\((\w+)\)s", r"%(\1)b", _RECEIPT).encode()


def _literal(escape, value: object) -> bytes:
    if value is None:
        return b"NULL"
    return escape((value.isoformat() if isinstance(value, datetime) else str(value)).encode())


def settle(block: bool = True) -> bool:
    """Read the answers left unread on this thread's connection: the admission's COMMIT
    (`admit_message(commit_unread=True)`) or the deferred receipts (`request_finished`); with `block` False only
    those Postgres has already sent. True when none is left unread. A failure is logged (its type): the classify
    worker writes the receipt."""
    pg = connection.connection
    if pg is None or pg not in _UNREAD:
        return True
    failed = None
    try:
        while True:
            if not block:
                pg.pgconn.consume_input()
                if pg.pgconn.is_busy():
                    return False
            result = pg.pgconn.get_result()
            if result is None:
                break
            if result.status != psycopg.pq.ExecStatus.COMMAND_OK and failed is None:
                failed = psycopg.errors.error_from_result(result, encoding=pg.info.encoding)
    except psycopg.Error as exc:
        failed = exc
    _UNREAD.discard(pg)
    if failed is not None:
        if _lost(pg) and not connection.in_atomic_block:
            # The server dropped the connection before its answers came: replaced, not left closed or busy for
            # the next user (Django checks a kept connection only when a request starts).
            with suppress(Exception):
                connection.close()
        else:
            _rollback(pg)  # a deferred receipt's failed statement leaves its transaction open
        # After the publish: the classify worker writes the receipt (ensure_receipt); a broken connection is
        # replaced by the next admission.
        logger.warning(
            "admission: COMMIT or receipt after the publish failed (%s); the worker writes the receipt",
            type(failed).__name__,
        )
    return True


def _begin_and_admit(params: dict) -> tuple[psycopg.Connection, tuple | None]:
    """`BEGIN` and the admission in one round trip on Django's connection; (its psycopg connection, the row)."""
    for attempt in (1, 2):
        kept = connection.connection is not None
        connection.ensure_connection()
        pg = connection.connection
        try:
            if pg not in _PREPARED:  # this connection's first admission (a round trip of its own, once)
                pg.execute(_PREPARE_ADMIT)
                _PREPARED.add(pg)
            result = _exec(pg, _begin_and_admit_query(pg, params), psycopg.pq.ExecStatus.TUPLES_OK)
            if not result.ntuples:
                return pg, None
            state, epoch, left, forgotten, written, tombs = (result.get_value(0, i) for i in range(6))
            return pg, (state.decode(), int(epoch), left == b"t", forgotten == b"t", written == b"t", tombs.decode())
        except psycopg.OperationalError:
            if attempt == 1 and kept and (pg.broken or pg.closed):
                connection.close()  # a kept connection the server has dropped: connect afresh, once
                continue
            _rollback(pg)
            raise
        except BaseException:
            _rollback(pg)
            raise
    raise AssertionError("unreachable")


def _begin_and_admit_query(pg: psycopg.Connection, params: dict) -> bytes:
    """`BEGIN; EXECUTE jeeves_admit(...)` with the arguments as literals escaped by libpq for this connection."""
    escape = psycopg.pq.Escaping(pg.pgconn).escape_literal
    args = []
    for name in _ADMIT_ARGS:
        value = params[name]
        if value is None:
            args.append(b"NULL")
        else:
            args.append(escape((value.isoformat() if isinstance(value, datetime) else str(value)).encode()))
    return b"BEGIN; EXECUTE " + _ADMIT_NAME.encode() + b"(" + b", ".join(args) + b")"


def _exec(pg: psycopg.Connection, query: bytes, expected: psycopg.pq.ExecStatus) -> psycopg.pq.abc.PGresult:
    """One simple query on the libpq connection (the result of its last statement), errors raised as psycopg's."""
    result = pg.pgconn.exec_(query)
    if result.status == expected:
        return result
    if pg.pgconn.status == psycopg.pq.ConnStatus.BAD:
        message = pg.pgconn.get_error_message() or "the connection to the server was lost"
        raise psycopg.OperationalError(message)
    raise psycopg.errors.error_from_result(result, encoding=pg.info.encoding)


def _lost(pg: psycopg.Connection) -> bool:
    """Is `pg` closed, broken, still busy with answers, or in no known transaction state?"""
    return (
        pg.closed
        or pg.broken
        or pg.pgconn.status != psycopg.pq.ConnStatus.OK
        or pg.pgconn.is_busy()
        or pg.info.transaction_status in (psycopg.pq.TransactionStatus.UNKNOWN, psycopg.pq.TransactionStatus.ACTIVE)
    )


def _rollback(pg: psycopg.Connection) -> None:
    """End a transaction left open by an error; the error being raised is the one to report."""
    if not pg.closed and pg.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        with suppress(psycopg.Error):
            pg.execute("ROLLBACK")


@dataclass(frozen=True)
class Admission:
    """What `admit_message` decided, and what the webhook's Redis gate is filled with (knowledge/gate.py)."""

    outcome: str  # unknown | dropped | forgotten | duplicate | admitted
    epoch: int
    gate: str = ""  # the gate's value for the row read ("" for an unknown channel)
    tombstones: tuple[str, ...] = ()  # the channel's deleted messages, alive


def _admission(row: tuple | None) -> Admission:
    if row is None:
        return Admission("unknown", 0)
    state, epoch, left, forgotten, written, tombs = row
    fill = {"gate": gate.value(state, epoch, bool(left)), "tombstones": tuple(json.loads(tombs))}
    if state != ChannelState.ACTIVE or left:
        return Admission("dropped", epoch, **fill)
    if forgotten:
        return Admission("forgotten", epoch, **fill)
    return Admission("admitted" if written else "duplicate", epoch, **fill)


def record_receipt(channel_id: str, wire_msg_id: str, *, author_id: str | None, sent_at) -> bool:
    """Record that a message arrived. False when it was seen before (a redelivery): ignore it."""
    try:
        with transaction.atomic():
            MessageReceipt.objects.create(
                channel_id=channel_id, wire_msg_id=wire_msg_id, author_id=author_id, sent_at=sent_at
            )
    except IntegrityError:
        return False
    return True


def ensure_receipt(channel_id: str, wire_msg_id: str, *, author_id: str | None, sent_at) -> tuple[int, str]:
    """The message's (tier, outcome), writing its receipt first when the bridge published the task but
    died before committing the receipt (wire_bridge/ingest.py publishes first).

    The insert waits while the bridge's transaction holding the same receipt is still open, so the
    answer is the committed state: the bridge's receipt, or this one when the bridge rolled back.
    """
    MessageReceipt.objects.bulk_create(
        [MessageReceipt(channel_id=channel_id, wire_msg_id=wire_msg_id, author_id=author_id, sent_at=sent_at)],
        ignore_conflicts=True,
    )
    return (
        MessageReceipt.objects.filter(channel_id=channel_id, wire_msg_id=wire_msg_id)
        .values_list("tier", "outcome")
        .get()
    )


def ensure_receipts(messages: Sequence[tuple[str, str, str | None, str | None]]) -> None:
    """`ensure_receipt`'s write for several (channel id, message id, author id, ISO sent_at), in one statement."""
    if messages:
        MessageReceipt.objects.bulk_create(
            [
                MessageReceipt(
                    channel_id=c, wire_msg_id=m, author_id=a, sent_at=datetime.fromisoformat(t) if t else None
                )
                for c, m, a, t in messages
            ],
            ignore_conflicts=True,
        )


def receipt_state(channel_id: str, wire_msg_id: str) -> tuple[int, str] | None:
    """The message's committed (tier, outcome), or None when it has no receipt (yet)."""
    return (
        MessageReceipt.objects.filter(channel_id=channel_id, wire_msg_id=wire_msg_id)
        .values_list("tier", "outcome")
        .first()
    )


def mark_expired(channel_id: str, wire_msg_id: str) -> bool:
    """The message's text expired before it was classified: mark and count it, once.

    Only a receipt still waiting at tier 0 moves, so a redelivered copy of a task whose first copy
    classified the message (and discarded its text) is not counted as expired.
    """
    with transaction.atomic():  # a reader never sees the receipt expired before it is counted
        moved = MessageReceipt.objects.filter(
            channel_id=channel_id, wire_msg_id=wire_msg_id, tier=0, outcome=MessageReceipt.Outcome.QUEUED
        ).update(outcome=MessageReceipt.Outcome.EXPIRED)
        if moved:
            bump_counter(channel_id, "expired")
    if moved:
        metrics.CLAIM_CHECK_EXPIRED.inc()
    return bool(moved)


def receipt_tier(channel_id: str, wire_msg_id: str) -> int:
    """How far the message went (0 received, 1 classified, 2 extracted); -1 when there is no receipt."""
    tier = (
        MessageReceipt.objects.filter(channel_id=channel_id, wire_msg_id=wire_msg_id)
        .values_list("tier", flat=True)
        .first()
    )
    return -1 if tier is None else tier


def mark_receipt(
    channel_id: str,
    wire_msg_id: str,
    *,
    outcome: str,
    tier: int | None = None,
    categories: list[str] | None = None,
) -> None:
    fields: dict[str, object] = {"outcome": outcome}
    if tier is not None:
        fields["tier"] = tier
    if categories is not None:
        fields["categories"] = categories
    MessageReceipt.objects.filter(channel_id=channel_id, wire_msg_id=wire_msg_id).update(**fields)


def mark_classified(rows: Sequence[tuple[str, str, str, list[str]]]) -> None:
    """Tier 1 is done for these (channel id, message id, outcome, categories): each receipt moves to tier 1
    with its outcome and categories, in one statement (what `mark_receipt` does for one)."""
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE message_receipts r SET outcome = v.outcome, tier = 1,"
            " categories = ARRAY(SELECT jsonb_array_elements_text(v.categories::jsonb))"
            " FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[])"
            " AS v(channel_id, wire_msg_id, outcome, categories)"
            " WHERE r.channel_id = v.channel_id AND r.wire_msg_id = v.wire_msg_id",
            [
                [r[0] for r in rows],
                [r[1] for r in rows],
                [str(r[2]) for r in rows],
                [json.dumps(list(r[3])) for r in rows],
            ],
        )


def mark_evicted(channel_id: str, wire_msg_ids: Iterable[str]) -> int:
    """Messages still waiting for extraction whose text left the window first: marked evicted and
    counted (never silent). How many moved."""
    evicted = MessageReceipt.objects.filter(
        channel_id=channel_id, wire_msg_id__in=list(wire_msg_ids), outcome=MessageReceipt.Outcome.PENDING_EXTRACT
    ).update(outcome=MessageReceipt.Outcome.EVICTED)
    if evicted:
        bump_counter(channel_id, "evicted_unextracted", evicted)
    return evicted


def mark_extracted(channel_id: str, wire_msg_ids: Iterable[str]) -> None:
    """An extraction run over these messages finished: each is at tier 2, those waiting for it extracted."""
    # One statement: the waiting ones extracted, every one of them (waiting or below tier 2) at tier 2.
    pending = MessageReceipt.Outcome.PENDING_EXTRACT
    MessageReceipt.objects.filter(
        Q(outcome=pending) | Q(tier__lt=2), channel_id=channel_id, wire_msg_id__in=list(wire_msg_ids)
    ).update(
        outcome=Case(
            When(outcome=pending, then=Value(MessageReceipt.Outcome.EXTRACTED)),
            default=F("outcome"),
            output_field=TextField(),
        ),
        tier=2,
    )
