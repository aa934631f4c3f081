"""`jeeves doctor` (one line per check: ok, or a problem with a hint; secrets masked) and `jeeves reembed`
(batched, resumable, --json) against the real database, Redis and the bundled embedder."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest
from django.core.management import call_command
from django.test import override_settings

from knowledge import embeddings
from knowledge.models import Embedding
from tests.conftest import free_port
from tests.fakes.wire import FakeSidecar
from tests.retrieval import factory

pytestmark = pytest.mark.django_db(transaction=True)

API_KEY = "sk-do-not-print-me-4711"


def _doctor(settings) -> tuple[dict, int]:
    out = io.StringIO()
    try:
        call_command("jeeves", "doctor", "--json", stdout=out)
        code = 0
    except SystemExit as exc:
        code = int(exc.code)
    return json.loads(out.getvalue()), code


def test_doctor_is_all_ok_on_a_healthy_system_and_masks_secrets(settings):
    with FakeSidecar(secret="s") as sidecar:
        cfg = dataclasses.replace(
            settings.JEEVES, wire_sidecar_url=sidecar.url, roman_url=f"http://127.0.0.1:{free_port()}",
            llm_api_key=API_KEY,
        )  # fmt: skip
        with override_settings(JEEVES=cfg):
            report, code = _doctor(settings)
    lines = {line["check"]: line for line in report["lines"]}
    assert code == 0 and report["problems"] == 0, [line for line in report["lines"] if line["status"] != "ok"]
    for check in ("postgres", "migrations", "redis", "models", "wire sidecar", "slot extract", "queue classify"):
        assert lines[check]["status"] == "ok", check
    assert lines["JEEVES_LLM_API_KEY"]["detail"] == f"set ({len(API_KEY)} characters)"
    assert API_KEY not in json.dumps(report) and settings.SECRET_KEY not in json.dumps(report)


def test_doctor_names_each_problem_with_a_hint(settings):
    from ground.redis import get_redis

    cfg = dataclasses.replace(settings.JEEVES, wire_sidecar_url=f"http://127.0.0.1:{free_port()}", roman_url="")
    with override_settings(JEEVES=cfg, REDIS_URL=f"redis://127.0.0.1:{free_port()}/0"):
        get_redis.cache_clear()
        try:
            report, code = _doctor(settings)
            text = io.StringIO()
            with pytest.raises(SystemExit):
                call_command("jeeves", "doctor", stdout=text)
        finally:
            get_redis.cache_clear()
    lines = {line["check"]: line for line in report["lines"]}
    assert code == 1 and report["problems"] >= 3
    for check in ("redis", "queues", "wire sidecar"):
        assert lines[check]["status"] == "problem" and lines[check]["hint"], check
    assert lines["postgres"]["status"] == "ok"
    printed = text.getvalue().splitlines()
    assert any(line.startswith("problem  redis") for line in printed)
    assert any(line.strip().startswith("hint: is Redis running") for line in printed)


def test_reembed_recomputes_other_models_vectors_in_batches_and_resumes():
    ch = factory.channel()
    decisions = [factory.decision(ch, f"the backup window moves to slot {n}") for n in range(4)]
    actions = [factory.action(ch, f"check restore drill number {n}") for n in range(2)]
    for d in decisions[:3]:  # made by a model no longer configured
        embeddings.record_embedding(
            "decision", d.pk, [0.1] * 384, channel_id=ch.channel_id, organisation_id=ch.organisation_id,
            author_id=None, created_at=d.decided_at, model="old-model",
        )  # fmt: skip
    # decisions[3] and the actions have no vector at all

    def reembed(*args: str) -> dict:
        out = io.StringIO()
        call_command("jeeves", "reembed", "--json", *args, stdout=out)
        return json.loads(out.getvalue())

    dry = reembed("--dry-run")
    assert dry["to_do"]["decision"] == 4 and dry["to_do"]["action"] == 2 and dry["embedded"] == 0
    first = reembed("--batch", "2", "--limit", "3")  # interrupted after three
    assert first["embedded"] == 3 and first["batches"] == 2 and first["remaining"] == 3
    second = reembed("--batch", "2")  # goes on where the first stopped
    assert second["embedded"] == 3 and second["remaining"] == 0
    assert reembed()["embedded"] == 0

    rows = Embedding.objects.filter(source_id__in=[r.pk for r in decisions + actions])
    assert rows.count() == 6 and set(rows.values_list("model", flat=True)) == {"local"}
    assert all(abs(sum(v * v for v in row.embedding) - 1.0) < 1e-3 for row in rows)  # MiniLM's unit vectors
