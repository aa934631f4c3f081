"""Webhook views: the Wire edge. Authenticate, bound, parse, hand to ingest; never 500, never log text.

Answers: 401 unauthenticated, 405 wrong method, 413 body over 256 KiB, 400 malformed (one-line
reason naming the field, never its value), 202 unknown event type, 200 handled, 503 when a
backing service failed (the sender retries; receipts make that safe).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from pydantic import ValidationError

from ground import logs, metrics
from wire_bridge import ingest, roman, sidecar
from wire_bridge.auth import bearer_ok
from wire_bridge.events import Event

logger = logging.getLogger(__name__)

MAX_BODY = 256 * 1024


# Seconds a sender is asked to wait before retrying after a 503 (a backing service is away).
RETRY_AFTER_S = 5


def _error(status: int, reason: str) -> JsonResponse:
    # No "type" key in any answer: Roman would post a body with one into the conversation.
    response = JsonResponse({"error": reason}, status=status)
    if status == 503:
        response["Retry-After"] = str(RETRY_AFTER_S)
    return response


def _reason(exc: ValidationError) -> str:
    first = exc.errors(include_url=False, include_input=False, include_context=False)[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    return f"invalid event: {where}: {first['type']}"


def _event_type(event: Event) -> str:
    """TextMessage → text_message: the event's kind as a metric label (a closed set, never a value)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(event).__name__).lower()


def _receive(
    request: HttpRequest, secret: str, parse: Callable[[object], Event | None], protocol: str
) -> tuple[JsonResponse, str, str]:
    """The answer, with the event type and outcome it is counted under."""
    if not bearer_ok(request, secret):
        return _error(401, "unauthorised"), "unknown", "unauthorised"
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return _error(400, "bad Content-Length"), "unknown", "malformed"
    if declared > MAX_BODY:
        return _error(413, "body over 256 KiB"), "unknown", "too_large"
    try:
        body = request.body
    except RequestDataTooBig:
        return _error(413, "body over 256 KiB"), "unknown", "too_large"
    if len(body) > MAX_BODY:
        return _error(413, "body over 256 KiB"), "unknown", "too_large"
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return _error(400, "body is not JSON"), "unknown", "malformed"
    try:
        event = parse(payload)
    except ValidationError as exc:
        return _error(400, _reason(exc)), "unknown", "malformed"
    except RecursionError:
        return _error(400, "body nested too deeply"), "unknown", "malformed"
    if event is None:
        return JsonResponse({"status": "ignored"}, status=202), "unknown", "unknown_type"
    kind = _event_type(event)
    channel_id = getattr(event, "channel_id", None)
    with logs.bind(channel_id=channel_id, message_id=getattr(event, "message_id", None)):
        try:
            outcome = ingest.handle(event)
        except Exception as exc:
            return _unavailable(protocol, exc), kind, "unavailable"
    return JsonResponse({"status": outcome}, status=200), kind, outcome


def _unavailable(protocol: str, exc: Exception) -> JsonResponse:
    # The exception's message may quote the payload: log its type only.
    logger.error("%s: %s while handling an event; answered 503", protocol, type(exc).__name__)
    return _error(503, "temporarily unavailable")


def _guarded(request: HttpRequest, secret: str, parse: Callable[[object], Event | None], name: str) -> JsonResponse:
    started = time.perf_counter()
    try:
        response, kind, outcome = _receive(request, secret, parse, name)
    except Exception as exc:
        response, kind, outcome = _unavailable(name, exc), "unknown", "unavailable"
    try:
        metrics.webhook_event(name, kind, outcome, started)
    except Exception as exc:  # a metrics file that cannot be written must not cost the event
        logger.warning("%s: metrics not recorded (%s)", name, type(exc).__name__)
    return response


def _parse_roman(payload: object) -> Event | None:
    push = roman.parse(payload)
    return None if push is None else roman.translate(push)


@csrf_exempt
@require_POST
def sidecar_events(request: HttpRequest) -> JsonResponse:
    return _guarded(request, settings.JEEVES.wire_secret, sidecar.parse, "sidecar")


@csrf_exempt
@require_POST
def roman_events(request: HttpRequest) -> JsonResponse:
    return _guarded(request, settings.JEEVES.roman_secret, _parse_roman, "roman")


@csrf_exempt
def bench_noop(request: HttpRequest) -> JsonResponse:
    """A bare view (no auth, no parsing, no I/O): the baseline the ingest benchmark compares against."""
    return JsonResponse({"status": "ok"})
