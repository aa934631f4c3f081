"""The embedded PostgreSQL runs with Jeeves' server settings (jeeves/embedded.py server_settings)."""

from __future__ import annotations

import os

import psycopg
import pytest

from jeeves import embedded

GB = 1024**3


def test_settings_are_sized_from_memory():
    assert embedded.server_settings(2 * GB)["shared_buffers"] == "512MB"
    assert embedded.server_settings(64 * GB)["shared_buffers"] == "8192MB"  # capped
    assert embedded.server_settings(256 * 1024**2)["shared_buffers"] == "128MB"  # never below the default
    small = embedded.server_settings(2 * GB)
    assert small["effective_cache_size"] == "1536MB" and small["jit"] == "off" and small["random_page_cost"] == "1.1"


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL", "").strip()), reason="an external server has its own settings")
def test_a_new_embedded_server_starts_with_them(postgres_server):
    """The session's server is a new data directory: initialised, then restarted once with the settings."""
    p = postgres_server
    want = embedded.server_settings()
    with psycopg.connect(host=p["HOST"], port=p.get("PORT") or 5432, user=p["USER"], dbname="postgres") as conn:
        for name in ("shared_buffers", "jit", "random_page_cost"):
            setting, unit = conn.execute("SELECT setting, unit FROM pg_settings WHERE name = %s", [name]).fetchone()
            if name == "shared_buffers":  # in 8 kB pages
                assert int(setting) * 8 // 1024 == int(want[name].removesuffix("MB"))
            else:
                assert setting == want[name]
