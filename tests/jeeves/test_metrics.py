"""GET /metrics is not for the public web: a bearer token (JEEVES_METRICS_TOKEN), or a client on the host."""

from __future__ import annotations

import dataclasses

import pytest
from django.test import override_settings

pytestmark = pytest.mark.django_db


def test_without_a_token_only_the_host_itself_reads_metrics(client, settings):
    with override_settings(JEEVES=dataclasses.replace(settings.JEEVES, metrics_token="")):
        assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
        assert client.get("/metrics", REMOTE_ADDR="203.0.113.9").status_code == 401
        forwarded = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.9")
        assert forwarded.status_code == 401  # a proxy on the host relaying the public web


def test_with_a_token_every_client_needs_it(client, settings):
    with override_settings(JEEVES=dataclasses.replace(settings.JEEVES, metrics_token="scrape-me")):
        assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 401
        assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
        ok = client.get("/metrics", REMOTE_ADDR="203.0.113.9", HTTP_AUTHORIZATION="Bearer scrape-me")
        assert ok.status_code == 200 and b"jeeves_queue_depth" in ok.content
