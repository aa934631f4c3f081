"""The thin end-to-end path over the real stack: HTTP POST → receipt + classify task → a worker consumes it."""

from __future__ import annotations

import uuid

import httpx
import pytest
from django.test import override_settings

from knowledge.models import MessageReceipt
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _text_event(message_id: str, text: str) -> dict:
    conv = {"id": str(uuid.uuid4()), "domain": "wire.example"}
    return {
        "eventId": str(uuid.uuid4()),
        "type": "text_message",
        "conversationId": conv,
        "sender": {"id": str(uuid.uuid4()), "domain": "wire.example"},
        "messageId": message_id,
        "timestamp": "2026-03-02T09:20:00Z",
        "text": text,
        "mentions": [],
        "quotedMessageId": None,
        "expiresAfterMillis": None,
    }


def test_text_event_reaches_a_worker(live_server, celery_worker_process, redis_client, settings):
    secret = "s3cret-for-tests"
    jeeves = settings.JEEVES.__class__(**{**settings.JEEVES.__dict__, "wire_secret": secret})
    with override_settings(JEEVES=jeeves):
        response = httpx.post(
            f"{live_server.url}/wire/events",
            json=_text_event("m-thin-1", "let's go with the queue for retries"),
            headers={"Authorization": f"Bearer {secret}"},
        )
    assert response.status_code == 200, response.text
    receipt = MessageReceipt.objects.get(wire_msg_id="m-thin-1")
    assert receipt.tier == 0

    # The worker process consumed the task: the receipt moved on and the claim-check key is gone.
    wait_for(lambda: MessageReceipt.objects.get(pk=receipt.pk).tier == 1, timeout=60)
    # The text is discarded once the task has routed the message, a moment after the receipt moved.
    wait_for(lambda: not redis_client.keys(f"jeeves:msg:*:{receipt.wire_msg_id}"), timeout=10)
    assert "pipeline.tasks.classify_message" in celery_worker_process.log()


def test_classify_task_is_published_with_expires_and_no_text(live_server, settings):
    from celery.signals import before_task_publish

    published: list[tuple[dict, object]] = []

    def capture(sender=None, headers=None, body=None, **kwargs):
        published.append((headers, body))

    before_task_publish.connect(capture, weak=False)
    secret = "s3cret-for-tests"
    jeeves = settings.JEEVES.__class__(**{**settings.JEEVES.__dict__, "wire_secret": secret})
    try:
        with override_settings(JEEVES=jeeves):
            httpx.post(
                f"{live_server.url}/wire/events",
                json=_text_event("m-thin-2", "a canary-7f3a sentence"),
                headers={"Authorization": f"Bearer {secret}"},
            )
    finally:
        before_task_publish.disconnect(capture)
    [(headers, body)] = published
    assert headers["task"] == "pipeline.tasks.classify_message"
    assert headers["expires"] is not None
    # The task carries a claim-check key, never the text.
    assert "canary-7f3a" not in repr(body)
