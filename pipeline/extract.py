"""Tier 2: one extraction run for a channel. Reads the window at run time, asks the extract slot
(or the offline engine), validates, and writes decisions, actions, entities, relationships and
signals in one transaction through knowledge/records.py and knowledge/entities.py; then queues Tier 3
with record ids."""

from __future__ import annotations

import json
import logging
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from zoneinfo import ZoneInfo

from celery import current_app
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction

from ground.config import LOCAL_MODEL
from ground.queues import Queue
from knowledge import forgetting, receipts
from knowledge.counters import bump_counter
from knowledge.entities import entity_fields, new_entity_aliases, normalise_name, upsert_entity, upsert_relationship
from knowledge.models import (
    Action,
    ActionStatus,
    ChannelConfig,
    Decision,
    DecisionStatus,
    Entity,
    MessageReceipt,
)
from knowledge.records import (
    ActionDraft,
    DecisionDraft,
    SignalDraft,
    continue_decision,
    decision_fields,
    record_action,
    record_decision,
    record_signal,
)
from knowledge.sources import SIGNAL_KEY, source_key, source_ref
from knowledge.verbatim import VerbatimText
from pipeline import contradictions, debounce, embed, llm, prompts, window
from pipeline.classify import build_context, context_json
from pipeline.context import ChannelContext
from pipeline.offline import bursts, features
from pipeline.schemas import ExtractedAction, ExtractedDecision, ExtractedEntity, ExtractedSignal, ExtractResult
from pipeline.window import WindowMessage

logger = logging.getLogger(__name__)

EMBED_TASK = "pipeline.tasks.embed_records"
_ACTIVE_DECISIONS_IN_PROMPT = 20
# Open actions resting on window messages the prompt leaves out, most recent first.
_OPEN_ACTIONS_IN_PROMPT = 10
# Records Tier 3 has not embedded yet that a run's merges compare in memory, most recent first. Tier 3
# usually runs within seconds, so this is the previous run's records at most.
_UNEMBEDDED_COMPARED = 50


@dataclass
class RunReport:
    """What one run did (ids and counts only)."""

    pending: int = 0
    evicted: int = 0
    written: Counter = field(default_factory=Counter)
    failed: bool = False
    model: str = ""


def run(channel: ChannelConfig) -> RunReport:
    """Extract the channel's pending messages. The caller holds the channel's running lock."""
    report = RunReport()
    win = window.read(channel.channel_id)
    pending_set = debounce.pending(channel.channel_id)
    deleted = forgetting.tombstoned(channel.channel_id, {m.id for m in win} | pending_set)
    if deleted:  # their authors deleted them: neither evidence nor context
        win = [m for m in win if m.id not in deleted]
        pending_set -= deleted
        debounce.mark_extracted(channel.channel_id, deleted)
    by_id = {m.id: m for m in win}
    report.evicted = _count_evicted(channel.channel_id, pending_set - by_id.keys())
    pending_ids = [m.id for m in win if m.id in pending_set]
    report.pending = len(pending_ids)
    if not pending_ids:
        return report
    high = set(
        MessageReceipt.objects.filter(
            channel_id=channel.channel_id, wire_msg_id__in=pending_ids, outcome=MessageReceipt.Outcome.PENDING_EXTRACT
        ).values_list("wire_msg_id", flat=True)
    )
    if not high:
        return report  # only low-signal messages: they wait as context for the next high-signal one

    ctx = build_context(channel)
    if settings.JEEVES.slot("extract").model == LOCAL_MODEL:
        _tier1_vectors(channel.channel_id, win)
    prompt = prompts.load("extract")
    planned, left_open = bursts.split(pending_ids, high, *debounce.open_burst(channel.channel_id))
    try:
        answer = llm.structured(
            "extract",
            # The prompt (its token counts, the active decisions and open actions) is built only for a model.
            lambda: _messages(channel, ctx, win, set(pending_ids), prompt.text),
            ExtractResult,
            # The offline engine extracts the run's pending messages burst by burst, as it was fitted: what it
            # stores does not depend on how many messages the debounce gathered (`pipeline.offline.bursts`).
            lambda: bursts.extract(win, ctx, planned),
            channel_id=channel.channel_id,
        )
    except (llm.SlotFailure, SoftTimeLimitExceeded) as exc:
        logger.warning("extraction failed: channel=%s (%s)", channel.channel_id, type(exc).__name__)
        _record_failure(channel, win, pending_ids)
        report.failed = True
    else:
        report.model = answer.model
        version = "offline" if answer.model == "local" else prompt.version
        written = _write(channel, ctx, win, set(pending_ids), answer.value, answer.model, version)
        report.written.update({kind: len(ids) for kind, ids in written.items()})
        # A delete that arrived during the run: what was just committed may rest on it.
        for wire_msg_id in forgetting.tombstoned(channel.channel_id, by_id):
            forgetting.forget_message(channel.channel_id, wire_msg_id)
        _queue_embeddings(channel, written)
        contradictions.queue_check(channel, written["decision"])
        debounce.note_open_burst(channel.channel_id, *(left_open if answer.model == LOCAL_MODEL else ([], None)))
    _finish(channel.channel_id, pending_ids)
    return report


def _tier1_vectors(channel_id: str, win: list[WindowMessage]) -> None:
    """The vectors Tier 1 computed of the window's messages (`window.keep_vectors`) that this process does not
    hold, into the offline engine's cache: it reads every message of the window, and would embed each again.
    The channel's stored vectors of messages no longer in the window go (one round trip)."""
    texts = [features.message_text(m.text) for m in win]
    wanted = [k for k, held in enumerate(features.cached(texts)) if not held and texts[k].strip()]
    found = window.vectors(channel_id, [m.id for m in win], [win[k].id for k in wanted])
    if found:
        at = [k for k in wanted if win[k].id in found]
        features.unpack([texts[k] for k in at], [found[win[k].id] for k in at])


# --------------------------------------------------------------------------- the prompt


def _messages(
    channel: ChannelConfig, ctx: ChannelContext, win: list[WindowMessage], pending: set[str], system: str
) -> list[dict[str, str]]:
    """The model's prompt: the burst (from the first new message to the last) after a short tail of earlier
    messages (`JEEVES_EXTRACT_CONTEXT_MESSAGES`, within `JEEVES_EXTRACT_CONTEXT_TOKENS`), not the whole window.
    The window's other earlier messages were extracted by earlier runs: what those runs stored stands in for
    them (the active decisions resting on them carry their ids, and the open actions resting on them are
    listed with theirs, so a new message can still continue one). Messages after the last new one are not
    classified yet and wait for the next run. `_write` checks citations and verbatim text against the whole
    window, as before."""
    cfg = settings.JEEVES
    tz = ZoneInfo(ctx.timezone)
    entries = {m.id: _entry(m, ctx, tz, m.id in pending) for m in win}
    shown = window.excerpt(
        win,
        pending,
        lead=cfg.extract_context_messages,
        budget=cfg.extract_context_tokens,
        size=lambda m: _tokens(entries[m.id]),
    )
    on_show = {m.id for m in shown}
    left_out = [m.id for m in win if m.id not in on_show]
    active = Decision.objects.filter(channel=channel, status=DecisionStatus.ACTIVE).order_by("-decided_at")
    payload: dict = {
        "context": context_json(ctx),
        "active_decisions": [
            {"id": d.friendly_id, "summary": d.summary} | _resting_on(d.source_ref, left_out)
            for d in active[:_ACTIVE_DECISIONS_IN_PROMPT]
        ],
    }
    if left_out:
        actions = Action.objects.filter(
            channel=channel, status=ActionStatus.OPEN, source_ref__wire_msg_ids__has_any_keys=left_out
        ).order_by("-created_at")[:_OPEN_ACTIONS_IN_PROMPT]
        if actions:
            payload["open_actions"] = [
                {"id": a.friendly_id, "description": a.description, "owner": a.owner_name}
                | _resting_on(a.source_ref, left_out)
                for a in actions
            ]
    payload["messages"] = [entries[m.id] for m in shown]
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": json.dumps(payload, ensure_ascii=False)},
    ]


def _entry(m: WindowMessage, ctx: ChannelContext, tz: ZoneInfo, new: bool) -> dict:
    return {
        "id": m.id,
        "new": new,
        "time": m.ts.astimezone(tz).strftime("%a %Y-%m-%d %H:%M"),
        "author_id": m.author_id,
        "author": ctx.display_name(m.author_id),
        "mentions": [ctx.display_name(u) for u in m.mentions],
        "text": m.text,
    }


def _tokens(entry: dict) -> int:
    from litellm import token_counter

    # litellm's default tokenizer: the provider's own may count a little differently; this is a bound.
    return int(token_counter(text=json.dumps(entry, ensure_ascii=False)))


def _resting_on(source_ref: dict, left_out: list[str]) -> dict:
    """{"msg_ids": […]}: the window messages left out of the prompt that a stored record rests on, if any."""
    ids = [i for i in (source_ref or {}).get("wire_msg_ids") or [] if i in left_out]
    return {"msg_ids": ids} if ids else {}


# --------------------------------------------------------------------------- writing


def _resolve_member(ctx: ChannelContext, raw: str | None) -> str | None:
    """A qualified member id for what the model named (qualified id, bare uuid, handle or name)."""
    if not raw:
        return None
    raw = raw.strip()
    humans = [m for m in ctx.members if m.user_id not in ctx.bot_ids]
    for m in humans:
        if m.user_id == raw or m.user_id.partition("@")[0] == raw.partition("@")[0]:
            return m.user_id
    found = ctx.member_by_handle(raw) or ctx.member_by_name(raw)
    if found is not None and found.user_id not in ctx.bot_ids:
        return found.user_id
    return None


def _plausible(day: date | None, said_at: list[datetime], tz: str) -> date | None:
    """A deadline a model gave, kept only when it could be one: not before the day the action was said (a day's
    slack for timezones), not more than five years after. A model's 1970 is no deadline."""
    if day is None or not said_at:
        return day
    zone = ZoneInfo(tz)
    first = min(said_at).astimezone(zone).date()
    last = max(said_at).astimezone(zone).date()
    if (first - day).days > 1 or (day - last).days > 5 * 366:
        return None
    return day


def _deadline(day: date | None, tz: str) -> datetime | None:
    # A deadline is a channel-local calendar date; it falls due at the end of that day.
    if day is None:
        return None
    return datetime.combine(day, time(23, 59, 59), tzinfo=ZoneInfo(tz))


def _resolve_members(ctx: ChannelContext, raws: Sequence[str]) -> list[str]:
    """The qualified ids of the members the model named, those it could resolve."""
    return [u for u in (_resolve_member(ctx, r) for r in raws) if u]


def _cited(ids: Sequence[str], by_id: dict[str, WindowMessage]) -> list[str]:
    return list(dict.fromkeys(i for i in ids if i in by_id))


def _ref(ids: Sequence[str], by_id: dict[str, WindowMessage]) -> dict:
    return source_ref([(i, by_id[i].ts) for i in ids])


def _latest(ids: Sequence[str], by_id: dict[str, WindowMessage]) -> datetime:
    return max(by_id[i].ts for i in ids)


def _write(
    channel: ChannelConfig,
    ctx: ChannelContext,
    win: list[WindowMessage],
    pending: set[str],
    result: ExtractResult,
    model: str,
    version: str,
) -> dict[str, list[str]]:
    """Validate and write every item in one transaction; returns new/updated record ids by kind."""
    # The floor judges a model's self-reported confidence. The offline engine's records have already passed
    # the thresholds fitted for each of its heads (their confidence is the head's probability, often under
    # 0.6 for a record the engine keeps): a second cut here dropped most of its decisions (dev through the
    # real stack: decisions recall 0.41, against 0.57 for the same engine in process).
    floor = settings.JEEVES.extract_confidence_min if model != LOCAL_MODEL else 0.0
    by_id = {m.id: m for m in win}
    texts = [m.text for m in win]
    run_key = source_key("run", sorted(pending))
    # What a record continues: the messages earlier runs extracted. Not the pending ones (this run's), nor those
    # after the last pending one (the offline engine reads `offline.LOOKAHEAD` of them; the next run's): an action
    # resting on such a message with another of this run's records would be merged into it as its continuation
    # (two self-commitments of one run, each read with the same next message, became one record).
    last = max((k for k, m in enumerate(win) if m.id in pending), default=-1)
    extracted = {m.id for m in win[:last]} - pending

    def earlier(ids: list[str]) -> list[str]:
        return [i for i in ids if i in extracted]

    written: dict[str, list[str]] = {"decision": [], "action": [], "signal": [], "entity": []}

    def kept(item: ExtractedDecision | ExtractedAction | ExtractedSignal) -> list[str]:
        """The messages a decision, action or signal rests on; none when it is under the floor, cites no
        message of the window or none of the pending ones (those are earlier runs' to write)."""
        ids = _cited(item.source_msg_ids, by_id)
        return ids if item.confidence >= floor and ids and pending & set(ids) else []

    decisions = [(d, ids) for d in result.decisions if (ids := kept(d))]
    entities = [e for e in result.entities if e.name.strip()]
    near = _comparison_vectors(channel, texts, [d for d, _ in decisions], entities)

    def guarded(kind: str, write, *args, **kwargs):
        try:
            return write(*args, **kwargs)
        except VerbatimText:
            bump_counter(channel.channel_id, "verbatim_rejected")
            logger.warning("dropped a %s that repeated a message verbatim: channel=%s", kind, channel.channel_id)
            return None

    with transaction.atomic():
        ordinals: Counter = Counter()

        def next_key(kind: str, ids: list[str]) -> str:
            # Two records of one kind on the same messages get ordinals 0, 1, …: stable on redelivery.
            slot = (kind, *sorted(ids))
            ordinals[slot] += 1
            return source_key(kind, ids, ordinals[slot] - 1)

        def write_record(kind: str, write, key_kind: str, ids: list[str], draft, **context):
            """A decision, action or signal (`draft`) resting on `ids`, with where it comes from: the messages'
            ids and times, and its key. None when the verbatim guard dropped it."""
            return guarded(
                kind,
                write,
                channel,
                draft,
                source=_ref(ids, by_id),
                sources_text=texts,
                key=next_key(key_kind, ids),
                **context,
            )

        decision_by_msg: dict[str, Decision] = {}
        for (item, ids), vector in zip(decisions, near.decisions, strict=True):
            if item.continues:
                continued = continue_decision(channel, source=_ref(ids, by_id), continues_ids=earlier(ids))
                if continued is not None:
                    written["decision"].append(str(continued.pk))
                    for i in ids:
                        decision_by_msg.setdefault(i, continued)
                continue
            out = write_record(
                "decision",
                record_decision,
                "dec",
                ids,
                DecisionDraft(
                    summary=item.summary,
                    rationale=item.rationale,
                    decided_by=_resolve_members(ctx, item.decided_by),
                    decided_at=_latest(ids, by_id),
                    confidence=item.confidence,
                    tags=item.tags,
                    extraction_model=model,
                    prompt_version=version,
                ),
                vector=vector,
                restates=item.restates_existing,
                unembedded=near.unembedded_decisions,
            )
            if out is not None:
                written["decision"].append(str(out.record.pk))
                if out.created and vector is not None:  # no vector until Tier 3: compared in memory meanwhile
                    near.unembedded_decisions[out.record.pk] = vector
                for i in ids:
                    decision_by_msg.setdefault(i, out.record)

        for item in result.actions:
            if not (ids := kept(item)):
                continue
            owner = _resolve_member(ctx, item.owner_id)
            related = next((decision_by_msg[i] for i in item.related_decision_msg_ids if i in decision_by_msg), None)
            if related is None and item.related_decision_msg_ids:
                related = (
                    Decision.objects.filter(
                        channel=channel, source_ref__wire_msg_ids__has_any_keys=item.related_decision_msg_ids
                    )
                    .order_by("-decided_at")
                    .first()
                )
            out = write_record(
                "action",
                record_action,
                "act",
                ids,
                ActionDraft(
                    description=item.description,
                    owner_id=owner,
                    owner_name=ctx.display_name(owner) if owner else None,
                    deadline=_deadline(
                        _plausible(item.deadline, [by_id[i].ts for i in ids], ctx.timezone), ctx.timezone
                    ),
                    status=item.status,
                    confidence=item.confidence,
                    related_decision=related,
                    tags=item.tags,
                    extraction_model=model,
                    prompt_version=version,
                ),
                continues_ids=earlier(ids),
                created_at=_latest(ids, by_id),
            )
            if out is not None:
                written["action"].append(str(out.record.pk))

        seen_at = max(by_id[i].ts for i in pending if i in by_id)
        entity_by_name: dict[str, Entity] = {}
        for item, vector in zip(entities, near.entities, strict=True):
            out = guarded(
                "entity",
                upsert_entity,
                channel,
                name=item.name,
                entity_type=item.type,
                aliases=item.aliases,
                seen_at=seen_at,
                sources_text=texts,
                vector=vector,
                run_key=run_key,
                mention_ids=sorted(pending),
                unembedded=near.unembedded_entities,
            )
            if out is not None:
                entity_by_name[normalise_name(item.name)] = out.record
                for alias in item.aliases:
                    entity_by_name.setdefault(normalise_name(alias), out.record)
                if out.created:
                    written["entity"].append(str(out.record.pk))
                    if vector is not None:
                        near.unembedded_entities[out.record.pk] = vector

        for rel in result.relationships:
            source = _entity(channel, entity_by_name, rel.source)
            target = _entity(channel, entity_by_name, rel.target)
            if source is None or target is None or source.pk == target.pk or rel.confidence < floor:
                continue
            ids = _cited(rel.source_msg_ids, by_id) or [i for i in by_id if i in pending]
            guarded(
                "relationship",
                upsert_relationship,
                channel,
                source=source,
                target=target,
                relationship=rel.relationship,
                observed_at=_latest(ids, by_id),
                ref=_ref(ids, by_id),
                context=rel.context,
                sources_text=texts,
                confidence=rel.confidence,
            )

        for item in result.signals:
            if not (ids := kept(item)):
                continue
            # Keyed by its messages, not its type: Tier 1 may have kept the same message's gist already
            # (pipeline.classify, the same key), and one message is one signal whichever tier wrote it.
            participants = _resolve_members(ctx, item.participants)
            out = write_record(
                "signal",
                record_signal,
                SIGNAL_KEY,
                ids,
                SignalDraft(
                    signal_type=item.signal_type,
                    summary=item.summary,
                    occurred_at=_latest(ids, by_id),
                    participants=participants or list(dict.fromkeys(by_id[i].author_id for i in ids)),
                    confidence=item.confidence,
                    extraction_model=model,
                ),
            )
            if out is not None:
                written["signal"].append(str(out.record.pk))
    return written


@dataclass
class _Near:
    """In-memory vectors for the merges of one run (restated decisions, entity dedup); never stored."""

    decisions: list[list[float] | None]
    entities: list[list[float] | None]
    unembedded_decisions: dict[uuid.UUID, list[float]]
    unembedded_entities: dict[uuid.UUID, list[float]]


def _decision_text(item: ExtractedDecision, sources: Sequence[str]) -> str | None:
    try:
        summary, rationale, tags = decision_fields(item.summary, item.rationale, item.tags, sources)
    except VerbatimText:
        return None  # not stored: nothing to compare
    return embed.decision_text(summary, rationale, tags)


def _entity_text(item: ExtractedEntity, sources: Sequence[str]) -> str | None:
    try:
        name, aliases = entity_fields(item.name, item.aliases, sources)
    except VerbatimText:
        return None
    return embed.entity_text(name, new_entity_aliases(name, aliases)) if name else None


def _comparison_vectors(
    channel: ChannelConfig,
    sources: Sequence[str],
    decisions: Sequence[ExtractedDecision],
    entities: Sequence[ExtractedEntity],
) -> _Near:
    """Tier 3 (pipeline/embed.py) is the one writer of vectors. A run's merges compare in memory instead,
    in Tier 3's space: each new decision's and entity's Tier-3 text as it will be stored, and the records
    Tier 3 has not embedded yet (they would otherwise be missed until it has). One embedding call, made
    before the write transaction."""
    old_decisions: list[Decision] = []
    if decisions:
        active = Decision.objects.filter(channel=channel, status=DecisionStatus.ACTIVE)
        old_decisions = list(embed.unembedded(active, "decision").order_by("-decided_at")[:_UNEMBEDDED_COMPARED])
    old_entities: list[Entity] = []
    if entities:
        known = Entity.objects.filter(
            organisation_id=channel.organisation_id, deleted=False, entity_type__in={e.type for e in entities}
        )
        old_entities = list(embed.unembedded(known, "entity").order_by("-last_mentioned")[:_UNEMBEDDED_COMPARED])
    texts = [
        *(_decision_text(d, sources) for d in decisions),
        *(_entity_text(e, sources) for e in entities),
        *(embed.record_text("decision", d) for d in old_decisions),
        *(embed.record_text("entity", e) for e in old_entities),
    ]
    wanted = [t for t in texts if t]
    found = iter(embed.vectors(wanted, records=True) or [None] * len(wanted))
    vectors = [next(found) if t else None for t in texts]
    new_at, old_at = len(decisions), len(decisions) + len(entities)
    split = old_at + len(old_decisions)
    return _Near(
        decisions=vectors[:new_at],
        entities=vectors[new_at:old_at],
        unembedded_decisions={
            d.pk: v for d, v in zip(old_decisions, vectors[old_at:split], strict=True) if v is not None
        },
        unembedded_entities={e.pk: v for e, v in zip(old_entities, vectors[split:], strict=True) if v is not None},
    )


def _entity(channel: ChannelConfig, known: dict[str, Entity], name: str) -> Entity | None:
    norm = normalise_name(name)
    if norm in known:
        return known[norm]
    return (
        Entity.objects.filter(organisation_id=channel.organisation_id, deleted=False, normalised_name=norm)
        .order_by("-mention_count")
        .first()
    )


# --------------------------------------------------------------------------- failure, eviction, bookkeeping


def _record_failure(channel: ChannelConfig, win: list[WindowMessage], pending_ids: list[str]) -> None:
    """docs/architecture.md §2 (step 7): a failed extraction leaves one discussion signal (confidence 0.3)."""
    by_id = {m.id: m for m in win}
    ids = [i for i in pending_ids if i in by_id]
    authors = list(dict.fromkeys(by_id[i].author_id for i in ids))
    failed = SignalDraft(
        signal_type="discussion",
        summary=f"A discussion of {len(ids)} messages took place that could not be extracted automatically.",
        occurred_at=_latest(ids, by_id),
        participants=authors,
        confidence=0.3,
        extraction_model=None,
    )
    record_signal(
        channel,
        failed,
        source=_ref(ids, by_id),
        sources_text=[by_id[i].text for i in ids],
        key=source_key("extract-failed", ids),
    )
    bump_counter(channel.channel_id, "extract_failed")


def _count_evicted(channel_id: str, gone: set[str]) -> int:
    """Pending messages that left the window before a run reached them: counted, never silent."""
    if not gone:
        return 0
    evicted = receipts.mark_evicted(channel_id, gone)
    if evicted:
        logger.warning("evicted unextracted: channel=%s count=%d", channel_id, evicted)
    debounce.mark_extracted(channel_id, gone)
    return evicted


def _finish(channel_id: str, pending_ids: list[str]) -> None:
    receipts.mark_extracted(channel_id, pending_ids)
    debounce.mark_extracted(channel_id, pending_ids)


def _queue_embeddings(channel: ChannelConfig, written: dict[str, list[str]]) -> None:
    records = [[kind, pk] for kind, ids in written.items() for pk in ids]
    if records:
        current_app.send_task(
            EMBED_TASK,
            kwargs={"channel_id": channel.channel_id, "epoch": channel.epoch, "records": records},
            queue=Queue.EMBED.value,
            expires=settings.JEEVES.window_max_age_s,
        )
