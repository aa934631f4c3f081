"""Operational endpoints: liveness, readiness and the Prometheus metrics page (ground/metrics.py)."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from jeeves import health

logger = logging.getLogger(__name__)


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers. What it depends on is /readyz's business (a restart cures neither)."""
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: PostgreSQL reachable, every migration applied, Redis reachable, the models ready to use
    (jeeves/health.py). 200 when all hold, else 503 naming what does not (never a secret or a host name)."""
    checks = health.readiness()
    ready = all(c.ok for c in checks)
    for check in checks:
        if not check.ok:
            logger.warning("readyz: %s %s", check.name, check.detail)
    body = {"status": "ready" if ready else "not ready", **{c.name: "ok" if c.ok else c.detail for c in checks}}
    return JsonResponse(body, status=200 if ready else 503)


def _metrics_allowed(request: HttpRequest) -> bool:
    """`Authorization: Bearer $JEEVES_METRICS_TOKEN` when a token is set; without one, only a client on
    the same host (an internal port: a sidecar scraper, `curl` on the box), never the public web."""
    token = settings.JEEVES.metrics_token
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())
    return request.META.get("REMOTE_ADDR") in {"127.0.0.1", "::1"} and "HTTP_X_FORWARDED_FOR" not in request.META


def metrics_guarded(view: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """Queue depths and counters tell an outsider how busy each channel is: not for the public web."""

    @wraps(view)
    def guarded(request: HttpRequest) -> HttpResponse:
        if not _metrics_allowed(request):
            return HttpResponse(
                "metrics need a bearer token (JEEVES_METRICS_TOKEN)\n", status=401, content_type="text/plain"
            )
        return view(request)

    return guarded


@require_GET
@metrics_guarded
def metrics(request: HttpRequest) -> HttpResponse:
    """Every process's series (ground/metrics.py); with Redis down still 200: depths NaN, jeeves_redis_up 0."""
    from jeeves import scrape

    body, content_type = scrape.render()
    return HttpResponse(body, content_type=content_type)
