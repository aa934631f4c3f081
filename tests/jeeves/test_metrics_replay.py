"""After a replay through real processes — gunicorn with two workers, a prefork Celery worker — one scrape of
/metrics (prometheus-client multiprocess mode, a metrics directory of the run's own) shows every tier, the
webhook, the model calls (the offline engine's) and retrieval, with no channel id or text in any label."""

from __future__ import annotations

import dataclasses
import io
import json
import uuid
from collections.abc import Iterator

import httpx
import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.test import override_settings

from tests.conftest import WebProcess, WorkerProcess, own_broker, service_env
from tests.fakes.wire import FakeSidecar, mention_of, sidecar_text
from tests.pipeline import evalset

pytestmark = pytest.mark.django_db(transaction=True)

APP_ID = "5e1f0c8a-0000-4000-8000-00000000beef@wire.example"
SECRET = "metrics-replay-secret"
ENV = {
    "JEEVES_WIRE_APP_ID": APP_ID,
    "JEEVES_WIRE_SECRET": SECRET,
    "JEEVES_WIRE_HANDLE": "jeeves",
    "JEEVES_EXTRACT_DEBOUNCE_S": "1",
}


@pytest.fixture
def broker(redis_url: str) -> Iterator[str]:
    """A Redis database of this test's own: the session-wide worker (no metrics directory) cannot take its tasks."""
    with own_broker(redis_url, "metrics-replay") as chosen:
        yield chosen


def _families(text: str) -> dict[str, list]:
    from prometheus_client.parser import text_string_to_metric_families

    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def _total(samples, name: str, **labels: str) -> float:
    return sum(s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def test_a_scrape_after_a_replay_shows_every_tier_the_webhook_models_and_retrieval(broker, tmp_path):
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    cfg = dataclasses.replace(
        django_settings.JEEVES, wire_app_id=APP_ID, wire_secret=SECRET, wire_handle="jeeves", extract_debounce_s=1.0
    )
    with FakeSidecar(secret=SECRET) as sidecar, override_settings(JEEVES=cfg):
        env = service_env(broker, **ENV, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir), JEEVES_WIRE_SIDECAR_URL=sidecar.url)
        web = worker = None
        try:
            web = WebProcess(env, workers=2)
            worker = WorkerProcess("classify,extract,embed,respond,summarise", env, pool="prefork", name="metrics")
            out = io.StringIO()
            conv = evalset.load("conv-001")
            conv["channel"]["id"] = f"{uuid.uuid4()}@wire.example"
            path = tmp_path / "conv.json"
            path.write_text(json.dumps(conv))
            call_command("jeeves", "replay", str(path), "--url", web.url, "--json", "--timeout", "240", stdout=out)
            assert json.loads(out.getvalue())["channels"][0]["decisions"]

            # A question through the webhook: the respond worker retrieves, answers, posts to the sidecar.
            asker = f"{conv['channel']['members'][0]['id']}@{conv['channel']['org']}"
            question = "@jeeves which choices has this team settled so far?"
            event = sidecar_text(
                conv["channel"]["id"], asker, "metrics-q1", question, [mention_of(question, "@jeeves", APP_ID)]
            )
            assert sidecar.emit(web.url, event).status_code == 200
            sidecar.wait_for_messages(1, timeout=90)

            scraped = httpx.get(f"{web.url}/metrics", timeout=30)
            assert scraped.status_code == 200
            text = scraped.text
        finally:
            for process in (worker, web):
                if process is not None:
                    process.stop()

    families = _families(text)
    tasks = families["jeeves_tasks"]
    durations = families["jeeves_task_duration_seconds"]
    for queue in ("classify", "extract", "embed", "respond"):
        assert _total(tasks, "jeeves_tasks_total", queue=queue, outcome="succeeded") > 0, queue
        assert _total(durations, "jeeves_task_duration_seconds_count", queue=queue) > 0, queue
    webhook = families["jeeves_webhook_events"]
    texts = _total(webhook, "jeeves_webhook_events_total", protocol="sidecar", type="text_message", outcome="queued")
    assert texts > 30
    assert _total(webhook, "jeeves_webhook_events_total", type="app_added") == 1
    assert _total(families["jeeves_ingest_seconds"], "jeeves_ingest_seconds_count", protocol="sidecar") > 30
    llm = families["jeeves_llm_calls"]
    assert _total(llm, "jeeves_llm_calls_total", slot="classify", model="local", outcome="ok") > 30
    assert _total(llm, "jeeves_llm_calls_total", slot="extract", model="local") > 0
    assert _total(families["jeeves_llm_latency_seconds"], "jeeves_llm_latency_seconds_count", slot="classify") > 30
    retrieval = families["jeeves_retrieval_seconds"]
    assert _total(retrieval, "jeeves_retrieval_seconds_count", path="total") >= 1
    assert _total(retrieval, "jeeves_retrieval_seconds_count", path="semantic") >= 1
    assert [s.value for s in families["jeeves_redis_up"]] == [1.0]
    # No label value is a channel id, a user id or text: every value is a word from a closed set.
    for samples in families.values():
        for sample in samples:
            for key, value in sample.labels.items():
                assert "@" not in value and " " not in value and len(value) < 64, (sample.name, key, value)
