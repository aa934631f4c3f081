"""Django settings, all from the environment (12-factor). The only module that reads os.environ.

A bad value stops start-up with one line naming the variable (ground.config.ConfigError).
"""

from __future__ import annotations

import os
import secrets
import uuid
from dataclasses import replace
from pathlib import Path

import dj_database_url
from cryptography.fernet import Fernet

from ground import logs
from ground.config import ConfigError, load, unsafe_start
from jeeves import embedded

BASE_DIR = Path(__file__).resolve().parent.parent

# Offline facts (docs/architecture.md §6): no price-list fetch, no hub look-ups. Set before litellm or
# sentence-transformers is imported anywhere in the process.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

JEEVES = load(os.environ)
# Embedded Postgres data, Valkey working dir, local secret key, beat schedule, static files.
DATA_ROOT = Path(JEEVES.data_dir) if JEEVES.data_dir else BASE_DIR / ".jeeves"


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean (1/0, true/false)")


DEBUG = _env_bool("DJANGO_DEBUG", False)
# The embedded mode: one machine, no accounts (`jeeves up` on its embedded PostgreSQL, which gives the
# processes it starts JEEVES_EMBEDDED=1; the test suite). Only there is a missing secret made up, once,
# under .jeeves/, so `jeeves up` and `jeeves replay` agree with no configuration. Anywhere else nothing
# is made up (each container would make its own, and an image build would bake one in): a service
# refuses to start without them (STARTUP_PROBLEMS, enforced by jeeves/startup.py).
EMBEDDED = not os.environ.get("DATABASE_URL", "").strip() or _env_bool("JEEVES_EMBEDDED", False)


def _local(name: str, make) -> str:
    return embedded.local_value(DATA_ROOT, name, make) if EMBEDDED else ""


_secret_key_set = bool(os.environ.get("DJANGO_SECRET_KEY", "").strip())
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "").strip() or _local("secret_key", lambda: secrets.token_urlsafe(50))
if not JEEVES.wire_secret:
    JEEVES = replace(JEEVES, wire_secret=_local("wire_secret", lambda: secrets.token_urlsafe(32)))
if not JEEVES.wire_app_id:
    JEEVES = replace(JEEVES, wire_app_id=_local("wire_app_id", lambda: f"{uuid.uuid4()}@{JEEVES.wire_default_domain}"))
if not JEEVES.flower_basic_auth and EMBEDDED:
    JEEVES = replace(JEEVES, flower_basic_auth=f"admin:{_local('flower_password', lambda: secrets.token_urlsafe(12))}")
if not JEEVES.encryption_keys and EMBEDDED:
    JEEVES = replace(JEEVES, encryption_keys=(_local("encryption_key", lambda: Fernet.generate_key().decode()),))
STARTUP_PROBLEMS: list[str] = [] if EMBEDDED else unsafe_start(JEEVES, secret_key_set=_secret_key_set)
# Deployment (`python manage.py check --deploy` is clean outside the embedded mode): cookies only over
# HTTPS, HSTS, browsers redirected to HTTPS. The machine endpoints (webhooks, health, metrics) are not
# redirected: the sidecar and a scraper reach them inside your network, and they authenticate by bearer.
_secure = not EMBEDDED
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = _env_bool("DJANGO_SECURE_COOKIES", _secure)
SECURE_SSL_REDIRECT = _env_bool("DJANGO_SECURE_SSL_REDIRECT", _secure)
SECURE_REDIRECT_EXEMPT = [r"^wire/", r"^healthz$", r"^readyz$", r"^metrics$"]
try:
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_SECURE_HSTS_SECONDS", "").strip() or (31536000 if _secure else 0))
except ValueError:
    raise ConfigError("DJANGO_SECURE_HSTS_SECONDS is not a whole number of seconds") from None
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", _secure)
SECURE_HSTS_PRELOAD = _env_bool("DJANGO_SECURE_HSTS_PRELOAD", _secure)
# Behind a proxy that terminates TLS: the header it sets, e.g. HTTP_X_FORWARDED_PROTO (value "https").
if os.environ.get("DJANGO_SECURE_PROXY_SSL_HEADER", "").strip():
    SECURE_PROXY_SSL_HEADER = (os.environ["DJANGO_SECURE_PROXY_SSL_HEADER"].strip(), "https")
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]
ALLOWED_HOSTS = [
    h.strip() for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "knowledge",
    "pipeline",
    "retrieval",
    "wire_bridge",
    "jeeves",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Serves the admin's static files from gunicorn with no separate web server (embedded default).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "jeeves.urls"
WSGI_APPLICATION = "jeeves.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_database_url = os.environ.get("DATABASE_URL", "").strip() or embedded.postgres_url(DATA_ROOT)
try:
    DATABASES = {"default": dj_database_url.parse(_database_url, conn_max_age=60, conn_health_checks=True)}
except ValueError as exc:
    raise ConfigError(f"DATABASE_URL is not a database URL ({exc})") from None
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ConfigError("DATABASE_URL must point at PostgreSQL with pgvector")
# Timeouts, so a Postgres that is down or black-holed fails a call instead of hanging it (the webhook
# then answers 503 well within gunicorn's timeout): libpq's connect timeout (whole seconds, at least 2),
# TCP keepalives and an unacknowledged-data timeout for a network that silently drops packets, and a
# statement timeout for every statement (0 = none; a long index build or migration sets its own).
_backend_timeout_ms = int(JEEVES.backend_timeout_s * 1000)
DATABASES["default"]["OPTIONS"] = {
    "connect_timeout": max(2, round(JEEVES.backend_timeout_s)),
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": max(_backend_timeout_ms, 10000),
    "options": f"-c statement_timeout={JEEVES.db_statement_timeout_s * 1000}",
    **DATABASES["default"].get("OPTIONS", {}),
}

REDIS_URL = os.environ.get("REDIS_URL", "").strip() or f"redis://127.0.0.1:{JEEVES.embedded_redis_port}/0"
if not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ConfigError(f"REDIS_URL={REDIS_URL!r} is not a redis:// URL")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = DATA_ROOT / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# Webhook bodies above this are refused with 413 by the bridge before parsing.
DATA_UPLOAD_MAX_MEMORY_SIZE = 256 * 1024

# Celery (read by jeeves/celery.py with namespace CELERY_).
CELERY_BROKER_URL = REDIS_URL

# Logs as data (ground/logs.py): JSON lines in production, a readable line in development; channel, message,
# task and queue on every line where known; known text-bearing fields dropped.
LOGGING = logs.config(JEEVES.log_format or ("text" if EMBEDDED or DEBUG else "json"), JEEVES.log_level)
