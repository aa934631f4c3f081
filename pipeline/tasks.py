"""Celery tasks of the pipeline tiers. Thin: parse arguments, check consent, call a service."""

from __future__ import annotations

import logging

from celery import shared_task

from jeeves.queues import Queue
from knowledge import services
from knowledge.models import MessageReceipt
from pipeline import claimcheck

logger = logging.getLogger(__name__)


@shared_task(name="pipeline.tasks.classify_message", queue=Queue.CLASSIFY.value)
def classify_message(channel_id: str, wire_msg_id: str, key: str, epoch: int) -> None:
    if not services.channel_accepts(channel_id, epoch):
        services.mark_receipt(channel_id, wire_msg_id, outcome=MessageReceipt.Outcome.DROPPED)
        logger.info("classify dropped: channel=%s msg=%s (state or epoch changed)", channel_id, wire_msg_id)
        return
    text = claimcheck.claim(key)
    if text is None:
        services.mark_receipt(channel_id, wire_msg_id, outcome=MessageReceipt.Outcome.EXPIRED)
        services.bump_counter(channel_id, "expired")
        logger.info("classify expired: channel=%s msg=%s", channel_id, wire_msg_id)
        return
    claimcheck.discard(key)
    services.mark_receipt(channel_id, wire_msg_id, tier=1, outcome=MessageReceipt.Outcome.ROUTINE)
