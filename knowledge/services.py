"""Every write to the knowledge tables goes through here: dedup, idempotency and guards live once."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from knowledge.models import ChannelConfig, ChannelState, MessageReceipt, PipelineCounter


def channel_accepts(channel_id: str, epoch: int) -> bool:
    """Consent check for workers: the channel is still active and still in the epoch the task was queued in."""
    return ChannelConfig.objects.filter(
        channel_id=channel_id, state=ChannelState.ACTIVE, epoch=epoch, left_at__isnull=True
    ).exists()


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


def bump_counter(channel_id: str, name: str, by: int = 1) -> None:
    updated = PipelineCounter.objects.filter(channel_id=channel_id, name=name).update(
        value=F("value") + by, updated_at=timezone.now()
    )
    if not updated:
        try:
            with transaction.atomic():
                PipelineCounter.objects.create(channel_id=channel_id, name=name, value=by)
        except IntegrityError:
            PipelineCounter.objects.filter(channel_id=channel_id, name=name).update(value=F("value") + by)
