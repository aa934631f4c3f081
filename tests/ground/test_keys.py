"""The table of Redis key families (ground/keys.py), without Redis: every family is named, bounded in time or
says why not, keeps the key strings data already in Redis was written under, and is the only place a
`jeeves:` key is spelled."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from ground import keys
from jeeves.management.commands import jeeves_audit as audit
from tests.conftest import ROOT

CH = "c0ffee00-0000-4000-8000-000000000001@wire.example"


def test_every_family_has_a_unique_prefix_that_is_no_other_familys():
    prefixes = [f.prefix for f in keys.FAMILIES]
    assert len(set(prefixes)) == len(prefixes)
    assert len({f.name for f in keys.FAMILIES}) == len(keys.FAMILIES)
    for f in keys.FAMILIES:
        assert f.prefix.startswith(keys.ROOT)
        # Scanning one family never returns another's keys.
        assert not [g.name for g in keys.FAMILIES if g is not f and g.prefix.startswith(f.prefix)], f.name


def test_every_family_has_a_ttl_or_says_why_not(settings):
    for f in keys.FAMILIES:
        assert f.description and f.holds and f.owner and f.type in {"string", "list", "hash", "set"}, f.name
        assert (ROOT / f.owner).is_file(), f.owner
        if f.ttl is None:
            assert f.no_ttl.strip(), f"{f.name}: no TTL and no reason"
            assert f.ttl_s() is None
        else:
            assert not f.no_ttl, f"{f.name}: a TTL and a reason for none"
            assert f.ttl_s() > 0, f.name
    # Whatever holds message text expires.
    assert keys.TEXT_FAMILIES and all(f.ttl is not None for f in keys.TEXT_FAMILIES)


def test_a_family_says_its_ttl_or_why_it_has_none_not_both_and_not_neither():
    row = {"holds": "h", "owner": "ground/keys.py", "description": "d"}
    with pytest.raises(ValueError):
        keys.Family("x", "jeeves:x:", ("channel_id",), "string", text=False, **row)
    with pytest.raises(ValueError):
        keys.Family("x", "jeeves:x:", ("channel_id",), "string", text=False, ttl=5, no_ttl="kept", **row)
    assert keys.Family("x", "jeeves:x:", (), "string", text=False, no_ttl="one counter", **row).ttl_s() is None


def test_ttls_follow_the_settings_as_before(settings):
    cfg = settings.JEEVES
    assert keys.CLAIM_CHECK.ttl_s() == cfg.queue_ttl_s
    assert keys.WINDOW.ttl_s() == cfg.window_max_age_s
    assert keys.EXTRACT_PENDING.ttl_s() == cfg.window_max_age_s * 2
    assert keys.EXTRACT_LOCK.ttl_s() == int(cfg.extract_debounce_s) + 120
    assert keys.LEASE.ttl_s() == keys.EXTRACT_RUNNING.ttl_s() == int(cfg.task_lease_s)
    assert (keys.SEEN.ttl_s(), keys.REPLIED.ttl_s(), keys.EARLY_JOINS.ttl_s()) == (86400, 86400, 3600)
    assert (keys.QUESTIONS.ttl_s(), keys.POLL.ttl_s(), keys.RECONCILE_LOCK.ttl_s()) == (60, 30 * 86400, 30)
    settings.JEEVES = dataclasses.replace(cfg, channel_rate=2.0, channel_burst=60)
    assert keys.BUCKET.ttl_s() == 90
    settings.JEEVES = dataclasses.replace(cfg, channel_rate=0.3, channel_burst=1)
    assert keys.BUCKET.ttl_s() == 64
    for interval in (0.05, 0.5, 1.0, 4.999, 5.0, 7.3, 60.0):
        settings.JEEVES = dataclasses.replace(cfg, sweep_interval_s=interval)
        # liveness sets the sweep lock in milliseconds: the same figure as before the table.
        assert round(keys.SWEEP_LOCK.ttl_s() * 1000) == max(int(interval * 900), 100)


def test_key_strings_are_byte_identical_to_those_already_in_redis():
    assert keys.WINDOW.key(CH) == f"jeeves:window:{CH}"
    assert keys.CLAIM_CHECK.key(CH, "m1") == f"jeeves:msg:{CH}:m1"
    assert keys.MEMBERS.key(CH) == f"jeeves:members:{CH}"
    assert keys.EARLY_JOINS.key(CH) == f"jeeves:early-joins:{CH}"
    assert keys.EXTRACT_PENDING.key(CH) == f"jeeves:extract:pending:{CH}"
    assert keys.EXTRACT_LOCK.key(CH) == f"jeeves:extract:lock:{CH}"
    assert keys.EXTRACT_RUNNING.key(CH) == f"jeeves:extract:running:{CH}"
    assert keys.LEASE.key("t1") == "jeeves:lease:t1"
    assert keys.SWEEP_LOCK.key() == "jeeves:sweep:lock"
    assert keys.SWEEP_RESTORED.key() == "jeeves:sweep:restored"
    assert keys.RECONCILE_LOCK.key() == "jeeves:sweep:reconcile"
    assert keys.CLOCK.key() == "jeeves:clock"
    assert keys.SEEN.key(CH, "button:k") == f"jeeves:seen:{CH}:button:k"
    assert keys.BUCKET.key(CH) == f"jeeves:bucket:{CH}"
    assert keys.REPLIED.key(CH, "m1") == f"jeeves:replied:{CH}:m1"
    assert keys.QUESTIONS.key("u@d") == "jeeves:questions:u@d"
    assert keys.POLL.key("p1") == "jeeves:poll:p1"
    with pytest.raises(TypeError):
        keys.CLAIM_CHECK.key(CH)


def test_patterns_and_channels():
    assert keys.WINDOW.pattern() == "jeeves:window:*"
    assert keys.CLAIM_CHECK.pattern("a*b?[c]\\d") == "jeeves:msg:a\\*b\\?\\[c\\]\\\\d:*"
    assert keys.naming_channel("x*y") == "jeeves:*x\\*y*"
    assert keys.WINDOW.channel_of(keys.WINDOW.key(CH)) == CH
    odd = "team:a@wire.example"
    key = keys.CLAIM_CHECK.key(odd, "m:1")
    assert keys.CLAIM_CHECK.channel_of(key, [CH, odd]) == odd
    assert keys.CLAIM_CHECK.channel_of(keys.CLAIM_CHECK.key(CH, "m1")) == CH


def test_the_audit_checks_every_family_that_may_hold_text():
    assert {f.name for f in keys.TEXT_FAMILIES} == set(audit.TEXT_CHECKS) == {"window", "claim-check"}


# A `jeeves:` key literal: "jeeves:" not followed by a space (messages such as "jeeves: configuration error").
_KEY_LITERAL = re.compile(r"jeeves:(?!\s)")
_SKIP = {".venv", "tests", "node_modules", ".git"}


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _key_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skip = _docstrings(tree)
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:60]!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and _KEY_LITERAL.search(node.value)
    ]


def test_no_module_but_the_key_table_spells_a_jeeves_key():
    """Docstrings and comments may name keys; code builds them through ground/keys.py."""
    modules = [p for p in ROOT.rglob("*.py") if not _SKIP & set(p.relative_to(ROOT).parts[:-1])]
    assert len(modules) > 50 and ROOT / "pipeline" / "window.py" in modules
    found = [hit for p in modules if p != ROOT / "ground" / "keys.py" for hit in _key_literals(p)]
    assert found == []
    assert _key_literals(ROOT / "ground" / "keys.py")  # the check sees literals where they are
