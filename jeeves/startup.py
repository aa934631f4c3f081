"""Refuse to start a service outside the embedded mode without its secrets: one clear line, exit 78."""

from __future__ import annotations

import sys


def refuse_unsafe_start(service: str) -> None:
    """Called as web, a worker, beat or flower starts (jeeves/wsgi.py, jeeves/celery.py, `jeeves up`)."""
    from django.conf import settings

    if settings.STARTUP_PROBLEMS:
        print(
            f"jeeves: refusing to start {service} outside the embedded mode without "
            f"{', '.join(settings.STARTUP_PROBLEMS)} (see .env.example)",
            file=sys.__stderr__ or sys.stderr,  # Celery redirects sys.stderr into its log by then
        )
        sys.exit(78)  # EX_CONFIG


def require_offline_engine(service: str) -> None:
    """A worker does not start without the offline engine's learned artefacts, or with stale ones:
    the offline engine is the default and every slot's fallback, so a worker without it would fail
    every message later instead of once, loudly, now. The answer step's relevance model likewise."""
    from pipeline.offline import artefacts, contradiction, model
    from retrieval import relevance

    try:
        model.load()
        contradiction.model()
        relevance.load()
    except artefacts.ArtefactError as exc:
        print(f"jeeves: refusing to start {service}: {exc}", file=sys.__stderr__ or sys.stderr)
        sys.exit(78)
