"""The review desk's dashboard (/admin/dashboard/): what came in, what was kept, what the models cost.

Counts only, from the tables (never a text): messages received and extracted per day (receipts), records by
type, model calls, tokens and cost per slot per day (`llm_calls`; a row's cost is what litellm priced at call
time, or litellm's cost map applied to its tokens afterwards), queue depths (Redis, read now), expired
messages and fallbacks. The charts are SVG written here on the server: no script, nothing fetched at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal

from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncDay
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from knowledge.models import (
    Action,
    ConversationSignal,
    Decision,
    Entity,
    EntityRelationship,
    LlmCall,
    MessageReceipt,
    PipelineCounter,
    ReviewAudit,
    Summary,
)

PALETTE = ("#417690", "#79aec8", "#e0a040", "#70a070", "#c06060", "#9070b0", "#909090")


@dataclass
class SlotDay:
    day: date
    slot: str
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: Decimal = Decimal(0)
    priced: bool = False  # any call of the group had a price (litellm knows the model)


@dataclass
class Dashboard:
    days: list[date]
    received: list[int]
    extracted: list[int]
    records: dict[str, int]
    decisions_by_status: dict[str, int]
    usage: list[SlotDay]
    calls_by_slot: dict[str, list[int]]
    queue_depths: dict[str, int | None]
    expired: int
    expired_in_period: int
    fallbacks: dict[str, int]
    reviews: int
    charts: dict[str, SafeString] = field(default_factory=dict)


def _per_day(rows, days: list[date]) -> list[int]:
    counts = {r["day"].date(): r["n"] for r in rows}
    return [counts.get(d, 0) for d in days]


def _cost(model: str, prompt: int | None, completion: int | None) -> Decimal | None:
    """litellm's cost map for a call recorded without a price (None: litellm does not know the model)."""
    if not (prompt or completion) or model == "local":
        return None
    try:
        import litellm

        p, c = litellm.cost_per_token(model=model, prompt_tokens=prompt or 0, completion_tokens=completion or 0)
    except Exception:
        return None
    return Decimal(str(round(p + c, 6)))


def _queue_depths() -> dict[str, int | None]:
    from ground.queues import Queue
    from ground.redis import get_redis

    try:
        pipe = get_redis().pipeline()
        for queue in Queue:
            pipe.llen(queue.value)
        return dict(zip([q.value for q in Queue], pipe.execute(), strict=True))
    except Exception:
        return {q.value: None for q in Queue}


def build(days: int = 14) -> Dashboard:
    today = timezone.now().date()
    span = [today - timedelta(days=n) for n in range(days - 1, -1, -1)]
    since = timezone.now() - timedelta(days=days)
    receipts = MessageReceipt.objects.filter(received_at__gte=since).annotate(day=TruncDay("received_at"))
    received = _per_day(receipts.values("day").annotate(n=Count("id")), span)
    extracted = _per_day(receipts.filter(tier__gte=2).values("day").annotate(n=Count("id")), span)

    groups: dict[tuple[date, str], SlotDay] = {}
    rows = (
        LlmCall.objects.filter(created_at__gte=since)
        .annotate(day=TruncDay("created_at"))
        .values("day", "slot", "model")
        .annotate(
            calls=Count("id"),
            prompt=Sum("prompt_tokens"),
            completion=Sum("completion_tokens"),
            priced=Count("id", filter=Q(cost__isnull=False)),
            price=Sum("cost"),
        )
    )
    for row in rows:
        key = (row["day"].date(), row["slot"])
        group = groups.setdefault(key, SlotDay(*key))
        group.calls += row["calls"]
        group.prompt_tokens += row["prompt"] or 0
        group.completion_tokens += row["completion"] or 0
        cost = row["price"] if row["priced"] else _cost(row["model"], row["prompt"], row["completion"])
        if cost is not None:
            group.cost += cost
            group.priced = True
    usage = sorted(groups.values(), key=lambda g: (g.day, g.slot), reverse=True)
    slots = sorted({g.slot for g in usage})
    calls_by_slot = {s: [groups[(d, s)].calls if (d, s) in groups else 0 for d in span] for s in slots}

    fallbacks = dict(
        LlmCall.objects.filter(created_at__gte=since, fallback_used=True)
        .values_list("slot")
        .annotate(n=Count("id"))
        .order_by("slot")
    )
    board = Dashboard(
        days=span,
        received=received,
        extracted=extracted,
        records={
            "decisions": Decision.objects.count(),
            "actions": Action.objects.count(),
            "signals": ConversationSignal.objects.count(),
            "entities": Entity.objects.filter(deleted=False).count(),
            "relationships": EntityRelationship.objects.count(),
            "summaries": Summary.objects.count(),
        },
        decisions_by_status=dict(Decision.objects.values_list("status").annotate(n=Count("id")).order_by("status")),
        usage=usage,
        calls_by_slot=calls_by_slot,
        queue_depths=_queue_depths(),
        expired=PipelineCounter.objects.filter(name="expired").aggregate(n=Sum("value"))["n"] or 0,
        expired_in_period=receipts.filter(outcome=MessageReceipt.Outcome.EXPIRED).count(),
        fallbacks=fallbacks,
        reviews=ReviewAudit.objects.filter(at__gte=since).count(),
    )
    board.charts = {
        "messages": bar_chart(span, {"received": received, "extracted": extracted}, title="Messages per day"),
        "calls": bar_chart(span, calls_by_slot, title="Model calls per day, by slot", stacked=True),
    }
    return board


def bar_chart(
    days: list[date],
    series: dict[str, list[int]],
    *,
    title: str,
    stacked: bool = False,
    width: int = 720,
    height: int = 220,
) -> SafeString:
    """A bar chart as inline SVG: one group (or stack) of bars per day, a y axis with its maximum, a legend.
    Every label is a date, a number or a series name, escaped."""
    left, bottom, top, right = 44, 34, 26, 10
    plot_w, plot_h = width - left - right, height - top - bottom
    names = list(series)
    totals = [sum(series[n][i] for n in names) for i in range(len(days))] if stacked else []
    peak = max([*totals, *(v for n in names for v in series[n]), 1])
    slot_w = plot_w / max(1, len(days))
    bar_w = slot_w * 0.8 / (1 if stacked or not names else len(names))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" height="{height}"'
        f' viewBox="0 0 {width} {height}" class="jeeves-chart" aria-label="{escape(title)}">',
        f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#999"/>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#999"/>',
        f'<text x="{left - 4}" y="{top + 4}" font-size="10" text-anchor="end">{peak}</text>',
        f'<text x="{left - 4}" y="{top + plot_h}" font-size="10" text-anchor="end">0</text>',
    ]
    for i, day in enumerate(days):
        x0 = left + i * slot_w + slot_w * 0.1
        base = top + plot_h
        for k, name in enumerate(names):
            value = series[name][i]
            h = plot_h * value / peak
            color = PALETTE[k % len(PALETTE)]
            label = f"{escape(name)} {day.isoformat()}: {value}"
            if stacked:
                parts.append(
                    f'<rect x="{x0:.1f}" y="{base - h:.1f}" width="{bar_w:.1f}" height="{h:.1f}" fill="{color}">'
                    f"<title>{label}</title></rect>"
                )
                base -= h
            else:
                parts.append(
                    f'<rect x="{x0 + k * bar_w:.1f}" y="{base - h:.1f}" width="{bar_w:.1f}" height="{h:.1f}"'
                    f' fill="{color}"><title>{label}</title></rect>'
                )
        if i % max(1, len(days) // 7) == 0 or i == len(days) - 1:
            parts.append(
                f'<text x="{left + i * slot_w + slot_w / 2:.1f}" y="{top + plot_h + 14}" font-size="10"'
                f' text-anchor="middle">{day:%d %b}</text>'
            )
    x = left
    for k, name in enumerate(names):
        color = PALETTE[k % len(PALETTE)]
        parts.append(f'<rect x="{x}" y="{height - 12}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{x + 14}" y="{height - 3}" font-size="11">{escape(name)}</text>')
        x += 24 + 7 * len(name)
    if not names:
        parts.append(f'<text x="{left + 10}" y="{top + plot_h / 2}" font-size="12">nothing recorded yet</text>')
    parts.append("</svg>")
    # Built above from numbers, dates and escaped series names only.
    return mark_safe("".join(parts))
