"""Tier 1: classify one message, then route it (routine → receipt only, low signal → one signal,
high signal → a debounced extract run for the channel)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from ground.config import LOCAL_MODEL
from knowledge import channels, counters, llm_calls, receipts, records, sources, verbatim
from knowledge.models import ChannelConfig, Entity, MessageReceipt
from pipeline import debounce, embed, llm, members, offline, prompts, window
from pipeline.context import ChannelContext
from pipeline.offline import features
from pipeline.schemas import HIGH_SIGNAL, ClassifyResult

logger = logging.getLogger(__name__)

# Category → signal type of the one signal a low-signal message leaves (most telling first).
# Only an update's gist is kept as a signal (a fact a question could need); "X asked/discussed Y" is an
# activity log, not knowledge, and crowded retrieval and summaries.
_SIGNAL_OF: tuple[tuple[str, str], ...] = (("update", "update"),)
_KNOWN_ENTITIES = 40


def build_context(channel: ChannelConfig) -> ChannelContext:
    """The channel facts both tiers are given: config from Postgres, members from Redis."""
    known = (
        Entity.objects.filter(channel_ids__contains=[channel.channel_id], deleted=False)
        .order_by("-mention_count", "name")
        .values_list("name", flat=True)[:_KNOWN_ENTITIES]
    )
    app_id = settings.JEEVES.wire_app_id
    return ChannelContext(
        channel_id=channel.channel_id,
        organisation_id=channel.organisation_id,
        name=channel.channel_name,
        purpose=channel.purpose,
        context_type=channel.context_type,
        tags=tuple(channel.tags),
        timezone=channel.timezone,
        members=tuple(members.all_members(channel.channel_id)),
        bot_ids=(app_id,) if app_id else (),
        known_entities=tuple(known),
    )


def context_json(ctx: ChannelContext) -> dict:
    """The context as prompt data: members by display name and handle, never their messages.

    What members typed about the channel (`@jeeves context: …`) goes under `typed_by_members`, as
    bounded, quoted data the prompts tell the model to read and never to obey."""
    return {
        "channel": ctx.name,
        "typed_by_members": typed_by_members(ctx.purpose, ctx.context_type, ctx.tags),
        "timezone": ctx.timezone,
        "members": [
            {"id": m.user_id, "name": m.name, "handle": m.handle} for m in ctx.members if m.user_id not in ctx.bot_ids
        ],
        "known_entities": list(ctx.known_entities),
    }


def typed_by_members(purpose: str | None, context_type: str | None, tags: tuple[str, ...] | list[str]) -> dict:
    """The channel context members typed, bounded again (the stored value is bounded when written)."""
    return {
        "purpose": (purpose or "")[: channels.PURPOSE_MAX_CHARS] or None,
        "type": context_type,
        "tags": [t[: channels.TAG_MAX_CHARS] for t in list(tags)[: channels.LIST_MAX_ITEMS]],
    }


@dataclass(frozen=True)
class Classified:
    result: ClassifyResult
    model: str
    outcome: str


@dataclass(frozen=True)
class Pending:
    """One message to classify: its channel, id and text (the text lives only in this object's holder)."""

    channel: ChannelConfig
    wire_msg_id: str
    text: str
    offline_only: bool = False


def classify_message(channel: ChannelConfig, wire_msg_id: str, text: str, offline_only: bool = False) -> Classified:
    """Classify the message and route it. `text` lives only in this call's memory. `offline_only`: the
    offline engine, whatever the slot (a message over its channel's rate: no model spend)."""
    return classify_messages([Pending(channel, wire_msg_id, text, offline_only)])[0]


def batches() -> bool:
    """Whether a classify task takes companions (pipeline/batch.py): with the offline engine, where a batch
    shares one forward pass. A model slot asks once per message anyway, and its calls are better run side by
    side by the worker's threads than one after another in one task."""
    return settings.JEEVES.slot("classify").model == LOCAL_MODEL


def classify_messages(batch: Sequence[Pending]) -> list[Classified]:
    """Classify and route several messages (a classify task and the companions it took, pipeline/batch.py),
    each exactly as alone: its own channel's context, window and routing. What they share is work, never
    text: each channel's context and window are read once, the offline engine scores them together (one
    forward pass of the embedder for every message and the one before it, one feature matrix: a message's
    row depends on that message and the one before it only), and their receipts, model-call rows and
    pending ids are written in one statement or round trip each."""
    views: dict[str, tuple[ChannelContext, list]] = {}
    for p in batch:
        if p.channel.channel_id not in views:
            views[p.channel.channel_id] = (build_context(p.channel), window.read(p.channel.channel_id))
    prepared = [_prepare(p, *views[p.channel.channel_id]) for p in batch]
    engine: list = [None] * len(batch)
    if len(batch) > 1:
        offline_slot = batches()
        at = [k for k, p in enumerate(batch) if offline_slot or p.offline_only]
        # Each: text, context, author id, mentions, previous messages, sent at.
        scored = offline.classify_many([(batch[k].text, *prepared[k][:5]) for k in at])
        for k, result in zip(at, scored, strict=True):
            engine[k] = result
    with llm_calls.deferred():
        decided = [_decide(p, *prep, engine=e) for p, prep, e in zip(batch, prepared, engine, strict=True)]
    _hand_vectors(batch, decided)
    receipts.mark_classified(
        [
            (p.channel.channel_id, p.wire_msg_id, c.outcome, list(dict.fromkeys(c.result.categories)))
            for p, c in zip(batch, decided, strict=True)
        ]
    )
    by_channel: dict[str, list[str]] = {}
    high: dict[str, int] = {}
    for p, c in zip(batch, decided, strict=True):
        by_channel.setdefault(p.channel.channel_id, []).append(p.wire_msg_id)
        if c.outcome == MessageReceipt.Outcome.PENDING_EXTRACT:
            high[p.channel.channel_id] = p.channel.epoch
    debounce.note_classified_many(by_channel)
    for channel_id, epoch in high.items():
        debounce.request_extract(channel_id, epoch)
    return decided


def _hand_vectors(batch: Sequence[Pending], decided: Sequence[Classified]) -> None:
    """The vectors the offline engine just computed of these messages, for Tier 2's offline engine, which reads
    them again in their window (`window.keep_vectors`): one round trip a batch instead of embedding each message
    a second time in the extraction worker."""
    if settings.JEEVES.slot("extract").model != LOCAL_MODEL:
        return
    handed: dict[str, dict[str, str]] = {}
    for p, c in zip(batch, decided, strict=True):
        if c.model == LOCAL_MODEL and (packed := features.pack(features.message_text(p.text))):
            handed.setdefault(p.channel.channel_id, {})[p.wire_msg_id] = packed
    window.keep_vectors(handed)


def _prepare(p: Pending, ctx: ChannelContext, held: list) -> tuple:
    """(context, author id, mentions, the window's messages before it, sent at) of a message to classify."""
    at = next((k for k, m in enumerate(held) if m.id == p.wire_msg_id), None)
    in_window = held[at] if at is not None else None
    previous = held[max(0, at - 3) : at] if at is not None else []  # the context Tier 1 reads with it
    if in_window is not None:
        return ctx, in_window.author_id or "", list(in_window.mentions), previous, in_window.ts
    receipt = MessageReceipt.objects.filter(channel_id=p.channel.channel_id, wire_msg_id=p.wire_msg_id).first()
    return ctx, (receipt.author_id if receipt else "") or "", [], previous, receipt.sent_at if receipt else None


def _decide(
    p: Pending,
    ctx: ChannelContext,
    author_id: str,
    mentions: list[str],
    previous: list,
    sent_at,
    *,
    engine: ClassifyResult | None = None,
) -> Classified:
    """One message's classification, and what rests on it before its receipt moves (a gist signal, its
    vector when messages are embedded). `engine`: the offline engine's answer, when already scored."""
    channel, wire_msg_id, text = p.channel, p.wire_msg_id, p.text

    def offline_answer() -> ClassifyResult:
        if engine is not None:
            return engine
        return offline.classify(text, ctx, author_id, mentions, previous, sent_at)

    def messages() -> list[dict[str, str]]:
        """The model's prompt: built only when a model is asked (`llm.structured`), never for the offline engine."""
        return [
            {"role": "system", "content": prompts.load("classify").text},
            {
                "role": "user",
                "content": json.dumps(
                    {
                        "context": context_json(ctx),
                        "previous_messages": [
                            {"author": ctx.display_name(m.author_id), "text": m.text} for m in previous
                        ],
                        "message": {
                            "author": ctx.display_name(author_id),
                            "mentions": [ctx.display_name(m) for m in mentions],
                            "text": text,
                        },
                    },
                    ensure_ascii=False,
                ),
            },
        ]

    try:
        if p.offline_only:
            raise llm.SlotFailure("classify", "over the channel's rate")
        answer = llm.structured("classify", messages, ClassifyResult, offline_answer, channel_id=channel.channel_id)
        result, model = answer.value, answer.model
    except llm.SlotFailure:
        # A message must still be triaged: the offline engine is cheap and always there.
        result, model = offline_answer(), "local"
    categories = list(dict.fromkeys(result.categories))
    high = result.is_high_signal or bool(HIGH_SIGNAL & set(categories))

    if high:
        outcome = MessageReceipt.Outcome.PENDING_EXTRACT
    elif categories == ["routine"]:
        outcome = MessageReceipt.Outcome.ROUTINE
    else:
        outcome = MessageReceipt.Outcome.SIGNAL
        _record_gist_signal(channel, wire_msg_id, text, result, categories, author_id, sent_at, model)
    # Before the receipt moves to tier 1: a worker killed in between is redelivered and writes it then.
    embed.embed_message(channel, wire_msg_id, text, author_id=author_id, sent_at=sent_at)
    logger.info(
        "classified: channel=%s msg=%s categories=%s model=%s", channel.channel_id, wire_msg_id, categories, model
    )
    return Classified(result, model, outcome)


def _record_gist_signal(
    channel: ChannelConfig,
    wire_msg_id: str,
    text: str,
    result: ClassifyResult,
    categories: list[str],
    author_id: str,
    sent_at,
    model: str,
) -> None:
    signal_type = next((kind for cat, kind in _SIGNAL_OF if cat in categories), None)
    if signal_type is None or not result.gist or sent_at is None:
        return
    try:
        gist = records.SignalDraft(
            signal_type=signal_type,
            summary=result.gist,
            occurred_at=sent_at,
            participants=[author_id] if author_id else [],
            confidence=result.confidence,
            extraction_model=model,
        )
        records.record_signal(
            channel,
            gist,
            source=sources.source_ref([(wire_msg_id, sent_at)]),
            sources_text=[text],
            key=sources.source_key(sources.SIGNAL_KEY, [wire_msg_id]),  # the key Tier 2 gives it too
        )
    except verbatim.VerbatimText:
        counters.bump_counter(channel.channel_id, "verbatim_rejected")
        logger.warning("gist rejected as verbatim: channel=%s msg=%s", channel.channel_id, wire_msg_id)
