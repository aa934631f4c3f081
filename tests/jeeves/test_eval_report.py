"""`jeeves eval --json`: every section of the report from a replay's output (conversations written for the test)."""

from __future__ import annotations

from jeeves.management.commands import jeeves_eval as eval_cli


def _conv(cid: str, categories: dict, decisions: list, contradictions: list, ignored: list) -> dict:
    return {
        "id": cid,
        "channel": {"id": f"{cid}@test.example", "timezone": "UTC"},
        "messages": [{"id": m} for m in categories],
        "gold": {
            "categories": categories,
            "decisions": decisions,
            "actions": [],
            "entities": [],
            "contradictions": contradictions,
            "ignored": ignored,
            "questions": [],
        },
    }


def _decision(fid: str, *msg_ids: str) -> dict:
    return {"id": fid, "summary": "s", "source_ref": {"wire_msg_ids": list(msg_ids)}}


GOLD = _conv(
    "c1",
    {"m1": ["decision"], "m2": ["routine"], "m3": ["action", "update"], "m4": ["decision"], "m5": ["question"]},
    [
        {"id": "D1", "evidence": ["m1"]},
        {"id": "D2", "evidence": ["m4"]},
    ],
    [["D1", "D2"]],
    ["m5"],
)
GOT = {
    "decisions": [_decision("DEC-0001", "m1"), _decision("DEC-0002", "m4"), _decision("DEC-0003", "m5")],
    "actions": [],
    "entities": [],
    "signals": [],
    # m5 was sent while paused: never classified. m3 is missed as an update.
    "categories": {"m1": ["decision"], "m2": ["routine"], "m3": ["action"], "m4": ["discussion"]},
    "contradictions": [["DEC-0002", "DEC-0001"], ["DEC-0001", "DEC-0003"]],
    "llm_calls": {
        "classify": {"calls": 4, "local": 0, "fallbacks": 1, "prompt_tokens": 400, "completion_tokens": 40},
        "extract": {"calls": 1, "local": 0, "fallbacks": 0, "prompt_tokens": 900, "completion_tokens": 100},
    },
}


def test_every_section_is_in_the_report_and_scored():
    report = eval_cli.score({"c1": (GOLD, GOT)})

    cats = report["categories"]
    assert (cats["labelled"], cats["classified"]) == (5, 4)
    assert cats["per_category"]["decision"] == {"precision": 1.0, "recall": 0.5, "f1": 0.667, "support": 2}
    assert cats["per_category"]["update"]["recall"] == 0.0
    assert cats["per_category"]["discussion"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    # Macro F1 over the categories the gold holds (decision, routine, action, update): not discussion.
    assert cats["macro_f1"] == round((0.667 + 1.0 + 1.0 + 0.0) / 4, 3)
    assert cats["exact_match"] == 0.5

    assert report["ignored_evidence"] == {"leaks": 1, "by_conversation": {"c1": ["m5"]}}
    none = {"gold": 0, "applied": 0, "right": 0, "wrong": 0, "asked": 0}
    assert report["contradictions"] == {
        "gold": 1, "flagged": 2, "right": 1, "false_flags": 1, "both_extracted": 1, "replacements": none,
    }  # fmt: skip

    cost = report["cost"]
    assert cost["messages"] == 5
    assert cost["per_100_messages"]["classify"]["calls"] == 80.0
    assert cost["per_100_messages"]["extract"]["prompt_tokens"] == 18000.0
    assert cost["tokens_per_100_messages"] == (440 + 1000) * 20
    # Asked only with --answers.
    assert report["questions"] is None and report["cross_channel"] is None


def test_a_conversation_with_no_replay_counts_as_nothing_found():
    report = eval_cli.score({"c1": (GOLD, None)})
    assert report["decisions"]["recall"] == 0.0
    assert report["categories"]["classified"] == 0 and report["categories"]["macro_f1"] == 0.0
    assert report["contradictions"] == {
        "gold": 1, "flagged": 0, "right": 0, "false_flags": 0, "both_extracted": 0,
        "replacements": {"gold": 0, "applied": 0, "right": 0, "wrong": 0, "asked": 0},
    }  # fmt: skip
    assert report["cost"]["per_100_messages"] == {}


def test_questions_and_probes_sections():
    rows = [
        {"no_record": False, "ok": True, "timings_ms": {"plan": 1.0, "paths": 8.0, "fuse": 1.0}},
        {"no_record": False, "ok": False, "timings_ms": {"plan": 2.0, "paths": 28.0, "fuse": 0.0}},
        {"no_record": True, "ok": True, "timings_ms": {"plan": 1.0, "paths": 4.0}},
    ]
    q = eval_cli.questions(rows)
    assert q == {
        "asked": 3,
        "top5_recall": 0.5,
        "no_record_accuracy": 1.0,
        "answer_ms_p50": 10.0,
        "answer_ms_p95": 30.0,
    }
    probes = [{"ok": True, "leaked": []}, {"ok": False, "leaked": ["DEC-0001", "ACT-0002"]}]
    assert eval_cli.cross_channel(probes) == {"probes": 2, "answered_no_record": 1, "leaks": 2}


def test_replacements_applied_unasked_and_asked_about_are_scored_against_superseded_by():
    gold = _conv(
        "c2",
        {"m1": ["decision"], "m2": ["decision"], "m3": ["decision"], "m4": ["decision"]},
        [
            {"id": "D1", "evidence": ["m1"], "status": "superseded", "superseded_by": "D2"},
            {"id": "D2", "evidence": ["m2"]},
            {"id": "D3", "evidence": ["m3"], "status": "reversed", "superseded_by": "D4"},
            {"id": "D4", "evidence": ["m4"]},
        ],
        [],
        [],
    )
    got = {
        **GOT,
        "decisions": [_decision(f"DEC-000{n}", f"m{n}") for n in (1, 2, 3, 4)],
        "contradictions": [["DEC-0003", "DEC-0004"]],  # a gold replacement, asked about
        "supersessions": [["DEC-0001", "DEC-0002"], ["DEC-0002", "DEC-0003"]],  # one right, one wrong
    }

    report = eval_cli.contradictions({"c2": (gold, got)})

    assert report["replacements"] == {"gold": 2, "applied": 2, "right": 1, "wrong": 1, "asked": 1}
    assert (report["gold"], report["flagged"], report["false_flags"]) == (0, 1, 0)
    assert "replacements applied unasked 1/2 gold (1 wrong), 1 more asked about" in eval_cli.render(
        eval_cli.score({"c2": (gold, got)}), verbose=False
    )
