"""The contradiction duty (docs/architecture.md §8): after each new decision, judge it against the channel's recent
decisions; apply a replacement the team stated, and raise a conflict once, with buttons, when both
decisions are over 30 minutes old and the channel is listening.

Candidates are the channel's active decisions within 90 days of the new one whose vectors lie within
the candidate similarity (`JEEVES_CONTRADICTION_THRESHOLD` for a provider's embedding model; for the
bundled MiniLM, the floor learned on train beside the judge's artefact, since MiniLM places conflicting
decisions far below 0.78). The `classify` slot judges each pair into `PairJudgement`; the offline engine
judges with its learned pair scorer (pipeline/offline/contradiction.py). The prompt is worded from the
stored decisions, never from a message, and posted by the bridge's `send_message` task.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Annotated, Literal

from celery import current_app
from django.conf import settings
from django.utils import timezone
from pgvector.django import CosineDistance
from pydantic import BaseModel, ConfigDict, Field

from ground.config import LOCAL_MODEL
from ground.queues import Queue
from knowledge import contradictions, embeddings
from knowledge.channels import channel_zone
from knowledge.models import (
    ChannelConfig,
    ConflictVerdict,
    Decision,
    DecisionConflict,
    DecisionStatus,
    Embedding,
)
from pipeline import claimcheck, embed, llm, prompts, window
from pipeline.offline import contradiction as offline

logger = logging.getLogger(__name__)

CHECK_TASK = "pipeline.tasks.check_contradictions"
CANDIDATES = 10  # nearest earlier decisions judged against a new one
PREFILTER = 3 * CANDIDATES  # nearest by stored vector, then compared by their summaries (candidates())
_UNEMBEDDED_EMBEDDED = 50  # recent decisions without a vector embedded before a check (Tier 3 lagging)
WITHIN = timedelta(days=90)
BUTTONS: tuple[tuple[str, str], ...] = (
    ("supersede", "Supersede {older}"),
    ("keep", "Keep both"),
    ("dismiss", "Dismiss"),
)
QUESTION = "Shall I record {older} as superseded by {newer}, or are both to stand?"


class PairJudgement(BaseModel):
    """What the `classify` slot answers for one pair (a model, or the offline judge)."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    verdict: Literal["contradicts", "supersedes", "compatible"]
    reason: Annotated[str, Field(min_length=1, max_length=300)]
    stated: bool = False
    confidence: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5


# --------------------------------------------------------------------------- detection


def queue_check(channel: ChannelConfig, decision_ids: Sequence[str]) -> None:
    """Ask the extract queue to judge the decisions a run just wrote (ids only; extraction does not wait)."""
    if decision_ids:
        current_app.send_task(
            CHECK_TASK,
            kwargs={"channel_id": channel.channel_id, "epoch": channel.epoch, "decision_ids": list(decision_ids)},
            queue=Queue.EXTRACT.value,
            expires=settings.JEEVES.window_max_age_s,
        )


def candidate_floor() -> float:
    if settings.JEEVES.slot("embed").model == LOCAL_MODEL:
        return offline.model().candidate_cosine
    return settings.JEEVES.contradiction_threshold


def candidates(decision: Decision) -> list[tuple[Decision, float | None]]:
    """The channel's active decisions within 90 days of `decision`, nearest first, within the candidate
    similarity; without a vector (embedding disabled) the most recent ones, unranked.

    The candidate similarity is that of the summaries, the space its floor was fitted in (the judge's
    artefact; JEEVES_CONTRADICTION_THRESHOLD likewise). The stored vectors (Tier 3: summary, rationale and
    topic tags) only pick the PREFILTER nearest; their summaries are then embedded in memory, not stored,
    and compared. Ranking on the stored vectors alone passes twice as many pairs on to the judge."""
    recent = Decision.objects.filter(
        channel_id=decision.channel_id,
        status=DecisionStatus.ACTIVE,
        decided_at__gte=decision.decided_at - WITHIN,
        decided_at__lte=decision.decided_at + WITHIN,
    ).exclude(pk=decision.pk)
    vector = (
        Embedding.objects.filter(source_type="decision", source_id=decision.pk).values_list("embedding", flat=True)
    ).first()
    if vector is None:
        return [(d, None) for d in recent.order_by("-decided_at")[:CANDIDATES]]
    near = list(
        Embedding.objects.filter(
            source_type="decision", channel_id=decision.channel_id, source_id__in=recent.values("id")
        )
        .annotate(distance=CosineDistance("embedding", list(vector)))
        .order_by("distance")
        .values_list("source_id", "distance")[:PREFILTER]
    )
    by_id = recent.in_bulk([i for i, _ in near])
    pool = [(by_id[i], 1 - float(d)) for i, d in near if i in by_id]
    summaries = embed.vectors([decision.summary, *(d.summary for d, _ in pool)], records=True) if pool else None
    if summaries is not None:
        pool = [(d, embeddings.cosine(summaries[0], v)) for (d, _), v in zip(pool, summaries[1:], strict=True)]
    floor = candidate_floor()
    return sorted((p for p in pool if p[1] >= floor), key=lambda p: -p[1])[:CANDIDATES]


def _ordered(a: Decision, b: Decision) -> tuple[Decision, Decision]:
    return (a, b) if (a.decided_at, a.friendly_id) <= (b.decided_at, b.friendly_id) else (b, a)


def _messages_of(decision: Decision) -> list[str]:
    """The texts of the messages the decision rests on, while the window still holds them (it soon won't)."""
    ids = set((decision.source_ref or {}).get("wire_msg_ids") or [])
    return [m.text for m in window.read(decision.channel_id) if m.id in ids]


def _model_input(prompt: str, older: Decision, newer: Decision, messages: Sequence[str]) -> list[dict[str, str]]:
    zone = channel_zone(newer.channel.timezone)

    def side(d: Decision) -> dict[str, object]:
        return {
            "id": d.friendly_id,
            "date": d.decided_at.astimezone(zone).date().isoformat(),
            "summary": d.summary,
            "reason": d.rationale,
        }

    payload = {"earlier": side(older), "later": side(newer), "later_messages": list(messages)}
    return [
        {"role": "system", "content": prompt},
        {"role": "user", "content": json.dumps(payload, ensure_ascii=False)},
    ]


def check(channel: ChannelConfig, decision_ids: Sequence[str]) -> list[DecisionConflict]:
    """Judge each new decision against its candidates; returns the pairs recorded (compatible ones included)."""
    decisions = list(
        Decision.objects.select_related("channel").filter(
            channel=channel, pk__in=list(decision_ids), status=DecisionStatus.ACTIVE
        )
    )
    _embed_first(channel, decisions)
    recorded: list[DecisionConflict] = []
    for decision in decisions:
        recorded += _check_one(decision)
    return recorded


def _embed_first(channel: ChannelConfig, decisions: Sequence[Decision]) -> None:
    """Candidates are found by their stored vectors, which Tier 3 writes (pipeline/embed.py) and may not
    have reached yet, this check being queued beside it: its writer (idempotent, the same text and model
    label) runs here first for the new decisions and the channel's other recent active decisions without
    a vector, so a decision of the same run, or of the run before, is not missed as a candidate."""
    if not decisions:
        return
    earliest = min(d.decided_at for d in decisions) - WITHIN
    recent = Decision.objects.filter(channel=channel, status=DecisionStatus.ACTIVE, decided_at__gte=earliest)
    missing = embed.unembedded(recent, "decision").order_by("-decided_at").values_list("pk", flat=True)
    ids = dict.fromkeys([*(d.pk for d in decisions), *missing[:_UNEMBEDDED_EMBEDDED]])
    embed.embed_records([("decision", str(pk)) for pk in ids])


def _check_one(decision: Decision) -> list[DecisionConflict]:
    judged = contradictions.judged_pairs(decision)
    found = [
        (cand, cosine)
        for cand, cosine in candidates(decision)
        if tuple(str(d.pk) for d in _ordered(cand, decision)) not in judged
    ]
    if not found:
        return []
    messages = _messages_of(decision)
    texts = [decision.summary, *(c.summary for c, _ in found)]
    # The judge reads bundled MiniLM vectors: with that model in the embed slot, `candidates` has just embedded
    # these summaries, and this process keeps them (`embed.vectors`, records=True): not embedded a second time.
    local = settings.JEEVES.slot("embed").model == LOCAL_MODEL
    sides = offline.sides(
        texts,
        [decision.decided_at, *(c.decided_at for c, _ in found)],
        embed.vectors(texts, records=True) if local else None,
        by=[decision.decided_by, *(c.decided_by for c, _ in found)],
    )
    offline_judgements = offline.judge(sides[0], sides[1:], messages)
    prompt = prompts.load("contradiction")
    floor = settings.JEEVES.extract_confidence_min
    recorded: list[DecisionConflict] = []
    for (cand, cosine), local in zip(found, offline_judgements, strict=True):
        older, newer = _ordered(cand, decision)
        fallback = PairJudgement(
            verdict=local.verdict, reason=local.reason, stated=local.stated, confidence=local.score
        )
        try:
            answer = llm.structured(
                "classify",
                _model_input(prompt.text, older, newer, messages if newer is decision else ()),
                PairJudgement,
                lambda fallback=fallback: fallback,
                channel_id=decision.channel_id,
            )
            judgement, model = answer.value, answer.model
        except llm.SlotFailure:
            logger.warning("contradiction judge: model output invalid twice; using the offline judge")
            judgement, model = fallback, LOCAL_MODEL
        verdict = contradictions.Verdict(
            verdict=judgement.verdict,
            reason=judgement.reason,
            score=judgement.confidence,
            stated=judgement.stated and judgement.verdict == ConflictVerdict.SUPERSEDES,
        )
        if min(older.confidence, newer.confidence) < floor and not verdict.stated:
            # Asking the team rests on both being decisions: a record the engine kept below the confidence
            # floor is stored and searchable but never starts a question (through the real stack on dev,
            # letting them in took false flags from 0 to 5). A replacement the team stated still applies.
            continue
        pair = contradictions.record_verdict(
            older, newer, verdict, cosine=cosine if cosine is not None else local.cosine, judge_model=model
        )
        if pair is not None:
            recorded.append(pair)
    # A stated replacement is applied unasked, to the one earlier decision it most surely replaces; any
    # other conflict stays held, to be asked about.
    stated = [p for p in recorded if p.stated and p.newer_id == decision.pk]
    if stated:
        contradictions.supersede_stated(max(stated, key=lambda p: p.score))
    logger.info(
        "contradiction check: channel=%s decision=%s candidates=%d flagged=%d",
        decision.channel_id,
        decision.pk,
        len(found),
        sum(p.verdict != ConflictVerdict.COMPATIBLE for p in recorded),
    )
    return recorded


# --------------------------------------------------------------------------- raising


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def on_date(moment: datetime, zone_name: str, now: datetime) -> str:
    """ "the 3rd of March" (with the year when it is not this year's), channel-local."""
    zone = channel_zone(zone_name)
    day = moment.astimezone(zone).date()
    year = "" if day.year == now.astimezone(zone).year else f" {day.year}"
    return f"the {_ordinal(day.day)} of {day:%B}{year}"


def _clause(text: str) -> str:
    return " ".join(text.split()).rstrip(" .…")


def prompt_text(pair: DecisionConflict, now: datetime) -> str:
    """One message in Jeeves' voice, from the stored decisions and the judge's reason."""
    older, newer, zone = pair.older, pair.newer, pair.channel.timezone
    differs = "appears to replace" if pair.verdict == ConflictVerdict.SUPERSEDES else "appears to differ from"
    reason = _clause(pair.reason)
    return (
        f"One notes that {newer.friendly_id}, settled on {on_date(newer.decided_at, zone, now)} "
        f"({_clause(newer.summary)}), {differs} the decision of {on_date(older.decided_at, zone, now)} "
        f"({older.friendly_id}: {_clause(older.summary)})."
        + (f" {reason[0].upper()}{reason[1:]}." if reason else "")
        + " "
        + QUESTION.format(older=older.friendly_id, newer=newer.friendly_id)
    )


def buttons_for(pair: DecisionConflict) -> tuple[tuple[str, str], ...]:
    older, newer = pair.older.friendly_id, pair.newer.friendly_id
    return tuple((f"contradiction:{older}:{newer}:{choice}", label.format(older=older)) for choice, label in BUTTONS)


def publish(pair: DecisionConflict, now: datetime) -> str:
    """Park the prompt under a claim-check key and ask the respond queue to post it; returns the key."""
    ref = f"contradiction:{pair.older.friendly_id}:{pair.newer.friendly_id}"
    return claimcheck.post(
        pair.channel_id, ref, prompt_text(pair, now), proactive="contradiction_prompt", buttons=buttons_for(pair)
    )


def raise_due(now: datetime | None = None) -> int:
    """One pass: raise every held pair whose hold is over; returns how many prompts went out."""
    now = now or timezone.now()
    pairs = contradictions.claim_due(now)
    for pair in pairs:
        publish(pair, now)
        logger.info("contradiction raised: channel=%s pair=%s", pair.channel_id, pair.pk)
    return len(pairs)
