"""Configuration: typed, validated at start-up, one clear line naming a bad variable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ground.config import ConfigError, load
from tests.conftest import ROOT


def test_defaults_run_everything_on_the_offline_engine():
    cfg = load({})
    assert {slot.model for slot in cfg.slots.values()} == {"local"}
    assert {slot.fallback for slot in cfg.slots.values()} == {"local"}
    assert cfg.embed_dims == 384
    assert cfg.queue_ttl_s == 60
    assert (cfg.window_size, cfg.window_max_age_s) == (30, 900)
    assert cfg.context_tokens == 6000
    assert cfg.entity_dedup_threshold == 0.92
    assert cfg.contradiction_threshold == 0.78


def test_slots_and_fallbacks_are_read_per_slot():
    cfg = load({"JEEVES_MODEL_EXTRACT": "qwen3-2507:30b-a3b", "JEEVES_FALLBACK_EXTRACT": "qwen3:14b"})
    assert cfg.slot("extract").model == "qwen3-2507:30b-a3b"
    assert cfg.slot("extract").fallback == "qwen3:14b"
    assert cfg.slot("classify").model == "local"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("JEEVES_EMBED_DIMS", "abc"),
        ("JEEVES_EMBED_DIMS", "-3"),
        ("JEEVES_QUEUE_TTL_S", "1.5"),
        ("JEEVES_EXTRACT_CONFIDENCE_MIN", "1.7"),
        ("JEEVES_EMBED_MESSAGES", "maybe"),
        ("JEEVES_WIRE_APP_ID", "no-domain"),
        ("JEEVES_PATH_WEIGHTS", "structured=1,bogus=2"),
        ("JEEVES_LOG_LEVEL", "LOUD"),
    ],
)
def test_a_bad_value_names_its_variable(name, value):
    with pytest.raises(ConfigError, match=name):
        load({name: value})


def test_path_weights_merge_over_defaults():
    cfg = load({"JEEVES_PATH_WEIGHTS": "graph=0.9"})
    assert cfg.path_weights["graph"] == 0.9
    assert cfg.path_weights["structured"] == 1.0


@pytest.mark.parametrize(
    "argv",
    [
        [sys.executable, "manage.py", "check"],
        [sys.executable, "-m", "celery", "-A", "jeeves", "inspect", "ping"],
    ],
    ids=["manage.py", "celery"],
)
def test_misconfiguration_stops_start_up_with_one_line(argv):
    env = {"PATH": "/usr/bin:/bin", "JEEVES_EMBED_DIMS": "abc", "DATABASE_URL": "postgresql://x@127.0.0.1:1/x"}
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == ["jeeves: configuration error: JEEVES_EMBED_DIMS='abc' is not a positive integer"]
