"""Webhook views: the Wire edge. Authenticate, parse, hand to ingest; never 500, never log text."""

from __future__ import annotations

import hmac
import json
import logging

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from pydantic import ValidationError

from wire_bridge import ingest
from wire_bridge.events import parse_sidecar_event

logger = logging.getLogger(__name__)


def _bearer_ok(request: HttpRequest, secret: str) -> bool:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    return bool(secret) and scheme.lower() == "bearer" and hmac.compare_digest(token.strip(), secret)


@csrf_exempt
@require_POST
def sidecar_events(request: HttpRequest) -> JsonResponse:
    if not _bearer_ok(request, settings.JEEVES.wire_secret):
        return JsonResponse({"error": "unauthorised"}, status=401)
    try:
        payload = json.loads(request.body)
    except (ValueError, UnicodeDecodeError):
        return JsonResponse({"error": "body is not JSON"}, status=400)
    try:
        event = parse_sidecar_event(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return JsonResponse({"error": f"invalid event: {where}: {first['type']}"}, status=400)
    if event is None:
        return JsonResponse({"status": "ignored"}, status=202)
    outcome = ingest.handle(event)
    return JsonResponse({"status": outcome}, status=200)
