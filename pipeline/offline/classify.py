"""Offline Tier 1: the eight categories of a message from learned heads (`pipeline.offline.model`).

Multi-label logistic heads over the message and the one before it (MiniLM embeddings, hashed word
and character n-grams, a few shape scalars), each with its threshold chosen by cross-validation on
`evalsets/train`. A message no head claims gets its most probable category. The gist (stored as a
signal by the pipeline) is written only for an update that states a figure or a date: "X discussed Y"
is an activity log, not knowledge.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime

from pipeline.context import ChannelContext
from pipeline.offline import features, model, restate
from pipeline.offline.entities import find_entities
from pipeline.schemas import HIGH_SIGNAL, ClassifyResult
from pipeline.window import WindowMessage

# Commands that steer Jeeves rather than ask it something.
CONTROL_COMMAND = re.compile(
    r"\b(pause|step out|resume|come back|unpause|secure mode|ears (?:on|off)|context\s*:|forget|digest (?:on|off)"
    r"|help)\b",
    re.IGNORECASE,
)
_FIGURE = re.compile(r"\d")


def is_bot_message(ctx: ChannelContext, mentions: list[str]) -> bool:
    return any(m in ctx.bot_ids for m in mentions)


def _has_content(text: str) -> bool:
    return bool(re.search(r"[^\W\d_]{2,}", text))


def gist(text: str, categories: list[str], author_name: str) -> str:
    """A restated update that carries a fact (a figure or a date); empty for anything else."""
    if "update" not in categories or not _FIGURE.search(text):
        return ""
    who = restate.first_name(author_name) or "Someone"
    core = restate.normal_form(text, who)
    if len(core.split()) < 3:
        return ""
    return restate.fit(restate.sentence(core), [text])[:300]  # the author is the signal's participant


def classify(
    text: str,
    ctx: ChannelContext,
    author_id: str,
    mentions: list[str],
    previous: Sequence[WindowMessage] = (),
    sent_at: datetime | None = None,
    engine: model.Engine | None = None,
) -> ClassifyResult:
    """Tier 1 on the offline engine; `previous`: the window's messages before this one, `sent_at`: its
    time. Never raises on odd input."""
    text = (text or "")[: features.TEXT_LIMIT]
    early = _without_model(text, ctx, mentions)
    if early is not None:
        return early
    engine = engine or model.load()
    rows = _rows(text, ctx, author_id, mentions, previous, sent_at)
    probs = engine.score(rows, tier2=False).tier1[-1]
    return _result(engine, probs, text, ctx, author_id)


def classify_many(
    messages: Sequence[tuple[str, ChannelContext, str, list[str], Sequence[WindowMessage], datetime | None]],
    engine: model.Engine | None = None,
) -> list[ClassifyResult]:
    """`classify` for several messages (text, context, author id, mentions, previous, sent at), each scored
    exactly as alone: its row of features depends on it and the message before it only
    (`features.last_rows`). What they share is one forward pass of the embedder and one matrix product."""
    out: list[ClassifyResult | None] = [None] * len(messages)
    scored: list[tuple[int, list[features.Msg], str, ChannelContext, str]] = []
    for k, (text, ctx, author_id, mentions, previous, sent_at) in enumerate(messages):
        text = (text or "")[: features.TEXT_LIMIT]
        out[k] = _without_model(text, ctx, mentions)
        if out[k] is None:
            scored.append((k, _rows(text, ctx, author_id, mentions, previous, sent_at), text, ctx, author_id))
    if scored:
        engine = engine or model.load()
        groups = [rows for _, rows, _, _, _ in scored]
        flat = features.embed([features.normalise(m.text) for rows in groups for m in rows])
        vectors, at = [], 0
        for rows in groups:
            vectors.append(flat[at : at + len(rows)])
            at += len(rows)
        probs = engine.tier1.probs(features.last_rows(groups, vectors))
        for (k, _, text, ctx, author_id), p in zip(scored, probs, strict=True):
            out[k] = _result(engine, p, text, ctx, author_id)
    return out  # type: ignore[return-value]


def _without_model(text: str, ctx: ChannelContext, mentions: list[str]) -> ClassifyResult | None:
    """The answer for a message the heads do not read (one to Jeeves, or one with no words), else None."""
    if is_bot_message(ctx, mentions):
        category = "routine" if CONTROL_COMMAND.search(text) else "question"
        return ClassifyResult(categories=[category], confidence=0.9, is_high_signal=False, gist="")
    if not _has_content(text):
        return ClassifyResult(categories=["routine"], confidence=0.8, is_high_signal=False, gist="")
    return None


def _rows(
    text: str,
    ctx: ChannelContext,
    author_id: str,
    mentions: list[str],
    previous: Sequence[WindowMessage],
    sent_at: datetime | None,
) -> list[features.Msg]:
    """The message before this one that Tier 1 reads with it (a person's, not a bot's), then this one."""
    context = [m for m in previous if m.author_id not in ctx.bot_ids][-1:]
    now = sent_at or datetime.now(UTC)
    origin = context[0].ts if context else now
    rows = [
        features.Msg(m.id, m.author_id, m.text, (m.ts - origin).total_seconds() / 60, bool(m.mentions)) for m in context
    ]
    others = [m for m in mentions if m not in ctx.bot_ids and m != author_id]
    rows.append(
        features.Msg("", author_id, text, (now - origin).total_seconds() / 60 if context else 0.0, bool(others))
    )
    return rows


def _result(engine: model.Engine, probs, text: str, ctx: ChannelContext, author_id: str) -> ClassifyResult:
    chosen = [c for k, c in enumerate(model.CATEGORIES) if probs[k] >= engine.threshold(c)]
    if not chosen:
        chosen = [model.CATEGORIES[int(probs.argmax())]]
    entities = [e.name[:120] for e in find_entities(text, ctx)][:10]
    return ClassifyResult(
        categories=chosen,
        confidence=round(float(max(probs[model.CATEGORIES.index(c)] for c in chosen)), 2),
        entities=entities,
        is_high_signal=bool(HIGH_SIGNAL & set(chosen)),
        gist=gist(text, chosen, ctx.display_name(author_id)),
    )
