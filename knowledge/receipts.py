"""Message receipts (`message_receipts`), their one writer: a message's ids and how far it went (tier 0
received, 1 classified, 2 extracted; its outcome), never its text.

Written at admission (`admit_message`, the webhook's one statement) or by the worker that finds none
(`ensure_receipt`); a command's own receipt by `record_receipt`; moved on by the tiers (`mark_receipt`,
`mark_expired`, `mark_evicted`, `mark_extracted`). Reads that only count stay with their readers.
"""

from __future__ import annotations

import json
import logging
import re
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime

import psycopg
from django.conf import settings
from django.db import IntegrityError, connection, transaction

from ground import metrics
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
                 AND t.wire_msg_id = %(msg)s AND t.expires_at > now()) AS forgotten
  FROM channel_config c WHERE c.channel_id = %(channel)s FOR SHARE OF c
), receipt AS (
  INSERT INTO {MessageReceipt._meta.db_table}
    (channel_id, wire_msg_id, author_id, sent_at, received_at, tier, categories, outcome)
  SELECT %(channel)s, %(msg)s, %(author)s, %(sent_at)s, now(), 0, '{{}}', %(queued)s FROM gate
  WHERE gate.state = %(active)s AND NOT gate.left_channel AND NOT gate.forgotten
  ON CONFLICT (channel_id, wire_msg_id) DO NOTHING RETURNING id
)
SELECT gate.state, gate.epoch, gate.left_channel, gate.forgotten, EXISTS (SELECT 1 FROM receipt) FROM gate"""
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
) -> Iterator[tuple[str, int]]:
    """Admit one message: yields (outcome, epoch) with outcome unknown | dropped | forgotten | duplicate | admitted.

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
        if commit_unread and admission[0] == "admitted":
            pg.pgconn.send_query(b"COMMIT")
            _UNREAD.add(pg)
        else:
            _exec(pg, b"COMMIT", psycopg.pq.ExecStatus.COMMAND_OK)


# Connections whose admission's COMMIT was sent and whose answer is not read yet (`admit_message(commit_unread=True)`).
_UNREAD: weakref.WeakSet[psycopg.Connection] = weakref.WeakSet()


def settle(**_signal: object) -> None:
    """Read the answer of this thread's connection's COMMIT left unread by `admit_message(commit_unread=True)`,
    if any (a receiver of Django's `request_finished`, knowledge/apps.py). A failed one is logged (its type)."""
    pg = connection.connection
    if pg is None or pg not in _UNREAD:
        return
    _UNREAD.discard(pg)
    failed = None
    try:
        while (result := pg.pgconn.get_result()) is not None:
            if result.status != psycopg.pq.ExecStatus.COMMAND_OK and failed is None:
                failed = psycopg.errors.error_from_result(result, encoding=pg.info.encoding)
    except psycopg.Error as exc:
        failed = exc
    if failed is not None:
        # After the publish: the classify worker writes the receipt (ensure_receipt); a broken connection is
        # replaced by the next admission.
        logger.warning(
            "admission: COMMIT after the publish failed (%s); the worker writes the receipt", type(failed).__name__
        )


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
            state, epoch, left, forgotten, written = (result.get_value(0, i) for i in range(5))
            return pg, (state.decode(), int(epoch), left == b"t", forgotten == b"t", written == b"t")
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


def _rollback(pg: psycopg.Connection) -> None:
    """End a transaction left open by an error; the error being raised is the one to report."""
    if not pg.closed and pg.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        with suppress(psycopg.Error):
            pg.execute("ROLLBACK")


def _admission(row: tuple | None) -> tuple[str, int]:
    if row is None:
        return "unknown", 0
    state, epoch, left, forgotten, written = row
    if state != ChannelState.ACTIVE or left:
        return "dropped", epoch
    if forgotten:
        return "forgotten", epoch
    return ("admitted" if written else "duplicate"), epoch


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
    receipts = MessageReceipt.objects.filter(channel_id=channel_id, wire_msg_id__in=list(wire_msg_ids))
    receipts.filter(outcome=MessageReceipt.Outcome.PENDING_EXTRACT).update(
        outcome=MessageReceipt.Outcome.EXTRACTED, tier=2
    )
    receipts.filter(tier__lt=2).update(tier=2)
