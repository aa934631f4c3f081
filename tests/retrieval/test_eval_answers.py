"""`jeeves eval --from REPLAY --answers`: the gold questions and cross-channel probes are asked through
`ask` against the database and scored by the evalset rules (channels seeded with gold decisions)."""

from __future__ import annotations

import io
import json
import shutil

import pytest
from django.core.management import call_command

from jeeves.management.commands import jeeves_replay as replay
from knowledge.models import ChannelConfig, Decision
from pipeline import embed
from tests.pipeline import evalset

pytestmark = pytest.mark.django_db


def _channel(conv: dict) -> ChannelConfig:
    ch = conv["channel"]
    return ChannelConfig.objects.create(
        channel_id=ch["id"], channel_name=ch["name"], organisation_id=ch["org"], timezone=ch["timezone"]
    )


def test_eval_answers_scores_questions_and_probes(tmp_path):
    billing, other = evalset.load("conv-001"), evalset.load("conv-012")
    other["gold"]["questions"] = []  # it is here for the probe asked in it about conv-001's retries
    (tmp_path / "conv-001.json").write_text(json.dumps(billing))
    (tmp_path / "conv-012.json").write_text(json.dumps(other))
    shutil.copy(evalset.EVALSET_DEV / "cross-channel.json", tmp_path / "cross-channel.json")

    channel = _channel(billing)
    _channel(other)
    stamps = {m["id"]: m["ts"] for m in billing["messages"]}
    seeded = []
    for n, d in enumerate(billing["gold"]["decisions"], start=1):
        at = max(stamps[i] for i in d["evidence"])
        seeded.append(Decision.objects.create(
            channel=channel, organisation_id=channel.organisation_id, friendly_id=f"DEC-{n:04d}",
            summary=d["summary"], decided_at=at, decided_by=[f"{u}@wire.example" for u in d["decided_by"]],
            source_ref={"wire_msg_ids": d["evidence"], "timestamp_range": {"start": at, "end": at}},
            source_key=d["id"], status=d["status"],
        ))  # fmt: skip
    seeded[0].superseded_by, seeded[0].valid_until = seeded[1], seeded[1].decided_at  # D1 → D2, as in the gold
    seeded[0].save(update_fields=["superseded_by", "valid_until"])
    embed.embed_records([("decision", str(d.pk)) for d in seeded])  # Tier 3, so the semantic path has them
    saved = tmp_path / "replay.json"
    channels = [replay.collect(c["channel"]["id"], c["id"], {}) for c in (billing, other)]
    saved.write_text(json.dumps({"channels": channels}, default=str))

    out = io.StringIO()
    call_command("jeeves", "eval", str(tmp_path), "--from", str(saved), "--answers", "--json", stdout=out)
    report = json.loads(out.getvalue())
    # The seeded gold decisions, scored as extraction too.
    assert report["per_conversation"]["conv-001"]["decisions"]["matched"] == 3
    got = report["answers"]
    assert (got["questions"], got["answerable"], got["no_record"]) == (7, 6, 1)
    ok = {r["question"]: r["ok"] for r in got["per_question"]}
    assert ok["How many times do we retry a failed card payment now?"]  # D2
    assert ok["Why did we cut the retry limit from 5 to 3?"]  # D2
    assert ok["Did we decide to partition the retry_attempts table?"]  # D3
    # Actions were not seeded: nothing to find for the accountability question.
    assert not ok["Who is writing the retry_attempts migration and when is it due?"]
    assert got["answerable_top5"] == sum(ok.values()) - (got["no_record_right"])
    # What a reader notices: the first record right, how much of what is cited is right, answer length.
    rows = [r for r in got["per_question"] if not r["no_record"]]
    assert got["answerable_top1"] == sum(r["top1"] for r in rows) <= got["answerable_top5"]
    assert got["cited"] == sum(r["cited_count"] for r in rows) and all(r["cited_count"] <= 3 for r in rows)
    assert got["cited_precision"] == round(got["cited_expected"] / got["cited"], 3)
    assert 5 < got["median_answer_words"] < 80
    assert got["by_kind"]["accountability"] == {
        "answerable": 1,
        "answerable_top5": 0,
        "no_record": 0,
        "no_record_right": 0,
    }
    # Asked in conv-012 about conv-001's retry limit: no record there, and nothing of conv-001 cited.
    assert (got["probes"], got["probes_right"], got["probes_leaked"]) == (1, 1, 0)
    # The report's own sections (jeeves eval --json): the same figures, and the answer times.
    assert report["questions"]["asked"] == 7
    assert report["questions"]["top5_recall"] == round(got["answerable_top5"] / 6, 3)
    assert 0 < report["questions"]["answer_ms_p50"] <= report["questions"]["answer_ms_p95"]
    assert report["cross_channel"] == {"probes": 1, "answered_no_record": 1, "leaks": 0}

    text = io.StringIO()
    call_command("jeeves", "eval", str(tmp_path), "--from", str(saved), "--answers", stdout=text)
    assert f"answerable questions with an expected record in the top 5: {got['answerable_top5']}/6" in text.getvalue()
    assert "cross-channel probes answered 'no record' without a leak: 1/1" in text.getvalue()
    assert "(top-1):" in text.getvalue() and "cited precision" in text.getvalue()
    assert "median answer length" in text.getvalue()
