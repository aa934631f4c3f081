"""Tasks of retrieval: the Monday personal digest (beat, hourly, on the summarise queue)."""

from __future__ import annotations

from celery import shared_task

from ground.queues import Queue


@shared_task(name="retrieval.tasks.send_digests", queue=Queue.SUMMARISE.value)
def send_digests() -> None:
    """Beat, hourly: the personal digest of every subscriber whose 1:1 has just reached Monday 08:00."""
    from retrieval import digest

    digest.send_due()
