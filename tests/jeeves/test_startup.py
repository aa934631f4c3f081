"""Safe defaults: outside the embedded mode no service starts without its secrets (one clear line), nothing
is made up locally, the image bakes nothing in, and compose keeps Flower off the network."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cryptography.fernet import Fernet

from tests.conftest import ROOT

NOT_EMBEDDED = {
    "PATH": "/usr/bin:/bin",
    "DATABASE_URL": "postgresql://jeeves@127.0.0.1:1/jeeves",  # nothing listens: none of this connects
    "REDIS_URL": "redis://127.0.0.1:1/0",
}
SECRETS = {
    "DJANGO_SECRET_KEY": "a-long-random-production-key-for-the-test-only-0123456789",
    "JEEVES_WIRE_SECRET": "sidecar-bearer-for-the-test",
    "JEEVES_FLOWER_BASIC_AUTH": "ops:a-long-flower-password",
    "JEEVES_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
}
SERVICES = {
    "web": [sys.executable, "-c", "import jeeves.wsgi"],
    "a worker": [sys.executable, "-m", "celery", "-A", "jeeves", "worker", "--pool", "solo", "-Q", "respond"],
    # Beat opens its schedule file before it refuses; an unreadable one it deletes and makes anew (as root,
    # /dev/null would become a plain file), so it gets one of its own under the test's tmp_path.
    "beat": [sys.executable, "-m", "celery", "-A", "jeeves", "beat", "--schedule", "{tmp}/beat-schedule"],
    "flower": [sys.executable, "-m", "celery", "-A", "jeeves", "flower", "--port=1"],
}


def _run(argv: list[str], env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**env, "JEEVES_DATA_DIR": str(tmp_path / "data")}
    argv = [word.replace("{tmp}", str(tmp_path)) for word in argv]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("service", list(SERVICES))
def test_a_service_refuses_to_start_without_its_secrets_outside_the_embedded_mode(service, tmp_path):
    result = _run(SERVICES[service], NOT_EMBEDDED, tmp_path)
    assert result.returncode == 78, result.stderr[-2000:]
    [line] = [x for x in result.stderr.splitlines() if x.startswith("jeeves:")]
    assert line.startswith(f"jeeves: refusing to start {service} outside the embedded mode without ")
    for name in ("DJANGO_SECRET_KEY", "JEEVES_WIRE_SECRET", "JEEVES_FLOWER_BASIC_AUTH", "JEEVES_ENCRYPTION_KEYS"):
        assert name in line
    assert not (tmp_path / "data").exists()  # nothing was made up to stand in for them


def test_the_old_flower_password_is_refused_and_the_secrets_let_web_start(tmp_path):
    old = _run(SERVICES["web"], {**NOT_EMBEDDED, **SECRETS, "JEEVES_FLOWER_BASIC_AUTH": "admin:jeeves"}, tmp_path)
    assert old.returncode == 78 and "JEEVES_FLOWER_BASIC_AUTH" in old.stderr
    assert "DJANGO_SECRET_KEY" not in old.stderr
    ok = _run(SERVICES["web"], {**NOT_EMBEDDED, **SECRETS}, tmp_path)
    assert ok.returncode == 0, ok.stderr[-2000:]


def test_the_embedded_mode_makes_its_secrets_once_and_keeps_them(tmp_path):
    show = (
        "from django.conf import settings as s; print(s.SECRET_KEY, s.JEEVES.wire_secret, s.JEEVES.flower_basic_auth)"
    )
    argv = [sys.executable, "-c", f"import django; django.setup(); {show}"]
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "jeeves.settings"}
    first, second = _run(argv, env, tmp_path), _run(argv, env, tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stdout == second.stdout and "admin:jeeves" not in first.stdout
    made = {p.name for p in (tmp_path / "data").iterdir()}
    assert {"secret_key", "wire_secret", "flower_password", "encryption_key"} <= made
    assert all(oct((tmp_path / "data" / n).stat().st_mode)[-3:] == "600" for n in made if n != "static")


def test_the_image_build_bakes_nothing_in(tmp_path):
    """The Dockerfile's build-time step, run as written: it leaves static files and nothing else (no secret,
    no app id) in the data directory that would ship inside the image."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    [step] = [line for line in dockerfile.splitlines() if "collectstatic" in line]
    words = shlex.split(step.removeprefix("RUN "))
    assignments = dict(w.split("=", 1) for w in words if re.match(r"^[A-Z_]+=", w))
    command = [w for w in words if not re.match(r"^[A-Z_]+=", w)]
    assert command[:2] == ["python", "manage.py"]
    result = _run([sys.executable, *command[1:]], {"PATH": "/usr/bin:/bin", **assignments}, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert {p.name for p in (tmp_path / "data").iterdir()} == {"static"}
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert {".env", ".jeeves/", ".git", ".venv"} <= ignored


def test_compose_keeps_flower_on_loopback_with_no_default_password():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    flower = compose["services"]["flower"]
    assert all(str(p).startswith("127.0.0.1:") for p in flower.get("ports", []))
    command = " ".join(flower["command"])
    assert "admin:jeeves" not in command and ":-" not in command  # no fallback password


def test_check_deploy_is_clean_under_production_settings(tmp_path):
    argv = [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"]
    result = _run(argv, {**NOT_EMBEDDED, **SECRETS}, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_the_dependency_audit_runs_before_the_tests_and_says_when_it_could_not_check():
    script = (ROOT / "scripts" / "test").read_text()
    assert script.index("scripts/audit-deps") < script.index("pytest")
    audit = (ROOT / "scripts" / "audit-deps").read_text()
    assert "NOT audited" in audit and "pip-audit" in (ROOT / "requirements.txt").read_text()
