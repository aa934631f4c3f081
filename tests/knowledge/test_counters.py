"""knowledge/counters.py on real Postgres: exact under concurrent bumps."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from knowledge import counters
from knowledge.models import PipelineCounter


@pytest.mark.django_db(transaction=True)
def test_counters_are_exact_when_bumped_concurrently():
    # Threads, each on its own connection, bump one counter (from nothing: the first bumps race to insert it).
    channel_id = "c-count@wire.example"

    def bump(n):
        try:
            counters.bump_counter(channel_id, "expired", 1 + n % 3)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(bump, range(60)))
    counter = PipelineCounter.objects.get(channel_id=channel_id, name="expired")
    assert counter.value == sum(1 + n % 3 for n in range(60))
    assert counter.updated_at is not None
