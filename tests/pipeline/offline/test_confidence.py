"""A record's confidence is its head's probability calibrated on train (Platt scaling per record kind)."""

from __future__ import annotations

import numpy as np

from pipeline.offline import learn, model
from pipeline.offline.corpus import Conversation
from pipeline.offline.replay import Replayed
from pipeline.schemas import ExtractedAction, ExtractResult


def test_calibration_is_monotone_and_the_identity_until_fitted() -> None:
    assert model.calibrated({}, "decision", 0.7) == 0.7
    fitted = {"decision_cal_a": 0.6, "decision_cal_b": 0.8}
    chances = [model.calibrated(fitted, "decision", p) for p in np.linspace(0.02, 0.98, 25)]
    assert chances == sorted(chances) and 0.0 < chances[0] < chances[-1] < 1.0


def test_the_committed_engine_carries_a_fitted_calibration_and_its_records_use_it() -> None:
    engine = model.load()
    for kind in ("decision", "action"):
        assert (engine.params[f"{kind}_cal_a"], engine.params[f"{kind}_cal_b"]) != (1.0, 0.0)
    card = (model.artefacts.ARTEFACT_DIR / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "decision_reliability" in card and "action_reliability" in card


def _run(confidences: list[float], right: list[bool]) -> Replayed:
    actions = [
        ExtractedAction(description=f"Task number {i} gets done.", source_msg_ids=[f"m{i}"], confidence=c)
        for i, c in enumerate(confidences)
    ]
    gold = {"decisions": [], "actions": [{"evidence": [f"m{i}"]} for i, ok in enumerate(right) if ok]}
    return Replayed(Conversation(id="c", ctx=None, messages=[], gold=gold), ExtractResult(actions=actions))


def test_platt_scaling_learns_that_confident_records_are_right_more_often() -> None:
    sure = _run([0.95] * 20, [i % 10 != 0 for i in range(20)])  # 90 % right
    unsure = _run([0.3] * 20, [i % 2 == 0 for i in range(20)])  # 50 % right
    fitted = learn.calibration([sure, unsure], seed=0)
    assert abs(model.calibrated(fitted, "action", 0.95) - 0.9) < 0.08
    assert abs(model.calibrated(fitted, "action", 0.3) - 0.5) < 0.08
    table = learn.reliability([sure, unsure])["action_reliability"]
    assert "0.2-0.4: 20 records, 0.50 right" in table and "0.8-1.0: 20 records, 0.90 right" in table
