"""Webhook routes of the bridge, mounted under /wire/."""

from django.urls import path

from wire_bridge import views

urlpatterns = [
    path("events", views.sidecar_events, name="wire-sidecar-events"),
    path("roman", views.roman_events, name="wire-roman-events"),
]
