"""Jeeves: the Django project (settings, Celery app, urls, the `jeeves` command group)."""

from jeeves.celery import app as celery_app

__all__ = ["celery_app"]
