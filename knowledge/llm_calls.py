"""Model calls (`llm_calls`), their one writer: one row and one set of metrics per call, never the prompt or
the completion."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

from django.db import connection, transaction

from ground import metrics
from knowledge.models import (
    LlmCall,
)

_COLUMNS = (
    "slot", "model", "outcome", "latency_ms", "fallback_used", "attempt", "prompt_tokens", "completion_tokens",
    "cost", "channel_id",
)  # fmt: skip
# The row in one simple query (one round trip) whose commit does not wait for the WAL flush.
_UNFLUSHED = (
    "BEGIN; SELECT set_config('synchronous_commit', 'off', true); "
    f"INSERT INTO {LlmCall._meta.db_table} ({', '.join(_COLUMNS)}) "
    f"VALUES ({', '.join(f'%({c})s' for c in _COLUMNS)}); COMMIT"
)
# The row alone, for a caller that sends it in a pipeline of statements (one transaction up to its sync) after
# `SELECT set_config('synchronous_commit', 'off', true)`: see `unflushed_statements`.
_INSERT = (
    f"INSERT INTO {LlmCall._meta.db_table} ({', '.join(_COLUMNS)}) VALUES ({', '.join(f'%({c})s' for c in _COLUMNS)})"
)
UNFLUSHED_SETTING = "SELECT set_config('synchronous_commit', 'off', true)"


def record_llm_call(*, unflushed: bool = False, **call) -> None:
    """One row per model call: never the prompt or the completion. `call`: the row's fields, as `_row` names
    them (slot, model, outcome and latency_ms required).

    `unflushed`: the row's commit need not wait for the WAL flush (a crash can lose only that accounting
    row), and outside a caller's transaction it is written in one round trip (`BEGIN`, the setting, the
    `INSERT` and `COMMIT` in one simple query) instead of four.
    """
    row = _row(**call)
    held = getattr(_deferred, "rows", None)
    if held is not None:  # inside `deferred()`: written with the others when it ends
        held.append(LlmCall(**row))
    elif unflushed and not connection.in_atomic_block:
        with connection.cursor() as cur:
            cur.execute(_UNFLUSHED, row)
    elif unflushed:  # in a savepoint of the caller's transaction
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(UNFLUSHED_SETTING)
            LlmCall.objects.create(**row)
    else:
        LlmCall.objects.create(**row)
    _observe(row)


def unflushed_statements(*, slot: str, model: str, outcome: str, latency_ms: int, channel_id: str | None = None):
    """`record_llm_call(..., unflushed=True)` as two statements for a caller's pipeline (psycopg pipeline mode,
    outside a transaction: the statements up to the pipeline's sync are one transaction, whose commit then
    does not wait for the WAL flush): [(sql, params)] of the setting and the row. Its metrics are recorded
    here, as `record_llm_call` records them."""
    row = _row(slot=slot, model=model, outcome=outcome, latency_ms=latency_ms, channel_id=channel_id)
    _observe(row)
    return [(UNFLUSHED_SETTING, {}), (_INSERT, row)]


def _row(
    *,
    slot: str,
    model: str,
    outcome: str,
    latency_ms: int,
    fallback_used: bool = False,
    attempt: int = 1,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    cost: float | None = None,
    channel_id: str | None = None,
) -> dict[str, object]:
    return {
        "slot": slot,
        "model": model,
        "outcome": outcome,
        "latency_ms": max(0, int(latency_ms)),
        "fallback_used": fallback_used,
        "attempt": attempt,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "cost": Decimal(str(round(cost, 6))) if cost else None,
        "channel_id": channel_id,
    }


def _observe(row: dict[str, object]) -> None:
    metrics.llm_call(
        slot=row["slot"],
        model=row["model"],
        outcome=row["outcome"],
        latency_ms=row["latency_ms"],
        fallback_used=row["fallback_used"],
        prompt_tokens=row["prompt_tokens"],
        completion_tokens=row["completion_tokens"],
    )


_deferred = threading.local()


@contextmanager
def deferred() -> Iterator[None]:
    """The rows of the calls made inside are written together, in one INSERT, when it ends (a batch of
    classifications, pipeline/classify.py); nothing is written when it raises (the work is redone)."""
    outer = getattr(_deferred, "rows", None)
    if outer is not None:
        yield
        return
    _deferred.rows = []
    try:
        yield
        rows = _deferred.rows
    finally:
        _deferred.rows = None
    if rows:
        LlmCall.objects.bulk_create(rows)
