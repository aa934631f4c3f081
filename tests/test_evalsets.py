"""The labelled conversations keep the format and labelling rules of `evalsets/README.md`.

`evalsets/validate.py` states the rules; train and the holdout are checked (dev's files predate the
uuid5 member ids). A conversation added to train with a label that breaks a rule fails here before it
fits anything.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evalsets"))
import validate  # noqa: E402

FILES = sorted((ROOT / "evalsets" / "train").glob("conv-*.json")) + sorted(
    (ROOT / "evalsets" / "holdout").glob("conv-*.json")
)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_conversation_keeps_the_labelling_rules(path):
    assert validate.faults(json.loads(path.read_text(encoding="utf-8")), path.stem) == []


def test_a_broken_label_is_reported():
    raw = json.loads(FILES[0].read_text(encoding="utf-8"))
    first = raw["gold"]["decisions"][0]
    first["evidence"] = ["m999"]
    first["status"] = "superseded"
    raw["messages"][1]["ts"] = raw["messages"][0]["ts"]
    found = "\n".join(validate.faults(raw, FILES[0].stem))
    assert "evidence m999 is not a message" in found
    assert "superseded_by None disagree" in found
    assert "m002 ts is not after the message before" in found
