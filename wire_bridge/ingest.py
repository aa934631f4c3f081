"""Ingest: dedupe on the receipt, apply the channel's state, park the text, publish classify."""

from __future__ import annotations

import logging

from django.conf import settings

from knowledge import services
from knowledge.models import ChannelConfig
from pipeline import claimcheck
from pipeline.tasks import classify_message
from wire_bridge.events import TextMessage

logger = logging.getLogger(__name__)


def handle(event: TextMessage) -> str:
    channel, _ = ChannelConfig.objects.get_or_create(
        channel_id=event.channel_id, defaults={"organisation_id": event.conversationId.domain}
    )
    if not channel.is_active:
        return "dropped"
    if event.expiresAfterMillis is not None:
        return "ephemeral"
    if not services.record_receipt(
        channel.channel_id, event.messageId, author_id=event.sender.qualified, sent_at=event.timestamp
    ):
        return "duplicate"
    key = claimcheck.park(channel.channel_id, event.messageId, event.text)
    ttl = settings.JEEVES.queue_ttl_s
    classify_message.apply_async(
        kwargs={"channel_id": channel.channel_id, "wire_msg_id": event.messageId, "key": key, "epoch": channel.epoch},
        expires=ttl,
    )
    logger.info("queued classify: channel=%s msg=%s", channel.channel_id, event.messageId)
    return "queued"
