"""Webhook routes of the bridge, mounted under /wire/."""

from django.conf import settings
from django.urls import path

from wire_bridge import views

urlpatterns = [
    path("events", views.sidecar_events, name="wire-sidecar-events"),
    path("roman", views.roman_events, name="wire-roman-events"),
]

if settings.JEEVES.bench_endpoints:
    # The bare-Django baseline of bench/ingest.py; only with JEEVES_BENCH_ENDPOINTS=1.
    urlpatterns.append(path("bench/noop", views.bench_noop, name="wire-bench-noop"))
