"""Per-channel counters (`pipeline_counters`), their one writer: what was dropped, expired, evicted or refused,
counted exactly under concurrent workers. `jeeves audit` and the dashboard read them."""

from __future__ import annotations

from django.db import connection


def bump_counter(channel_id: str, name: str, by: int = 1) -> None:
    """Add `by` to the channel's counter `name`: one atomic upsert, exact under concurrent workers."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO pipeline_counters (channel_id, name, value, updated_at) VALUES (%s, %s, %s, now())
            ON CONFLICT (channel_id, name)
            DO UPDATE SET value = pipeline_counters.value + EXCLUDED.value, updated_at = EXCLUDED.updated_at
            """,
            [channel_id, name, by],
        )
