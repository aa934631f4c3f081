"""The contradiction duty: the offline judge on sentences written for these tests, the check after a new
decision (a stated replacement applied and told in the next summary, a conflict held, each pair judged
once), the model's judge through the classify slot, the hold, once per pair, pause and secure under a
frozen clock, and extraction queueing the check; the buttons through both Wire fakes are in
tests/wire_bridge/test_contradiction_buttons.py."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from jeeves.management.commands import jeeves_replay as replay
from knowledge import channels, contradictions, receipts, review, sources
from knowledge.models import (
    ChannelConfig,
    ChannelState,
    ConflictStatus,
    Decision,
    DecisionConflict,
    Embedding,
    LlmCall,
    MessageReceipt,
    PipelineCounter,
    Summary,
)
from pipeline import claimcheck, debounce, embed, extract, summaries, window
from pipeline import contradictions as duty
from pipeline.offline import contradiction as judge
from pipeline.window import WindowMessage
from tests.conftest import WorkerProcess, service_env, wait_for
from tests.fakes.openai_server import answer, raw, serving
from tests.wire_bridge.conftest import isolated_redis  # noqa: F401 - a fixture

T = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)  # a Monday
ANA, TOM = f"{uuid.uuid4()}@wire.example", f"{uuid.uuid4()}@wire.example"

PLANTS = "The office plants are watered every Monday morning by the facilities team."
PLANTS_NOW = "The office plants are watered on Thursdays by whoever opens up."
PLANTS_SAID = "change of plan: forget Mondays, whoever opens up on Thursday waters the plants instead"
BUDGET = "The hackathon budget is 2,000 euros for food and prizes."
BUDGET_NOW = "The hackathon budget is 3,500 euros for food and prizes."
NEWSLETTER = "The quarterly newsletter goes out on the first Friday of the month."


# --------------------------------------------------------------------------- the offline judge


def test_the_offline_judge_tells_a_stated_replacement_a_changed_figure_and_an_unrelated_pair():
    def judged(older: str, newer: str, said: list[str]) -> judge.Judgement:
        sides = judge.sides([newer, older], [T + timedelta(days=2), T])
        [judgement] = judge.judge(sides[0], sides[1:], said)
        return judgement

    stated = judged(PLANTS, PLANTS_NOW, [PLANTS_SAID])
    changed = judged(BUDGET, BUDGET_NOW, ["ok the hackathon gets 3,500 for food and prizes"])
    unrelated = judged(PLANTS, NEWSLETTER, ["newsletter on the first Friday of the month"])

    assert (stated.verdict, stated.stated) == ("supersedes", True)
    assert changed.verdict != "compatible" and not changed.stated
    assert "figures differ (2,000 against 3,500)" in changed.reason
    assert unrelated.verdict == "compatible"
    assert judge.replacement_stated(["let's scrap that and go with Tuesdays"])
    assert not judge.replacement_stated(["Tuesdays it is, thanks all"])


def test_the_judge_artefact_records_how_it_was_fitted():
    from pipeline.offline import artefacts

    _, meta = artefacts.load(judge.NAME)
    assert meta["trained_on"].startswith("evalsets/train")
    assert {"train_cv", "dev", "threshold", "apply_threshold", "candidate_cosine"} <= meta.keys()
    assert meta["features"] == list(judge.FEATURES)


# --------------------------------------------------------------------------- detection


def _channel(**kw) -> ChannelConfig:
    kw.setdefault("timezone", "Europe/London")
    return ChannelConfig.objects.create(
        channel_id=f"{uuid.uuid4()}@wire.example", organisation_id="wire.example", channel_name="office", **kw
    )


def _decision(
    ch: ChannelConfig, fid: str, summary: str, at: datetime, msg: str | None = None, *, embedded: bool = True
) -> Decision:
    decision = Decision.objects.create(
        channel=ch,
        organisation_id=ch.organisation_id,
        friendly_id=fid,
        summary=summary,
        decided_by=[ANA],
        decided_at=at,
        source_ref=sources.source_ref([(msg or f"m-{fid}", at)]),
        source_key=f"k-{fid}",
    )
    if embedded:
        embed.embed_records([("decision", str(decision.pk))])
    return decision


def _said(ch: ChannelConfig, msg: str, text: str, at: datetime) -> None:
    window.push(ch.channel_id, WindowMessage(id=msg, author_id=ANA, ts=at, text=text))


def _pair(older: Decision, newer: Decision) -> DecisionConflict:
    return DecisionConflict.objects.get(older=older, newer=newer)


@pytest.mark.django_db
def test_a_new_decision_is_judged_against_the_channel_a_stated_replacement_applied_and_the_rest_held():
    ch = _channel()
    plants = _decision(ch, "DEC-0001", PLANTS, T)
    budget = _decision(ch, "DEC-0002", BUDGET, T + timedelta(hours=1))
    newsletter = _decision(ch, "DEC-0003", NEWSLETTER, T + timedelta(hours=2))
    elsewhere = _decision(_channel(), "DEC-0001", PLANTS, T)
    long_ago = _decision(ch, "DEC-0004", BUDGET, T - timedelta(days=120))
    _said(ch, "m-new-plants", PLANTS_SAID, T + timedelta(days=2))
    plants_now = _decision(ch, "DEC-0005", PLANTS_NOW, T + timedelta(days=2), msg="m-new-plants")
    budget_now = _decision(ch, "DEC-0006", BUDGET_NOW, T + timedelta(days=2, hours=1))

    recorded = duty.check(ch, [str(plants_now.pk), str(budget_now.pk)])

    plants.refresh_from_db()
    assert (plants.status, plants.superseded_by_id) == ("superseded", plants_now.pk)
    assert plants.valid_until == plants_now.decided_at and plants.reviewed_by is None
    applied = _pair(plants, plants_now)
    assert (applied.verdict, applied.stated, applied.status) == ("supersedes", True, ConflictStatus.SUPERSEDED)
    assert applied.resolved_at is not None and applied.resolved_by is None
    held = _pair(budget, budget_now)
    assert held.verdict != "compatible" and not held.stated and held.status == ConflictStatus.HELD
    assert "figures differ" in held.reason and held.judge_model == "local"
    assert not DecisionConflict.objects.filter(older=newsletter, newer=plants_now).exclude(status="compatible")
    # Another channel's decision, or one from four months before, is never a candidate.
    assert not DecisionConflict.objects.filter(older__in=[elsewhere, long_ago]).exists()
    assert {p.pk for p in recorded} == set(DecisionConflict.objects.filter(channel=ch).values_list("pk", flat=True))
    # What `jeeves replay --json` lists for `jeeves eval`: pairs to be asked, replacements applied.
    listed = replay.conflicts(ch.channel_id)
    assert ["DEC-0002", "DEC-0006"] in listed["contradictions"]
    assert listed["supersessions"] == [["DEC-0001", "DEC-0005"]]
    # Each pair is judged once: a redelivered check writes nothing and asks no judge again.
    calls = LlmCall.objects.filter(channel_id=ch.channel_id, slot="classify").count()
    assert duty.check(ch, [str(plants_now.pk), str(budget_now.pk)]) == []
    assert LlmCall.objects.filter(channel_id=ch.channel_id, slot="classify").count() == calls


@pytest.mark.django_db
def test_decisions_tier_3_has_not_embedded_yet_are_still_candidates(settings):
    """The check is queued beside Tier 3: decisions of the run and of the run before may have no vector yet.
    It runs Tier 3's writer for them first (one vector each, the embedder's model), then judges as ever."""
    ch = _channel()
    budget = _decision(ch, "DEC-0001", BUDGET, T, embedded=False)
    newsletter = _decision(ch, "DEC-0002", NEWSLETTER, T + timedelta(hours=1), embedded=False)
    budget_now = _decision(ch, "DEC-0003", BUDGET_NOW, T + timedelta(days=2), embedded=False)
    assert not Embedding.objects.filter(channel_id=ch.channel_id).exists()

    duty.check(ch, [str(newsletter.pk), str(budget_now.pk)])

    held = _pair(budget, budget_now)
    assert held.verdict != "compatible" and held.status == ConflictStatus.HELD
    rows = Embedding.objects.filter(channel_id=ch.channel_id, source_type="decision")
    assert sorted(rows.values_list("source_id", flat=True)) == sorted([budget.pk, newsletter.pk, budget_now.pk])
    assert set(rows.values_list("model", flat=True)) == {settings.JEEVES.slot("embed").model}


@pytest.mark.django_db
def test_without_the_messages_at_hand_a_replacement_is_asked_about_not_applied():
    ch = _channel()
    plants = _decision(ch, "DEC-0001", PLANTS, T)
    plants_now = _decision(ch, "DEC-0002", PLANTS_NOW, T + timedelta(days=2))  # its messages left the window

    duty.check(ch, [str(plants_now.pk)])

    plants.refresh_from_db()
    assert plants.status == "active"
    assert _pair(plants, plants_now).status == ConflictStatus.HELD


@pytest.fixture
def provider(settings):
    with serving(settings, {"classify": "judge-model"}) as server:
        yield server


@pytest.mark.django_db
def test_the_classify_slot_judges_each_pair_and_invalid_output_falls_back_to_the_offline_judge(provider):
    ch = _channel()
    visitors = _decision(ch, "DEC-0001", "Visitors are signed in at reception and escorted at all times.", T)
    _said(ch, "m-walk", "visitors can walk to the meeting rooms alone once signed in", T + timedelta(days=1))
    walk = _decision(
        ch, "DEC-0002", "Visitors may walk to meeting rooms alone once signed in.", T + timedelta(days=1), "m-walk"
    )
    provider.script(
        "judge-model",
        answer({"verdict": "contradicts", "reason": "One escorts visitors, the other lets them walk alone."}),
    )

    duty.check(ch, [str(walk.pk)])

    pair = _pair(visitors, walk)
    assert (pair.verdict, pair.status, pair.judge_model) == ("contradicts", ConflictStatus.HELD, "judge-model")
    assert pair.reason == "One escorts visitors, the other lets them walk alone."
    given = json.loads(provider.calls("judge-model")[0].body["messages"][1]["content"])
    assert given["earlier"]["id"] == "DEC-0001" and given["later"]["date"] == "2025-03-04"
    assert given["later_messages"] == ["visitors can walk to the meeting rooms alone once signed in"]

    budget = _decision(ch, "DEC-0003", BUDGET, T + timedelta(days=3))
    provider.script("judge-model", raw("not JSON"), raw("still not JSON"))
    budget_now = _decision(ch, "DEC-0004", BUDGET_NOW, T + timedelta(days=3, hours=1))
    provider.default("judge-model", answer({"verdict": "compatible", "reason": "Different matters."}))

    duty.check(ch, [str(budget_now.pk)])

    nearest = DecisionConflict.objects.filter(newer=budget_now).order_by("-cosine").first()
    assert nearest.older_id == budget.pk
    assert (nearest.judge_model, nearest.status) == ("local", ConflictStatus.HELD)


@pytest.mark.django_db
def test_extraction_queues_the_check_with_the_new_decision_ids(settings, redis_client):
    ch = _channel()
    at = T + timedelta(days=1)
    _said(ch, "m1", "right, from now on the plants get watered on Thursdays", at)
    receipts.record_receipt(ch.channel_id, "m1", author_id=ANA, sent_at=at)
    receipts.mark_receipt(ch.channel_id, "m1", outcome=MessageReceipt.Outcome.PENDING_EXTRACT, tier=1)
    debounce.note_classified(ch.channel_id, "m1")
    redis_client.delete("extract")
    extracted = {"decisions": [{"summary": PLANTS_NOW, "source_msg_ids": ["m1"], "confidence": 0.9}]}
    with serving(settings, {"extract": "extract-model"}, extract_debounce_s=3600.0, extract_batch=1000) as server:
        server.script("extract-model", answer(extracted))
        report = extract.run(ch)

    decision = Decision.objects.get(channel=ch)
    assert report.written["decision"] == 1
    queued = [_task(raw_message) for raw_message in redis_client.lrange("extract", 0, -1)]
    checks = [kwargs for name, kwargs in queued if name == duty.CHECK_TASK]
    assert checks == [{"channel_id": ch.channel_id, "epoch": ch.epoch, "decision_ids": [str(decision.pk)]}]
    redis_client.delete("extract")


def _task(raw_message: str) -> tuple[str, dict]:
    """(task name, kwargs) of a Celery message as kombu's Redis transport stores it."""
    envelope = json.loads(raw_message)
    _, kwargs, _ = json.loads(base64.b64decode(envelope["body"]))
    return envelope["headers"]["task"], kwargs


# --------------------------------------------------------------------------- the hold and the prompt


def _held(ch: ChannelConfig, older_at: datetime, newer_at: datetime, n: int = 1) -> DecisionConflict:
    older = Decision.objects.create(
        channel=ch, organisation_id=ch.organisation_id, friendly_id=f"DEC-{2 * n - 1:04d}", summary=BUDGET,
        decided_by=[ANA], decided_at=older_at, source_ref=sources.source_ref([(f"a{n}", older_at)]),
        source_key=f"a{n}",
    )  # fmt: skip
    newer = Decision.objects.create(
        channel=ch, organisation_id=ch.organisation_id, friendly_id=f"DEC-{2 * n:04d}", summary=BUDGET_NOW,
        decided_by=[TOM], decided_at=newer_at, source_ref=sources.source_ref([(f"b{n}", newer_at)]),
        source_key=f"b{n}",
    )  # fmt: skip
    verdict = contradictions.Verdict("contradicts", "Both concern the hackathon budget; the figures differ.", 0.8)
    return contradictions.record_verdict(older, newer, verdict, cosine=0.9, judge_model="local")


def _raised(channel_ids: set[str]) -> list[DecisionConflict]:
    """Run one raising pass at the frozen now; the pairs of these channels it raised."""
    duty.raise_due()
    return list(DecisionConflict.objects.filter(channel_id__in=channel_ids, status=ConflictStatus.RAISED))


@pytest.mark.django_db
def test_a_pair_is_held_until_both_decisions_are_half_an_hour_old_then_raised_once(redis_client):
    ch = _channel()
    pair = _held(ch, T, T + timedelta(minutes=10))
    mine = {ch.channel_id}

    with time_machine.travel(T + timedelta(minutes=39), tick=False):
        assert _raised(mine) == []  # the newer is 29 minutes old: someone may yet correct it
    with time_machine.travel(T + timedelta(minutes=41), tick=False):
        [raised] = _raised(mine)
        assert raised.pk == pair.pk and raised.raised_at == T + timedelta(minutes=41)
    ref = "contradiction:DEC-0001:DEC-0002"
    assert redis_client.get(claimcheck.key_for(ch.channel_id, ref)) == (
        "One notes that DEC-0002, settled on the 3rd of March (The hackathon budget is 3,500 euros for food and "
        "prizes), appears to differ from the decision of the 3rd of March (DEC-0001: The hackathon budget is "
        "2,000 euros for food and prizes). Both concern the hackathon budget; the figures differ. Shall I record "
        "DEC-0001 as superseded by DEC-0002, or are both to stand?"
    )
    sent = [kw for name, kw in map(_task, redis_client.lrange("respond", 0, -1)) if kw.get("message_ref") == ref]
    assert sent == [
        {
            "channel_id": ch.channel_id,
            "message_ref": ref,
            "buttons": [
                ["contradiction:DEC-0001:DEC-0002:supersede", "Supersede DEC-0001"],
                ["contradiction:DEC-0001:DEC-0002:keep", "Keep both"],
                ["contradiction:DEC-0001:DEC-0002:dismiss", "Dismiss"],
            ],
        }
    ]
    # At most once per pair: later passes, and a redelivered check of the same decisions, raise nothing.
    with time_machine.travel(T + timedelta(days=1), tick=False):
        assert _raised(mine) == [raised] and duty.raise_due() == 0
    older, newer = pair.older, pair.newer
    assert contradictions.record_verdict(older, newer, contradictions.Verdict("contradicts", "x", 0.9), cosine=None,
                                         judge_model="local") is None  # fmt: skip
    redis_client.delete("respond")


@pytest.mark.django_db
@pytest.mark.parametrize("state", [ChannelState.PAUSED, ChannelState.SECURE])
def test_nothing_is_raised_while_the_channel_is_paused_or_secure(state, redis_client):
    ch = _channel()
    pair = _held(ch, T, T + timedelta(minutes=5))
    channels.set_state(ch.channel_id, state, by=ANA)

    with time_machine.travel(T + timedelta(hours=3), tick=False):
        assert _raised({ch.channel_id}) == []
        assert DecisionConflict.objects.get(pk=pair.pk).status == ConflictStatus.HELD
        channels.set_state(ch.channel_id, ChannelState.ACTIVE, by=ANA)
        assert [p.pk for p in _raised({ch.channel_id})] == [pair.pk]
    redis_client.delete("respond")


@pytest.mark.django_db
def test_a_pair_superseded_meanwhile_is_withdrawn_and_never_raised(redis_client):
    ch = _channel()
    pair = _held(ch, T, T + timedelta(minutes=5))
    review.supersede_decision(ch.channel_id, "DEC-0001", "DEC-0002", by=TOM)  # someone answered it first

    with time_machine.travel(T + timedelta(hours=1), tick=False):
        assert duty.raise_due() == 0
    pair.refresh_from_db()
    assert pair.status == ConflictStatus.WITHDRAWN and pair.raised_at is None


@pytest.mark.django_db
def test_the_answers_close_the_pair_for_good():
    ch = _channel()
    pairs = [_held(ch, T, T + timedelta(minutes=5), n) for n in (1, 2, 3)]
    with time_machine.travel(T + timedelta(hours=1), tick=False):
        duty.raise_due()

    assert contradictions.resolve(ch.channel_id, "DEC-0003", "DEC-0004", "keep", by=ANA)
    assert contradictions.resolve(ch.channel_id, "DEC-0005", "DEC-0006", "dismiss", by=ANA)
    # "supersede" counts once the older really is superseded by the newer.
    assert not contradictions.resolve(ch.channel_id, "DEC-0001", "DEC-0002", "supersede", by=ANA)
    review.supersede_decision(ch.channel_id, "DEC-0001", "DEC-0002", by=ANA)
    assert contradictions.resolve(ch.channel_id, "DEC-0001", "DEC-0002", "supersede", by=ANA)
    assert not contradictions.resolve(ch.channel_id, "DEC-0003", "DEC-0004", "dismiss", by=ANA)

    statuses = [DecisionConflict.objects.get(pk=p.pk).status for p in pairs]
    assert statuses == [ConflictStatus.SUPERSEDED, ConflictStatus.KEPT, ConflictStatus.DISMISSED]
    with time_machine.travel(T + timedelta(days=2), tick=False):
        assert duty.raise_due() == 0


@pytest.mark.django_db
def test_a_stated_replacement_is_told_in_the_next_daily_summary():
    ch = _channel(timezone="Europe/Paris")
    plants = _decision(ch, "DEC-0001", PLANTS, datetime(2025, 3, 4, 9, tzinfo=UTC))
    at = datetime(2025, 3, 11, 9, 0, tzinfo=UTC)
    _said(ch, "m-new-plants", PLANTS_SAID, at)
    plants_now = _decision(ch, "DEC-0002", PLANTS_NOW, at, msg="m-new-plants")
    with time_machine.travel(at + timedelta(minutes=1), tick=False):
        duty.check(ch, [str(plants_now.pk)])
    assert Decision.objects.get(pk=plants.pk).status == "superseded"

    [(_, summary)] = [s for s in summaries.summarise_due("daily", datetime(2025, 3, 12, 7, 20, tzinfo=UTC))
                      if s[0].channel_id == ch.channel_id]  # fmt: skip

    assert "- DEC-0001 is superseded by DEC-0002: the team said the plan had changed, and I have marked it so." in (
        summary.summary
    )
    assert Summary.objects.filter(scope_id=ch.channel_id).count() == 1


# --------------------------------------------------------------------------- through a real worker


@pytest.fixture(scope="module")
def check_worker(django_db_setup, django_db_blocker, isolated_redis):  # noqa: F811
    """An extract worker on a broker of this module's own (the session's worker must not take other tests' tasks)."""
    worker = WorkerProcess("extract", service_env(isolated_redis), name="contradictions")
    yield worker
    worker.stop()


@pytest.mark.django_db(transaction=True)
def test_the_check_runs_on_a_worker_and_drops_a_channel_that_moved_to_a_new_epoch(check_worker):
    from pipeline.tasks import check_contradictions

    ch = _channel()
    budget = _decision(ch, "DEC-0001", BUDGET, T)
    budget_now = _decision(ch, "DEC-0002", BUDGET_NOW, T + timedelta(hours=1))
    moved = _channel(epoch=1)
    stale = _decision(moved, "DEC-0001", BUDGET, T)
    stale_now = _decision(moved, "DEC-0002", BUDGET_NOW, T + timedelta(hours=1))

    check_contradictions.delay(moved.channel_id, 0, [str(stale_now.pk)])
    check_contradictions.delay(ch.channel_id, 0, [str(budget_now.pk)])

    pair = wait_for(lambda: DecisionConflict.objects.filter(older=budget, newer=budget_now).first(), timeout=120)
    assert pair.status == ConflictStatus.HELD
    dropped = PipelineCounter.objects.filter(channel_id=moved.channel_id, name="contradiction_check_dropped")
    wait_for(dropped.exists, timeout=60)
    assert not DecisionConflict.objects.filter(older=stale, newer=stale_now).exists()


@pytest.mark.django_db
def test_a_decision_kept_below_the_confidence_floor_never_starts_a_question(settings):
    ch = _channel()
    floor = settings.JEEVES.extract_confidence_min
    plants = _decision(ch, "DEC-0001", PLANTS, T)
    budget = _decision(ch, "DEC-0002", BUDGET, T + timedelta(hours=1))
    Decision.objects.filter(pk=budget.pk).update(confidence=floor - 0.2)  # an unsure older decision
    _said(ch, "m-new-plants", PLANTS_SAID, T + timedelta(days=2))
    plants_now = _decision(ch, "DEC-0005", PLANTS_NOW, T + timedelta(days=2), msg="m-new-plants")
    Decision.objects.filter(pk=plants_now.pk).update(confidence=floor - 0.1)  # an unsure newer one
    budget_now = _decision(ch, "DEC-0006", BUDGET_NOW, T + timedelta(days=2, hours=1))

    duty.check(ch, [str(plants_now.pk), str(budget_now.pk)])

    # The figures differ between DEC-0002 and DEC-0006, but DEC-0002 is unsure: nothing to ask about.
    assert (
        not DecisionConflict.objects.filter(channel=ch)
        .exclude(status=ConflictStatus.SUPERSEDED)
        .exclude(verdict="compatible")
    )
    # The replacement the team stated in so many words still applies, unsure or not.
    plants.refresh_from_db()
    assert (plants.status, plants.superseded_by_id) == ("superseded", plants_now.pk)
