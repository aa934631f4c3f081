"""Django settings, all from the environment (12-factor). The only module that reads os.environ.

Jeeves' own variables are ground.config.JeevesConfig's, Django's are DjangoVariables here; both are read by
pydantic-settings, and a bad value stops start-up with one line naming the variable (ground.config.ConfigError).
"""

from __future__ import annotations

import os
import secrets
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

import dj_database_url
from cryptography.fernet import Fernet

from ground import logs
from ground.config import (
    Bool,
    ConfigError,
    MaybeBool,
    MaybeSeconds,
    Names,
    RedisUrl,
    Text,
    load,
    load_variables,
    unsafe_start,
    var,
)
from jeeves import embedded

BASE_DIR = Path(__file__).resolve().parent.parent

# Offline facts (docs/architecture.md §6): no price-list fetch, no hub look-ups. Set before litellm or
# sentence-transformers is imported anywhere in the process.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@dataclass(frozen=True)
class DjangoVariables:
    """The variables of Django's own settings, each with its name, default and type once (read like
    JeevesConfig's: blank = the default, a bad value stops start-up with one line naming it). None: the
    mode decides (on outside the embedded mode, off in it)."""

    database_url: Text = var("DATABASE_URL", "")
    redis_url: RedisUrl = var("REDIS_URL", "")
    embedded: Bool = var("JEEVES_EMBEDDED", False)
    debug: Bool = var("DJANGO_DEBUG", False)
    secret_key: Text = var("DJANGO_SECRET_KEY", "")
    secure_cookies: MaybeBool = var("DJANGO_SECURE_COOKIES", None)
    secure_ssl_redirect: MaybeBool = var("DJANGO_SECURE_SSL_REDIRECT", None)
    secure_hsts_seconds: MaybeSeconds = var("DJANGO_SECURE_HSTS_SECONDS", None)
    secure_hsts_include_subdomains: MaybeBool = var("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", None)
    secure_hsts_preload: MaybeBool = var("DJANGO_SECURE_HSTS_PRELOAD", None)
    secure_proxy_ssl_header: Text = var("DJANGO_SECURE_PROXY_SSL_HEADER", "")
    csrf_trusted_origins: Names = var("DJANGO_CSRF_TRUSTED_ORIGINS", ())
    allowed_hosts: Names = var("ALLOWED_HOSTS", ("localhost", "127.0.0.1", "[::1]"))


_env = load_variables(DjangoVariables, os.environ)
JEEVES = load(os.environ)
# Embedded Postgres data, Valkey working dir, local secret key, beat schedule, static files.
DATA_ROOT = Path(JEEVES.data_dir) if JEEVES.data_dir else BASE_DIR / ".jeeves"

DEBUG = _env.debug
# The embedded mode: one machine, no accounts (`jeeves up` on its embedded PostgreSQL, which gives the
# processes it starts JEEVES_EMBEDDED=1; the test suite). Only there is a missing secret made up, once,
# under .jeeves/, so `jeeves up` and `jeeves replay` agree with no configuration. Anywhere else nothing
# is made up (each container would make its own, and an image build would bake one in): a service
# refuses to start without them (STARTUP_PROBLEMS, enforced by jeeves/startup.py).
EMBEDDED = not _env.database_url or _env.embedded


def _local(name: str, make) -> str:
    return embedded.local_value(DATA_ROOT, name, make) if EMBEDDED else ""


SECRET_KEY = _env.secret_key or _local("secret_key", lambda: secrets.token_urlsafe(50))
if not JEEVES.wire_secret:
    JEEVES = replace(JEEVES, wire_secret=_local("wire_secret", lambda: secrets.token_urlsafe(32)))
if not JEEVES.wire_app_id:
    JEEVES = replace(JEEVES, wire_app_id=_local("wire_app_id", lambda: f"{uuid.uuid4()}@{JEEVES.wire_default_domain}"))
if not JEEVES.flower_basic_auth and EMBEDDED:
    JEEVES = replace(JEEVES, flower_basic_auth=f"admin:{_local('flower_password', lambda: secrets.token_urlsafe(12))}")
if not JEEVES.encryption_keys and EMBEDDED:
    JEEVES = replace(JEEVES, encryption_keys=(_local("encryption_key", lambda: Fernet.generate_key().decode()),))
STARTUP_PROBLEMS: list[str] = [] if EMBEDDED else unsafe_start(JEEVES, secret_key_set=bool(_env.secret_key))
# Deployment (`python manage.py check --deploy` is clean outside the embedded mode): cookies only over
# HTTPS, HSTS, browsers redirected to HTTPS. The machine endpoints (webhooks, health, metrics) are not
# redirected: the sidecar and a scraper reach them inside your network, and they authenticate by bearer.
_secure = not EMBEDDED


def _unless_set(value, default):
    return default if value is None else value


SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = _unless_set(_env.secure_cookies, _secure)
SECURE_SSL_REDIRECT = _unless_set(_env.secure_ssl_redirect, _secure)
SECURE_REDIRECT_EXEMPT = [r"^wire/", r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = _unless_set(_env.secure_hsts_seconds, 31536000 if _secure else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _unless_set(_env.secure_hsts_include_subdomains, _secure)
SECURE_HSTS_PRELOAD = _unless_set(_env.secure_hsts_preload, _secure)
# Behind a proxy that terminates TLS: the header it sets, e.g. HTTP_X_FORWARDED_PROTO (value "https").
if _env.secure_proxy_ssl_header:
    SECURE_PROXY_SSL_HEADER = (_env.secure_proxy_ssl_header, "https")
CSRF_TRUSTED_ORIGINS = list(_env.csrf_trusted_origins)
ALLOWED_HOSTS = list(_env.allowed_hosts)

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

_database_url = _env.database_url or embedded.postgres_url(DATA_ROOT)
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

REDIS_URL = _env.redis_url or f"redis://127.0.0.1:{JEEVES.embedded_redis_port}/0"

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
