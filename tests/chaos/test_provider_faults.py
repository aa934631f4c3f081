"""Model-provider faults through the fake OpenAI-compatible server: 503 bursts, 429 with Retry-After, answers
slower than the client's timeout, truncated JSON, schema-valid nonsense (an owner who is not a member, a
deadline in 1970, a stranger deciding), an invalid confidence, and output that quotes the window. Every
message ends as an extraction (by the model, or the offline fallback) or the discussion fallback; the worker
never crashes, no run of a message is stored, and no one outside the channel owns or decides anything."""

from __future__ import annotations

import uuid

import pytest

from knowledge.models import Action, Decision, MessageReceipt
from tests.chaos import harness
from tests.fakes.openai_server import Behaviour, computed, error, raw

pytestmark = pytest.mark.django_db(transaction=True)

STRANGER = f"{uuid.uuid4()}@elsewhere.example"


def _window(body: dict) -> list[dict]:
    import json

    return json.loads(body["messages"][-1]["content"]).get("messages", [])


def _nonsense(body: dict) -> dict:
    new = [m for m in _window(body) if m.get("new")]
    return {
        "decisions": [
            {
                "summary": f"Somebody settled entry {m['id']}.",
                "decided_by": [STRANGER],
                "source_msg_ids": [m["id"]],
                "confidence": 0.9,
            }
            for m in new
        ],
        "actions": [
            {
                "description": f"A stranger follows up entry {m['id']}.",
                "owner_id": STRANGER,
                "deadline": "1970-01-01",
                "source_msg_ids": [m["id"]],
                "confidence": 0.9,
            }
            for m in new
        ],
    }


def _confidence_seven(body: dict) -> dict:
    new = [m for m in _window(body) if m.get("new")]
    return {
        "decisions": [{"summary": "An entry was settled.", "source_msg_ids": [m["id"]], "confidence": 7} for m in new]
    }


def _quoting(body: dict) -> dict:
    new = [m for m in _window(body) if m.get("new")]
    return {
        "decisions": [
            {
                "summary": m["text"],
                "rationale": m["text"],
                "tags": m["text"].split()[:3],
                "source_msg_ids": [m["id"]],
                "confidence": 0.9,
            }
            for m in new
        ],
        "actions": [
            {"description": m["text"], "owner_id": m["author_id"], "source_msg_ids": [m["id"]], "confidence": 0.9}
            for m in new
        ],
    }


FAULTS: dict[str, list[Behaviour]] = {
    "provider 503 burst": [error(503)] * 6,
    "provider 429 Retry-After": [Behaviour(status=429, headers={"Retry-After": "1"})] * 3,
    "provider slower than timeout": [Behaviour(json={}, delay_s=12)] * 2,
    "provider truncated JSON": [raw('{"decisions": [{"summary": "The lane rec')] * 4,
    "provider schema-valid nonsense": [computed(_nonsense)] * 4,
    "provider confidence 7": [computed(_confidence_seven)] * 4,
    "provider quotes the window": [computed(_quoting)] * 4,
}


def _run(chaos_redis, faults: list[str], record_row) -> None:
    broker = chaos_redis.url
    fake = harness.provider()
    # The slot's own fallback is the offline engine, as configured by default.
    env = harness.stack_env(broker, fake, JEEVES_LLM_TIMEOUT_MS="5000")
    with harness.running(fake, env, "chaos-provider") as (web, worker, traffic):
        for n, fault in enumerate(faults):
            fake.script(harness.EXTRACT_MODEL, *FAULTS[fault])
            phase = harness.Traffic(web.url)
            phase.open_channels(1)
            phase.run(6, rate=6, first=1000 * (n + 1))
            harness.settle(phase, timeout=240)
            assert worker.proc.poll() is None, "the worker crashed"
            result = harness.tally(fault, phase, settled_as_found=True)
            record_row(result)
            members = {phase.channels[0].author}
            channel_id = phase.channels[0].channel_id
            assert result.lost == 0 and result.duplicated == 0 and result.canaries == 0, result
            # Every message ends extracted (model or offline) or in the discussion fallback: none still waiting.
            assert not MessageReceipt.objects.filter(
                channel_id=channel_id, outcome__in=["queued", "pending_extract"]
            ).exists()
            owners = set(Action.objects.filter(channel_id=channel_id).values_list("owner_id", flat=True)) - {None}
            assert owners <= members, f"{fault}: an owner outside the channel"
            for decided in Decision.objects.filter(channel_id=channel_id).values_list("decided_by", flat=True):
                assert set(decided or []) <= members, f"{fault}: a decider outside the channel"
            assert not Action.objects.filter(channel_id=channel_id, deadline__year__lt=2000).exists(), fault
            phase.close()
            fake.reset()
            fake.default(harness.CLASSIFY_MODEL, computed(harness.classify_answer))
            fake.default(harness.EXTRACT_MODEL, computed(harness.extract_answer))


@pytest.mark.chaos
@pytest.mark.quick
def test_a_503_burst_from_the_provider_costs_no_message(chaos_redis, record_row):
    _run(chaos_redis, ["provider 503 burst"], record_row)


@pytest.mark.chaos
@pytest.mark.timeout(900)
def test_every_provider_fault_ends_in_an_extraction_or_a_fallback_and_stores_nothing_verbatim(chaos_redis, record_row):
    _run(chaos_redis, [f for f in FAULTS if f != "provider 503 burst"], record_row)
