"""Model calls (`llm_calls`), their one writer: one row and one set of metrics per call, never the prompt or
the completion."""

from __future__ import annotations

from decimal import Decimal

from ground import metrics
from knowledge.models import (
    LlmCall,
)


def record_llm_call(
    *,
    slot: str,
    model: str,
    outcome: str,
    latency_ms: int,
    fallback_used: bool = False,
    attempt: int = 1,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    cost: float | None = None,
    channel_id: str | None = None,
) -> None:
    """One row per model call: never the prompt or the completion."""
    LlmCall.objects.create(
        slot=slot,
        model=model,
        outcome=outcome,
        latency_ms=max(0, int(latency_ms)),
        fallback_used=fallback_used,
        attempt=attempt,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost=Decimal(str(round(cost, 6))) if cost else None,
        channel_id=channel_id,
    )
    metrics.llm_call(
        slot=slot,
        model=model,
        outcome=outcome,
        latency_ms=latency_ms,
        fallback_used=fallback_used,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )
