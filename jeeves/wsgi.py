"""WSGI entry point for gunicorn (`gunicorn jeeves.wsgi`)."""

import os
import sys

from django.core.wsgi import get_wsgi_application

from ground.config import ConfigError
from jeeves.startup import refuse_unsafe_start

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jeeves.settings")

try:
    application = get_wsgi_application()
except ConfigError as exc:
    sys.exit(f"jeeves: configuration error: {exc}")
refuse_unsafe_start("web")
