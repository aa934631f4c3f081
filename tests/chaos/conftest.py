"""The chaos suite's table: one row per fault, printed once at the end of the run.

pytest tests/chaos -m chaos -s      # the whole suite (under 15 minutes on this machine)
pytest                              # the default run includes the quick subset (marker `quick`)
"""

from __future__ import annotations

import pytest

ROWS: list[dict[str, object]] = []
COLUMNS = [
    ("fault", "fault"),
    ("sent", "messages sent"),
    ("expected", "records expected"),
    ("found", "found"),
    ("duplicated", "duplicated"),
    ("lost", "lost"),
    ("five_xx", "5xx"),
    ("expired", "expired"),
    ("evicted", "evicted"),
    ("canaries", "canaries found"),
]


@pytest.fixture
def record_row():
    """A test hands its tally (harness.Tally) here; the table is printed at the end of the session."""

    def record(tally) -> None:
        ROWS.append(tally.row())

    return record


def pytest_terminal_summary(terminalreporter) -> None:
    if not ROWS:
        return
    widths = [max(len(title), *(len(str(r.get(key, ""))) for r in ROWS)) for key, title in COLUMNS]
    line = " | ".join(title.ljust(w) for (_, title), w in zip(COLUMNS, widths, strict=True))
    terminalreporter.write_sep("=", "chaos: faults and what they cost")
    terminalreporter.write_line(line)
    terminalreporter.write_line("-+-".join("-" * w for w in widths))
    for row in ROWS:
        terminalreporter.write_line(
            " | ".join(str(row.get(key, "")).ljust(w) for (key, _), w in zip(COLUMNS, widths, strict=True))
        )


@pytest.fixture
def chaos_redis():
    """A Valkey of the test's own (harness.PrivateRedis): its broker and data, never the shared Redis's
    databases, stopped when the test ends however it ends."""
    from tests.chaos.harness import PrivateRedis

    server = PrivateRedis()
    try:
        yield server
    finally:
        server.stop()
