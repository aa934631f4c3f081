"""Project hygiene a user would notice: documented settings, clean migrations, lint, compose file."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml

from ground.config import SLOTS
from tests.conftest import ROOT


def _documented() -> set[str]:
    text = (ROOT / ".env.example").read_text()
    return set(re.findall(r"^([A-Z][A-Z0-9_]+)=", text, flags=re.M))


def test_env_example_documents_every_variable_settings_read():
    source = (ROOT / "ground" / "config.py").read_text() + (ROOT / "jeeves" / "settings.py").read_text()
    read = set(re.findall(r'"((?:JEEVES|DJANGO)_[A-Z0-9_]+)"', source)) | {"DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS"}
    read |= {f"JEEVES_{kind}_{slot.upper()}" for kind in ("MODEL", "FALLBACK") for slot in SLOTS}
    missing = read - _documented()
    assert not missing, f"not in .env.example: {sorted(missing)}"


def test_makemigrations_is_clean():
    result = subprocess.run(
        [sys.executable, "manage.py", "makemigrations", "--check", "--dry-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_is_clean():
    for args in (["check", "."], ["format", "--check", "."]):
        result = subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr


def test_compose_has_every_process_of_the_design():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    expected = {"postgres", "redis", "web", "beat", "flower"} | {
        f"worker-{q}" for q in ("classify", "extract", "embed", "respond", "summarise")
    }
    assert expected <= set(services)
    assert "pgvector/pgvector" in services["postgres"]["image"]
    redis_cmd = " ".join(services["redis"]["command"])
    assert '--save ""' in redis_cmd and "--appendonly no" in redis_cmd
    for name in expected:
        assert "healthcheck" in services[name], f"{name} has no healthcheck"


def test_compose_web_is_healthy_only_when_ready():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert "/readyz" in " ".join(compose["services"]["web"]["healthcheck"]["test"])
