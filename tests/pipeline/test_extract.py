"""pipeline/extract.py over real Postgres and Redis: a window in, knowledge rows out, no verbatim text."""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections import Counter
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test import override_settings

from ground.config import SlotConfig
from ground.queues import Queue
from knowledge import forgetting, receipts, verbatim
from knowledge.models import Action, ChannelConfig, ConversationSignal, Decision, Embedding, Entity, MessageReceipt
from pipeline import claimcheck, classify, debounce, embed, embedder, extract, llm, members, offline, window
from pipeline.tasks import classify_message, embed_records
from tests.fakes.openai_server import FakeOpenAI, answer, computed, serving
from tests.pipeline import evalset

pytestmark = pytest.mark.django_db

BOT = "3531c6e3-2811-58c8-aa49-5621c2d47635@wire.example"
BOT_FREE = "5d1c0b7e-6a70-4a7e-9d38-2f4f1f1d0a11@wire.example"  # a human member


@pytest.fixture
def jeeves_settings(settings):
    cfg = dataclasses.replace(settings.JEEVES, wire_app_id=BOT, extract_debounce_s=3600.0, extract_batch=1000)
    with override_settings(JEEVES=cfg):
        yield cfg


def _feed(conv: dict, upto: int, redis_client) -> ChannelConfig:
    """What the bridge would have done for the first `upto` messages, then Tier 1 for each."""
    ch = conv["channel"]
    channel = ChannelConfig.objects.create(
        channel_id=ch["id"], organisation_id=ch["org"], channel_name=ch["name"], timezone=ch["timezone"]
    )
    members.replace_all(channel.channel_id, evalset.members(conv, BOT))
    for message in conv["messages"][:upto]:
        wm = evalset.window_message(conv, message, BOT)
        if BOT in wm.mentions:
            continue  # the bridge routes @jeeves messages to the respond queue
        receipts.record_receipt(channel.channel_id, wm.id, author_id=wm.author_id, sent_at=wm.ts)
        window.push(channel.channel_id, wm)
        classify.classify_message(channel, wm.id, wm.text)
    return channel


def test_a_window_becomes_decisions_and_actions_with_source_refs(jeeves_settings, redis_client):
    conv = evalset.load("conv-001")
    channel = _feed(conv, 18, redis_client)
    assert MessageReceipt.objects.filter(channel_id=channel.channel_id, outcome="pending_extract").exists()

    report = extract.run(channel)

    assert not report.failed and report.model == "local"
    decision = Decision.objects.get(channel=channel, source_ref__wire_msg_ids__contains=["m010"])
    decisions = Decision.objects.filter(channel=channel).count()
    numbers = sorted(int(d.friendly_id.removeprefix("DEC-")) for d in Decision.objects.filter(channel=channel))
    assert decision.friendly_id.startswith("DEC-") and numbers == list(range(1, decisions + 1))
    actions = {a.friendly_id: a for a in Action.objects.filter(channel=channel)}
    priya = next(a for a in actions.values() if "m013" in a.source_ref["wire_msg_ids"])
    assert priya.owner_id == "40397dcc-1011-59cf-97ef-b05cac034cda@wire.example"
    assert priya.deadline is not None and priya.staleness_at == priya.deadline
    assert Entity.objects.filter(channel_ids__contains=[channel.channel_id]).exists()
    # The watermark moved: nothing pending, receipts at tier 2, a second run writes nothing.
    assert debounce.pending(channel.channel_id) == set()
    assert not MessageReceipt.objects.filter(channel_id=channel.channel_id, outcome="pending_extract").exists()
    again = extract.run(channel)
    assert again.pending == 0 and Decision.objects.filter(channel=channel).count() == decisions

    texts = [m["text"] for m in conv["messages"]]
    stored = [d.summary for d in Decision.objects.all()] + [a.description for a in Action.objects.all()]
    stored += [s.summary for s in ConversationSignal.objects.all()]
    for text in stored:
        assert verbatim.guard_text(text, texts) == text


def test_a_changed_figure_is_a_new_decision_not_a_restatement(jeeves_settings, redis_client):
    conv = evalset.load("conv-001")
    channel = _feed(conv, 18, redis_client)
    extract.run(channel)
    before = Decision.objects.filter(channel=channel).count()
    for message in conv["messages"][18:28]:
        wm = evalset.window_message(conv, message, BOT)
        receipts.record_receipt(channel.channel_id, wm.id, author_id=wm.author_id, sent_at=wm.ts)
        window.push(channel.channel_id, wm)
        classify.classify_message(channel, wm.id, wm.text)
    extract.run(channel)
    # m024 changes 5 attempts to 3: a decision of its own, not a restatement of DEC-0001.
    later = Decision.objects.get(channel=channel, source_ref__wire_msg_ids__contains=["m024"])
    assert later.source_ref["wire_msg_ids"] == ["m024"] and later.friendly_id != "DEC-0001"
    assert Decision.objects.filter(channel=channel).count() > before


def test_debounce_schedules_one_run_per_burst_and_replaces_a_lost_one(jeeves_settings, redis_client):
    cid = "c0ffee00-0000-4000-8000-0000000000d1@wire.example"
    debounce.flush(cid)
    debounce.note_classified(cid, "m1")
    assert debounce.request_extract(cid, 0) == "scheduled"
    debounce.note_classified(cid, "m2")
    assert debounce.request_extract(cid, 0) == "covered"
    # The scheduled run never came (its worker died): once overdue, the next message schedules afresh.
    redis_client.set(f"jeeves:extract:lock:{cid}", "0")
    assert debounce.request_extract(cid, 0) == "rescheduled"
    debounce.flush(cid)
    for i in range(jeeves_settings.extract_batch):
        debounce.note_classified(cid, f"b{i}")
    assert debounce.request_extract(cid, 0) == "now"
    debounce.flush(cid)


def _pending(channel: ChannelConfig, text_by_id: dict[str, str], author: str) -> None:
    """What the bridge and Tier 1 leave for a run: receipts waiting for extraction, the window, the watermark."""
    for n, (wire_msg_id, text) in enumerate(text_by_id.items()):
        at = datetime(2026, 3, 2, 9, n, tzinfo=UTC)
        receipts.record_receipt(channel.channel_id, wire_msg_id, author_id=author, sent_at=at)
        receipts.mark_receipt(channel.channel_id, wire_msg_id, outcome="pending_extract", tier=1)
        window.push(channel.channel_id, window.WindowMessage(wire_msg_id, author, at, text))
        debounce.note_classified(channel.channel_id, wire_msg_id)


@pytest.mark.django_db(transaction=True)
def test_a_message_deleted_while_it_is_extracted_leaves_nothing_resting_on_it(jeeves_settings):
    keep, take_back = str(uuid.uuid4()), str(uuid.uuid4())
    channel = ChannelConfig.objects.create(channel_id=f"{uuid.uuid4()}@wire.example", organisation_id="wire.example")
    _pending(channel, {keep: "I will draft the rota by Friday", take_back: "and we agreed on the blue logo"}, BOT_FREE)

    def thinking(body: dict) -> dict:
        # The author deletes a message while the model thinks: the bridge writes its tombstone first.
        forgetting.tombstone(channel.channel_id, take_back)
        connection.close()  # this thread's own connection
        return {
            "decisions": [
                {"summary": "The team picked a logo.", "source_msg_ids": [keep, take_back], "confidence": 0.9}
            ],
            "actions": [{"description": "A rota will be drafted.", "source_msg_ids": [keep], "confidence": 0.9}],
            "signals": [{"signal_type": "update", "summary": "A logo was discussed.", "source_msg_ids": [take_back]}],
        }

    fake = FakeOpenAI().start()
    fake.default("extract-model", computed(thinking))
    slots = {**jeeves_settings.slots, "extract": SlotConfig(model="extract-model", fallback="local")}
    cfg = dataclasses.replace(jeeves_settings, llm_base_url=fake.base_url, llm_api_key="k", slots=slots)
    llm._router.cache_clear()
    try:
        with override_settings(JEEVES=cfg):
            report = extract.run(channel)
    finally:
        fake.stop()
        llm._router.cache_clear()
        debounce.flush(channel.channel_id)
    assert report.model == "extract-model"
    assert [a.source_ref["wire_msg_ids"] for a in Action.objects.filter(channel=channel)] == [[keep]]
    for model in (Decision, Action, ConversationSignal):
        assert not model.objects.filter(channel=channel, source_ref__wire_msg_ids__contains=[take_back]).exists()


def test_classify_drops_a_message_deleted_before_a_worker_reached_it(jeeves_settings):
    channel = ChannelConfig.objects.create(channel_id=f"{uuid.uuid4()}@wire.example", organisation_id="wire.example")
    wire_msg_id = str(uuid.uuid4())
    receipts.record_receipt(channel.channel_id, wire_msg_id, author_id=BOT_FREE, sent_at=datetime.now(UTC))
    key = claimcheck.park(channel.channel_id, wire_msg_id, "just checking: is the standup moved to ten?")
    forgetting.tombstone(channel.channel_id, wire_msg_id)
    classify_message(channel_id=channel.channel_id, wire_msg_id=wire_msg_id, epoch=0)
    assert receipts.receipt_tier(channel.channel_id, wire_msg_id) == 0
    assert not ConversationSignal.objects.filter(channel=channel).exists()
    assert claimcheck.claim(key) is None


def test_the_offline_engines_records_are_kept_whatever_their_probability(jeeves_settings, redis_client):
    """The confidence floor judges a model's self-report; the offline engine's records already passed the
    thresholds fitted for its heads, and their confidence is a calibrated chance, which may be under any
    floor (a high one here, so that some are)."""
    strict = dataclasses.replace(jeeves_settings, extract_confidence_min=0.95)
    conv = evalset.load("conv-007")
    channel = _feed(conv, 30, redis_client)
    win, pending = window.read(channel.channel_id), debounce.pending(channel.channel_id)
    expected = offline.extract(win, classify.build_context(channel), pending)
    low = [d for d in expected.decisions if d.confidence < strict.extract_confidence_min]
    assert low, "the engine keeps some decisions under the model floor"

    with override_settings(JEEVES=strict):
        extract.run(channel)

    stored = [set(d.source_ref["wire_msg_ids"]) for d in Decision.objects.filter(channel=channel)]
    for decision in low:
        assert any(set(decision.source_msg_ids) & ids for ids in stored)
    # kept with their own calibrated chance, under the floor too (the stored wording of a record the run joins
    # with a later message may lead with another of its messages, so its chance is not compared one for one)
    kept = [d.confidence for d in Decision.objects.filter(channel=channel)]
    assert len([c for c in kept if c < strict.extract_confidence_min]) == len(low), (kept, low)


def _queued(redis_client, queue: str) -> list[tuple[str, dict]]:
    """(task name, kwargs) of each Celery message waiting in `queue` (kombu's Redis transport)."""
    out = []
    for raw_message in redis_client.lrange(queue, 0, -1):
        envelope = json.loads(raw_message)
        _, kwargs, _ = json.loads(base64.b64decode(envelope["body"]))
        out.append((envelope["headers"]["task"], kwargs))
    return out


def test_tier_3_writes_every_records_one_vector_from_its_full_text(jeeves_settings, settings, redis_client):
    """Tier 2 writes rows only; the embed task then gives each record one vector, labelled with the
    embedder's model and made from the text `_record_text_and_meta` builds (for a decision: summary,
    rationale and tags, not the summary alone), while the extraction model is another one."""
    say, todo = str(uuid.uuid4()), str(uuid.uuid4())
    channel = ChannelConfig.objects.create(channel_id=f"{uuid.uuid4()}@wire.example", organisation_id="wire.example")
    _pending(
        channel,
        {say: "ok so standup moves to half nine from next week, the early slot clashes with school runs",
         todo: "I'll move the calendar invite and tell the contractors"},
        BOT_FREE,
    )  # fmt: skip
    redis_client.delete(Queue.EMBED.value)
    extracted = {
        "decisions": [
            {
                "summary": "The daily standup moves to 9:30.",
                "rationale": "The earlier slot clashed with school runs.",
                "tags": ["standup", "schedule"],
                "source_msg_ids": [say],
                "confidence": 0.9,
            },
        ],
        "actions": [{"description": "The calendar invite will be moved.", "source_msg_ids": [todo], "confidence": 0.9}],
        "signals": [
            {"signal_type": "update", "summary": "Contractors will hear of the new time.", "source_msg_ids": [todo]}
        ],
        "entities": [{"name": "Daily standup", "type": "concept", "aliases": ["standup meeting"]}],
    }
    try:
        with serving(settings, {"extract": "extract-model"}, extract_debounce_s=3600.0, extract_batch=1000) as server:
            server.script("extract-model", answer(extracted))
            report = extract.run(channel)
    finally:
        debounce.flush(channel.channel_id)
    assert report.model == "extract-model" and report.written["decision"] == 1
    assert not Embedding.objects.filter(channel_id=channel.channel_id).exists()  # Tier 2 wrote rows only

    queued = [kwargs for name, kwargs in _queued(redis_client, Queue.EMBED.value) if name == extract.EMBED_TASK]
    redis_client.delete(Queue.EMBED.value)
    assert len(queued) == 1
    decision = Decision.objects.get(channel=channel)
    assert ["decision", str(decision.pk)] in queued[0]["records"]
    embed_records(**queued[0])  # the embed task, run here
    embed_records(**queued[0])  # a redelivery writes nothing more

    embedder_model = settings.JEEVES.slot("embed").model
    records = {
        "decision": [decision],
        "action": list(Action.objects.filter(channel=channel)),
        "signal": list(ConversationSignal.objects.filter(channel=channel)),
        "entity": list(Entity.objects.filter(channel_ids__contains=[channel.channel_id])),
    }
    for kind, rows in records.items():
        assert len(rows) == 1, kind
        (row,) = Embedding.objects.filter(source_type=kind, source_id=rows[0].pk)
        assert row.model == embedder_model != "extract-model"
        text = embed._record_text_and_meta(kind, rows[0])[0]
        (expected,) = embedder.embed([text])
        assert max(abs(a - b) for a, b in zip(row.embedding, expected, strict=True)) < 1e-4, kind
    text = embed._record_text_and_meta("decision", decision)[0]
    assert "school runs" in text and "standup" in text.split("Topic:")[-1]
    (summary_only,) = embedder.embed([decision.summary])
    stored = Embedding.objects.get(source_type="decision", source_id=decision.pk).embedding
    assert max(abs(a - b) for a, b in zip(stored, summary_only, strict=True)) > 1e-3


def test_a_restatement_merges_before_and_after_tier_3_and_no_vector_is_stored_meanwhile(
    jeeves_settings, settings, redis_client
):
    """The near-duplicate merge compares Tier-3 texts: with the stored vector once Tier 3 ran, and in memory
    while it has not (the decision of the run before, or an earlier one in the same run)."""
    channel = ChannelConfig.objects.create(channel_id=f"{uuid.uuid4()}@wire.example", organisation_id="wire.example")
    decision = {"summary": "Backups are kept for 30 days in cold storage.", "tags": ["backups"], "confidence": 0.9}
    ids = [str(uuid.uuid4()) for _ in range(4)]
    texts = [
        "right, thirty days of backups in cold storage it is",
        "yes thirty days, cold storage",
        "agreed: backups stay thirty days in the cold tier",
        "and the cold storage keeps them a month",
    ]
    redis_client.delete(Queue.EMBED.value)
    try:
        with serving(settings, {"extract": "extract-model"}, extract_debounce_s=3600.0, extract_batch=1000) as server:
            # Run 1: two restatements of one decision in one run.
            _pending(channel, dict(zip(ids[:2], texts[:2], strict=True)), BOT_FREE)
            server.script(
                "extract-model",
                answer(
                    {"decisions": [{**decision, "source_msg_ids": [ids[0]]}, {**decision, "source_msg_ids": [ids[1]]}]}
                ),
            )
            extract.run(channel)
            assert Decision.objects.filter(channel=channel).count() == 1
            assert not Embedding.objects.filter(channel_id=channel.channel_id).exists()
            # Run 2, before Tier 3 reached run 1's decision: compared in memory.
            _pending(channel, {ids[2]: texts[2]}, BOT_FREE)
            server.script("extract-model", answer({"decisions": [{**decision, "source_msg_ids": [ids[2]]}]}))
            extract.run(channel)
            assert Decision.objects.filter(channel=channel).count() == 1
            assert not Embedding.objects.filter(channel_id=channel.channel_id).exists()
            # Tier 3 runs; run 3 is compared with the stored vector.
            for name, kwargs in _queued(redis_client, Queue.EMBED.value):
                embed_records(**kwargs)
            assert Embedding.objects.filter(channel_id=channel.channel_id, source_type="decision").count() == 1
            _pending(channel, {ids[3]: texts[3]}, BOT_FREE)
            server.script("extract-model", answer({"decisions": [{**decision, "source_msg_ids": [ids[3]]}]}))
            extract.run(channel)
    finally:
        debounce.flush(channel.channel_id)
        redis_client.delete(Queue.EMBED.value)
    (merged,) = Decision.objects.filter(channel=channel)
    assert merged.source_ref["wire_msg_ids"] == ids
    assert Embedding.objects.filter(channel_id=channel.channel_id, source_type="decision").count() == 1


def test_a_models_prompt_is_the_burst_after_a_short_tail_and_stored_records_stand_in_for_the_rest(
    jeeves_settings, settings, redis_client
):
    """A run shows the model its new messages after at most JEEVES_EXTRACT_CONTEXT_MESSAGES earlier ones, not the
    whole window: what earlier runs stored (an open action here, with the ids it rests on) stands in for the
    other earlier messages, and the model can still continue it by citing those ids. A message that reached the
    window but not yet Tier 1 waits for the next run."""
    channel = ChannelConfig.objects.create(channel_id=f"{uuid.uuid4()}@wire.example", organisation_id="wire.example")
    earlier = {str(uuid.uuid4()): text for text in [
        "the pottery kiln on the second floor needs its thermocouple swapped",
        "I can order the thermocouple and fit it before the Saturday firing",
        "thanks, the glaze class is booked for that Saturday",
        "does anyone know where the spare kiln shelves went",
        "they are stacked behind the clay bins",
        "great, found them",
        "the wheel room door sticks again",
        "I'll oil the hinges at lunch",
    ]}  # fmt: skip
    new = {str(uuid.uuid4()): text for text in [
        "thermocouple is in and the kiln holds temperature now",
        "lovely, thank you",
    ]}  # fmt: skip
    later = str(uuid.uuid4())
    [order_id, *_] = earlier
    *_, thanks_id = new
    try:
        with serving(
            settings, {"extract": "extract-model"}, extract_debounce_s=3600.0, extract_batch=1000,
            extract_context_messages=3, extract_context_tokens=1000,
        ) as server:  # fmt: skip
            _pending(channel, earlier, BOT_FREE)
            order = {"description": "A replacement thermocouple will be ordered and fitted.", "confidence": 0.9}
            server.script("extract-model", answer({"actions": [{**order, "source_msg_ids": [order_id]}]}))
            extract.run(channel)
            (action,) = Action.objects.filter(channel=channel)
            assert action.status == "open"

            _pending(channel, new, BOT_FREE)
            at = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
            window.push(channel.channel_id, window.WindowMessage(later, BOT_FREE, at, "who has the van keys"))
            done = {**order, "status": "done", "source_msg_ids": [order_id, next(iter(new))]}
            server.script("extract-model", answer({"actions": [done]}))
            extract.run(channel)
            sent = json.loads(server.calls("extract-model")[-1].body["messages"][-1]["content"])
    finally:
        debounce.flush(channel.channel_id)
        window.flush(channel.channel_id)

    shown = [(m["id"], m["new"]) for m in sent["messages"]]
    assert shown == [(i, False) for i in list(earlier)[-3:]] + [(i, True) for i in new]
    assert later not in json.dumps(sent) and thanks_id in json.dumps(sent)
    assert sent["open_actions"] == [
        {"id": action.friendly_id, "description": action.description, "owner": None, "msg_ids": [order_id]}
    ]
    action.refresh_from_db()
    assert action.status == "done" and action.source_ref["wire_msg_ids"] == [order_id, next(iter(new))]
    assert Action.objects.filter(channel=channel).count() == 1


def test_tier_one_and_tier_two_write_one_signal_per_message(jeeves_settings, redis_client):
    # Tier 1 keeps a gist signal for a low-signal message; the next run extracts the same message (it is in
    # the burst) and may find the same signal: one row, whichever tier writes first.
    conv = evalset.load("conv-001")
    channel = _feed(conv, len(conv["messages"]), redis_client)
    tier_one = ConversationSignal.objects.filter(channel=channel).count()
    extract.run(channel)
    signals = ConversationSignal.objects.filter(channel=channel)
    resting_on = Counter(tuple(s.source_ref["wire_msg_ids"]) for s in signals)
    assert tier_one and resting_on
    assert [ids for ids, n in resting_on.items() if n > 1] == []


def test_the_offline_engine_reads_one_message_past_the_last_classified_one_and_a_later_move_continues_the_action(
    jeeves_settings, redis_client, monkeypatch
):
    """The offline engine reads the window up to the last pending message and `offline.LOOKAHEAD` (one) message
    after it, as the simulator does; what is further on (not classified yet) is the next run's. The owner's
    date in the next run updates the action stored before."""
    from pipeline.members import Member
    from pipeline.offline import bursts

    ana, ben = (f"{uuid.uuid4()}@wire.example" for _ in range(2))
    channel = ChannelConfig.objects.create(
        channel_id=f"{uuid.uuid4()}@wire.example", organisation_id="wire.example", timezone="Europe/London"
    )
    members.replace_all(
        channel.channel_id, [Member(ana, name="Ana Lopez", handle="ana"), Member(ben, name="Ben Okafor", handle="ben")]
    )
    said = [
        ("r1", ana, "the loading bay lights flicker again and the electrician wants the floor plan", []),
        ("r2", ana, "@ben can you send the electrician the floor plan of the loading bay?", [ben]),
        ("r3", ben, "ok, will do", []),
        ("r4", ben, "sorry, that slips to Thursday", []),
    ]
    at = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)  # a Monday
    for n, (wire_msg_id, author, text, mentions) in enumerate(said):
        sent = at.replace(minute=n)
        receipts.record_receipt(channel.channel_id, wire_msg_id, author_id=author, sent_at=sent)
        window.push(channel.channel_id, window.WindowMessage(wire_msg_id, author, sent, text, mentions))
    assert offline.LOOKAHEAD == 1
    read: list[list[str]] = []
    engine = bursts.extract_window

    def spy(win, ctx, pending, **kwargs):
        read.append([m.id for m in win])
        return engine(win, ctx, pending, **kwargs)

    monkeypatch.setattr(bursts, "extract_window", spy)
    for wire_msg_id in ("r1", "r2"):  # the next two are in the window, still being classified
        receipts.mark_receipt(channel.channel_id, wire_msg_id, outcome="pending_extract", tier=1)
        debounce.note_classified(channel.channel_id, wire_msg_id)

    extract.run(channel)
    assert read == [["r1", "r2", "r3"]]
    [action] = Action.objects.filter(channel=channel)
    assert action.source_ref["wire_msg_ids"] == ["r2", "r3"] and action.deadline is None and action.owner_id == ben

    for wire_msg_id in ("r3", "r4"):
        receipts.mark_receipt(channel.channel_id, wire_msg_id, outcome="pending_extract", tier=1)
        debounce.note_classified(channel.channel_id, wire_msg_id)
    extract.run(channel)
    assert read[1] == ["r1", "r2", "r3", "r4"]
    [action] = Action.objects.filter(channel=channel)
    assert action.source_ref["wire_msg_ids"] == ["r2", "r3", "r4"]
    assert action.deadline.date().isoformat() == "2026-05-07"


def _channel_with(said: list[tuple[str, str, str, list[str]]], people: list[tuple[str, str, str]]) -> ChannelConfig:
    """A channel whose window holds `said` (id, author, text, mentions), one message a minute from a Monday."""
    from pipeline.members import Member

    channel = ChannelConfig.objects.create(
        channel_id=f"{uuid.uuid4()}@wire.example", organisation_id="wire.example", timezone="Europe/London"
    )
    members.replace_all(channel.channel_id, [Member(u, name=name, handle=handle) for u, name, handle in people])
    at = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)  # a Monday
    for n, (wire_msg_id, author, text, mentions) in enumerate(said):
        sent = at.replace(minute=7 * n)
        receipts.record_receipt(channel.channel_id, wire_msg_id, author_id=author, sent_at=sent)
        window.push(channel.channel_id, window.WindowMessage(wire_msg_id, author, sent, text, mentions))
    return channel


def test_a_run_of_many_pending_messages_is_extracted_in_the_bursts_the_engine_was_fitted_on(
    jeeves_settings, redis_client, monkeypatch
):
    """Messages that came fast are one run; the offline engine extracts them burst by burst as the simulator
    does (a burst closes at the third message after a high-signal one), so a record does not gather evidence
    from every later message of the run: what is stored does not depend on how fast the messages came."""
    from pipeline.offline import bursts

    ana, ben, cara, dan = (f"{uuid.uuid4()}@wire.example" for _ in range(4))
    channel = _channel_with(
        [
            ("q1", ana, "the cold store inspection is on the 20th and the compliance binder is nowhere", []),
            ("q2", ben, "I'll put the compliance binder together by Thursday", []),
            ("q3", ana, "thanks Ben", []),
            ("q4", cara, "the forklift rota needs redoing too", []),
            ("q5", dan, "agreed, it's a mess", []),
            ("q6", cara, "I can redo the rota this week", []),
            ("q7", ben, "compliance binder is mostly there, will finish it friday", []),
            ("q8", dan, "nice", []),
        ],
        [(ana, "Ana Lopez", "ana"), (ben, "Ben Okafor", "ben"), (cara, "Cara Diaz", "cara"), (dan, "Dan Wu", "dan")],
    )
    for n in range(1, 9):
        high = n in (2, 6)
        receipts.mark_receipt(channel.channel_id, f"q{n}", outcome="pending_extract" if high else "routine", tier=1)
        debounce.note_classified(channel.channel_id, f"q{n}")
    read: list[tuple[list[str], list[str]]] = []
    engine = bursts.extract_window

    def spy(win, ctx, pending, **kwargs):
        read.append(([m.id for m in win], sorted(pending)))
        return engine(win, ctx, pending, **kwargs)

    monkeypatch.setattr(bursts, "extract_window", spy)
    extract.run(channel)
    # Two bursts, each read with the one message after it (the engine's look-ahead), not one of eight.
    assert read == [
        (["q1", "q2", "q3", "q4", "q5", "q6"], ["q1", "q2", "q3", "q4", "q5"]),
        (["q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8"], ["q6", "q7", "q8"]),
    ]
    binder = Action.objects.get(channel=channel, owner_id=ben)
    # Ben's later word in the next burst moves nothing: it is not gathered into the action of the first.
    assert binder.source_ref["wire_msg_ids"] == ["q2"] and binder.deadline.date().isoformat() == "2026-05-07"
    assert Action.objects.filter(channel=channel, owner_id=cara).count() == 1
    assert not MessageReceipt.objects.filter(channel_id=channel.channel_id, outcome="pending_extract").exists()


def test_two_actions_read_with_the_next_runs_message_are_not_merged(jeeves_settings, redis_client):
    """The message after a run's last pending one (read by the offline engine, extracted by the next run) is not
    one an earlier run extracted: two actions of this run resting on it are two actions, not one continuing the
    other."""
    from pipeline.schemas import ExtractedAction, ExtractResult

    ana, ben = (f"{uuid.uuid4()}@wire.example" for _ in range(2))
    channel = _channel_with(
        [
            ("s1", ana, "I'll sort out the parking permits for the visitors", []),
            ("s2", ben, "and I'll print the name badges for the open day", []),
            ("s3", ana, "both of those by Wednesday please, the guest list is final", []),
        ],
        [(ana, "Ana Lopez", "ana"), (ben, "Ben Okafor", "ben")],
    )
    win = window.read(channel.channel_id)
    result = ExtractResult(
        actions=[
            ExtractedAction(
                description="Ana to sort out visitor parking permits.",
                owner_id=ana,
                source_msg_ids=["s1", "s3"],
                confidence=0.9,
            ),
            ExtractedAction(
                description="Ben to print the open day name badges.",
                owner_id=ben,
                source_msg_ids=["s2", "s3"],
                confidence=0.9,
            ),
        ]
    )
    extract._write(channel, classify.build_context(channel), win, {"s1", "s2"}, result, "local", "offline")
    stored = Action.objects.filter(channel=channel).order_by("created_at")
    assert [a.owner_id for a in stored] == [ana, ben]
    assert [a.source_ref["wire_msg_ids"] for a in stored] == [["s1", "s3"], ["s2", "s3"]]


def _arrives(channel: ChannelConfig, wire_msg_id: str, author: str, text: str, *, minute: int) -> None:
    """A message into the channel's window, sent at `minute` past nine on the Monday of `_channel_with`."""
    sent = datetime(2026, 5, 4, 9, minute, tzinfo=UTC)
    receipts.record_receipt(channel.channel_id, wire_msg_id, author_id=author, sent_at=sent)
    window.push(channel.channel_id, window.WindowMessage(wire_msg_id, author, sent, text, []))


def _extracted_alone(channel: ChannelConfig, wire_msg_id: str) -> None:
    """The message classified and extracted in a run of its own (a chat's pace)."""
    receipts.mark_receipt(channel.channel_id, wire_msg_id, outcome="pending_extract", tier=1)
    debounce.note_classified(channel.channel_id, wire_msg_id)
    extract.run(channel)


def test_a_reply_in_the_next_run_dates_the_request_of_the_burst_it_continues(jeeves_settings, redis_client):
    """A request extracted alone (the chat's pace: one message a run) leaves its burst open; the owner's short reply
    in the next run continues it, as if both had been one burst: the stored action gets the reply's date (not a
    move, so before only the same run or the look-ahead could give it)."""
    ana, ben = (f"{uuid.uuid4()}@wire.example" for _ in range(2))
    people = [(ana, "Ana Lopez", "ana"), (ben, "Ben Okafor", "ben")]
    channel = _channel_with(
        [("t1", ana, "@ben could you collect the spare keys for the workshop from the landlord?", [ben])], people
    )
    _extracted_alone(channel, "t1")
    [action] = Action.objects.filter(channel=channel)
    assert action.owner_id == ben and action.deadline is None
    assert debounce.open_burst(channel.channel_id) == (["t1"], 3)

    _arrives(channel, "t2", ben, "sure, wednesday", minute=7)
    _extracted_alone(channel, "t2")
    [action] = Action.objects.filter(channel=channel)  # continued, not a second one
    assert action.source_ref["wire_msg_ids"] == ["t1", "t2"] and action.owner_id == ben
    assert action.deadline.date().isoformat() == "2026-05-06"


def test_a_burst_read_again_by_the_next_run_does_not_count_its_entities_twice(jeeves_settings, redis_client):
    """The next run reads the open burst's messages again to continue its records; the entities those messages
    name were counted by the run that extracted them (one mention per run that named it), not again."""
    from knowledge.models import Entity

    ana, ben = (f"{uuid.uuid4()}@wire.example" for _ in range(2))
    people = [(ana, "Ana Lopez", "ana"), (ben, "Ben Okafor", "ben")]
    channel = _channel_with(
        [("e1", ana, "@ben could you book the Harrow Lodge venue for the away day?", [ben])], people
    )
    _extracted_alone(channel, "e1")
    counts = dict(
        Entity.objects.filter(channel_ids__contains=[channel.channel_id]).values_list("name", "mention_count")
    )
    assert counts and set(counts.values()) == {1}, counts
    assert debounce.open_burst(channel.channel_id)[0] == ["e1"]

    _arrives(channel, "e2", ben, "sure, on it", minute=7)
    _extracted_alone(channel, "e2")
    after = dict(Entity.objects.filter(channel_ids__contains=[channel.channel_id]).values_list("name", "mention_count"))
    assert after == counts


def test_several_decisions_on_one_message_are_kept_apart_and_written_once_when_the_run_is_redelivered(
    jeeves_settings, redis_client
):
    """The offline engine gives a list of decisions one record per item, all resting on the one message: each is
    its own row (its key's ordinal among the run's decisions on those ids), and the same run delivered again
    writes none of them twice."""
    from pipeline.schemas import ExtractedDecision, ExtractResult

    ana, ben = (f"{uuid.uuid4()}@wire.example" for _ in range(2))
    channel = _channel_with(
        [
            ("s1", ben, "what did the depot review settle?", []),
            (
                "s2",
                ana,
                "Settled:\n1. The loading bay opens at six from next week.\n2. Overtime stays capped at ten hours."
                "\n3. Weekend deliveries pause until the new van arrives.",
                [],
            ),
        ],
        [(ana, "Ana Lopez", "ana"), (ben, "Ben Okafor", "ben")],
    )
    win = window.read(channel.channel_id)
    said = ("Loading bay opens at six from next week.", "Overtime capped at ten hours.", "Weekend deliveries paused.")
    result = ExtractResult(
        decisions=[ExtractedDecision(summary=s, decided_by=[ana], source_msg_ids=["s2"], confidence=0.9) for s in said]
    )
    ctx = classify.build_context(channel)
    for _ in range(2):  # the run, and the run redelivered
        extract._write(channel, ctx, win, {"s1", "s2"}, result, "local", "offline")
        stored = Decision.objects.filter(channel=channel).order_by("friendly_id")
        assert [d.summary for d in stored] == list(said)
        assert len({d.source_key for d in stored}) == 3 and all(d.source_ref["wire_msg_ids"] == ["s2"] for d in stored)
