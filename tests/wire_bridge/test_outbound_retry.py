"""Outbound retries through Celery, with a real respond worker and the fake sidecar: a peer answering 503 twice
then 200 gets the message exactly once, the task retried by Celery (not by sleeping inside it); a command's reply
built before the 503s is the one posted, not built again."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest
import redis
from django.test import override_settings

from ground import keys
from knowledge import channels
from pipeline import claimcheck
from tests.conftest import WorkerProcess, wait_for
from tests.fakes.wire import FakeSidecar
from tests.wire_bridge.conftest import WIRE_SECRET, wire_config, wire_worker
from wire_bridge import commands, tasks

pytestmark = pytest.mark.django_db(transaction=True)

ALICE = f"{uuid.uuid4()}@wire.example"


@pytest.fixture(scope="module")
def sidecar():
    with FakeSidecar(WIRE_SECRET) as fake:
        yield fake


@pytest.fixture(scope="module")
def respond_worker(django_db_setup, django_db_blocker, isolated_redis, sidecar):
    worker = wire_worker(isolated_redis, "outbound-retry", JEEVES_WIRE_SIDECAR_URL=sidecar.url)
    yield worker
    worker.stop()


@pytest.fixture
def r(isolated_redis, respond_worker, sidecar):
    with override_settings(JEEVES=wire_config(wire_sidecar_url=sidecar.url)):
        yield redis.Redis.from_url(isolated_redis, decode_responses=True)


def _channel() -> str:
    cid = f"{uuid.uuid4()}@wire.example"
    channels.ensure_channel(cid, organisation_id="wire.example", transport="sidecar")
    return cid


def _retries(worker: WorkerProcess, task: str, task_id: str) -> int:
    return worker.log().count(f"{task}[{task_id}] retry: Retry in")


def _settled(sidecar: FakeSidecar, start: int) -> list[dict]:
    """What was posted since `start`, once a further retry (backoff at most 1 s) would have posted too."""
    sidecar.wait_for_messages(start + 1)
    time.sleep(2.5)
    with sidecar.lock:
        return sidecar.messages[start:]


def test_a_send_answered_503_twice_is_retried_by_celery_and_posted_once(r, sidecar, respond_worker):
    cid, ref = _channel(), "stale:ACT-0001:1"
    claimcheck.park(cid, ref, "If I may, Tom undertook to complete the API review (ACT-0001).")
    start = len(sidecar.messages)
    sidecar.fail_next(503, times=2)
    result = tasks.send_message.apply_async(kwargs={"channel_id": cid, "message_ref": ref}, expires=60)

    posted = _settled(sidecar, start)
    assert [m["text"] for m in posted] == ["If I may, Tom undertook to complete the API review (ACT-0001)."]
    assert _retries(respond_worker, "wire_bridge.tasks.send_message", result.id) == 2
    assert sidecar._scripted_failure() is None  # both 503s were served
    assert not r.exists(claimcheck.key_for(cid, ref))  # discarded once delivered
    assert sidecar.errors == []


def test_a_questions_reply_met_by_503s_is_built_once_and_posted_once(r, sidecar, respond_worker):
    """The reply is built (and the question counted) once; the retries send that reply, parked meanwhile."""
    cid, msg = _channel(), f"q-{uuid.uuid4().hex[:8]}"
    body = "what did we decide about the nightly backups?"
    kind = commands.parse(body).kind
    assert kind == commands.Kind.QUESTION
    claimcheck.park(cid, msg, json.dumps({"body": body, "mentions": []}))
    start = len(sidecar.messages)
    sidecar.fail_next(503, times=2)
    tasks.publish_command(cid, msg, ALICE, kind, "")

    posted = _settled(sidecar, start)
    assert len(posted) == 1 and posted[0]["replyToMessageId"] == msg
    wait_for(lambda: r.exists(keys.REPLIED.key(cid, msg)), timeout=10)
    assert r.get(keys.QUESTIONS.key(ALICE)) == "1"  # counted once, not once per attempt
    assert not r.exists(claimcheck.key_for(cid, msg), claimcheck.key_for(cid, f"reply:{msg}"))
    assert len(re.findall(r"respond_to_command\[[^\]]+\] retry: Retry in", respond_worker.log())) == 2
    assert sidecar.errors == []
