"""jeeves/settings.py: Django's own variables (DjangoVariables) are read like Jeeves' (ground/config.py):
declared once, blank = the default, a bad value stops start-up with one line naming it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ground.config import ConfigError, load_variables
from jeeves.settings import DjangoVariables
from tests.conftest import ROOT


def test_unset_and_blank_variables_take_their_defaults():
    for env in ({}, {"DJANGO_DEBUG": "", "ALLOWED_HOSTS": "  ", "DJANGO_SECURE_HSTS_SECONDS": " "}):
        got = load_variables(DjangoVariables, env)
        assert got.debug is False and got.embedded is False
        assert got.allowed_hosts == ("localhost", "127.0.0.1", "[::1]")
        assert got.csrf_trusted_origins == ()
        # The deployment switches are left to the mode (on outside the embedded mode).
        assert (got.secure_cookies, got.secure_ssl_redirect, got.secure_hsts_seconds) == (None, None, None)
        assert got.database_url == got.redis_url == got.secret_key == ""


def test_values_are_read_as_their_types():
    got = load_variables(
        DjangoVariables,
        {
            "DJANGO_DEBUG": " On ",
            "JEEVES_EMBEDDED": "1",
            "DJANGO_SECURE_COOKIES": "no",
            "DJANGO_SECURE_HSTS_SECONDS": "3600",
            "DJANGO_SECURE_HSTS_PRELOAD": "TRUE",
            "DJANGO_SECURE_PROXY_SSL_HEADER": " HTTP_X_FORWARDED_PROTO ",
            "DJANGO_CSRF_TRUSTED_ORIGINS": "https://desk.example, https://ops.example,",
            "ALLOWED_HOSTS": "web,desk.example",
            "REDIS_URL": "rediss://cache.example:6380/4",
            "UNRELATED": "ignored",
        },
    )
    assert got.debug is True and got.embedded is True and got.secure_cookies is False
    assert got.secure_hsts_seconds == 3600 and got.secure_hsts_preload is True
    assert got.secure_hsts_include_subdomains is None
    assert got.secure_proxy_ssl_header == "HTTP_X_FORWARDED_PROTO"
    assert got.csrf_trusted_origins == ("https://desk.example", "https://ops.example")
    assert got.allowed_hosts == ("web", "desk.example")
    assert got.redis_url == "rediss://cache.example:6380/4"


BOOLEAN = "a boolean (1/0, true/false)"


@pytest.mark.parametrize(
    ("name", "value", "kind"),
    [
        ("DJANGO_DEBUG", "sometimes", BOOLEAN),
        ("JEEVES_EMBEDDED", "2", BOOLEAN),
        ("DJANGO_SECURE_SSL_REDIRECT", "https", BOOLEAN),
        ("DJANGO_SECURE_HSTS_SECONDS", "a year", "a whole number of seconds"),
        ("DJANGO_SECURE_HSTS_SECONDS", "-60", "a whole number of seconds"),
        ("REDIS_URL", "cache.example:6379", "a redis:// URL"),
    ],
)
def test_a_bad_value_is_one_line_naming_its_variable(name, value, kind):
    with pytest.raises(ConfigError) as raised:
        load_variables(DjangoVariables, {name: value})
    assert str(raised.value) == f"{name}={value!r} is not {kind}"


def test_a_bad_django_variable_stops_manage_py_with_that_line():
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SECURE_HSTS_SECONDS": "soon"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == ["jeeves: configuration error: DJANGO_SECURE_HSTS_SECONDS='soon' is not a whole number of seconds"]
