"""The LLM slot layer (docs/architecture.md §6): seven slots, one provider, all through litellm's Router.

A slot's chain is its model (retried once on 429/503/timeout), then its fallback model (retried
once), then the offline engine (`local`). Structured answers use JSON mode and are parsed into a
pydantic schema; an invalid answer is asked again once, then the call fails (`SlotFailure`).
Every attempt becomes one `llm_calls` row: slot, model, fallback used, tokens, cost, latency and
outcome; never the prompt or the completion.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Generic, TypeVar

from django.conf import settings
from pydantic import BaseModel, ValidationError

from ground.config import LOCAL_MODEL
from knowledge import llm_calls

logger = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)
_FALLBACK_SUFFIX = "-fallback"


class SlotFailure(Exception):
    """The slot gave no usable answer: invalid output twice, or every model of the chain failed."""

    def __init__(self, slot: str, reason: str) -> None:
        super().__init__(f"slot {slot}: {reason}")
        self.slot = slot
        self.reason = reason


@dataclass(frozen=True)
class Answer(Generic[T]):
    value: T
    model: str  # the model that answered ("local" for the offline engine)
    fallback_used: bool


# --------------------------------------------------------------------------- attempt recording


@dataclass
class _Attempts:
    """Failed attempts litellm reports through its (synchronous) failure callback during one call."""

    failures: list[dict[str, Any]] = field(default_factory=list)


_current = threading.local()


def _outcome_of(exc: BaseException | None) -> str:
    name = type(exc).__name__ if exc is not None else ""
    if "Timeout" in name:
        return "timeout"
    return "error"


def _install_callback() -> None:
    import litellm
    from litellm.integrations.custom_logger import CustomLogger

    class _FailureRecorder(CustomLogger):
        # litellm calls failure callbacks in the calling thread, once per failed attempt.
        def log_failure_event(self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any) -> None:
            attempts: _Attempts | None = getattr(_current, "attempts", None)
            if attempts is None:
                return
            metadata = (kwargs.get("litellm_params") or {}).get("metadata") or {}
            attempts.failures.append(
                {
                    "model": str(kwargs.get("model") or ""),
                    "group": str(metadata.get("model_group") or ""),
                    "outcome": _outcome_of(kwargs.get("exception")),
                    "latency_ms": int((end_time - start_time).total_seconds() * 1000),
                }
            )

    if not any(type(cb).__name__ == "_FailureRecorder" for cb in litellm.callbacks):
        litellm.callbacks.append(_FailureRecorder())
    litellm.suppress_debug_info = True


# --------------------------------------------------------------------------- the Router


def _litellm_name(model: str) -> str:
    # A bare model name is an OpenAI-compatible model at JEEVES_LLM_BASE_URL.
    return model if "/" in model else f"openai/{model}"


@lru_cache(maxsize=16)
def _router(slot: str, model: str, fallback: str, base_url: str, api_key: str, timeout_ms: int) -> Any:
    from litellm import Router
    from litellm.types.router import RetryPolicy

    _install_callback()

    def deployment(name: str, target: str) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": _litellm_name(target),
            "timeout": timeout_ms / 1000,
            "max_retries": 0,  # retries are the Router's, so each one is seen and recorded
        }
        if base_url:
            params["api_base"] = base_url
        params["api_key"] = api_key or "none"
        return {"model_name": name, "litellm_params": params}

    model_list = [deployment(slot, model)]
    fallbacks = []
    if fallback != LOCAL_MODEL and fallback != model:
        model_list.append(deployment(slot + _FALLBACK_SUFFIX, fallback))
        fallbacks = [{slot: [slot + _FALLBACK_SUFFIX]}]
    return Router(
        model_list=model_list,
        fallbacks=fallbacks,
        num_retries=1,
        retry_after=0,
        disable_cooldowns=True,  # one slow minute must not bench a deployment for the next message
        retry_policy=RetryPolicy(
            TimeoutErrorRetries=1,
            RateLimitErrorRetries=1,
            InternalServerErrorRetries=1,
            BadRequestErrorRetries=0,
            AuthenticationErrorRetries=0,
            ContentPolicyViolationErrorRetries=0,
        ),
    )


def _slot_router(slot: str) -> Any:
    cfg = settings.JEEVES
    chosen = cfg.slot(slot)
    return _router(slot, chosen.model, chosen.fallback, cfg.llm_base_url, cfg.llm_api_key, cfg.llm_timeout_ms)


def _cost(response: Any) -> float | None:
    import litellm

    try:
        return float(litellm.completion_cost(completion_response=response)) or None
    except Exception:  # unknown model: litellm has no price for it
        return None


# --------------------------------------------------------------------------- calls


def _record_failures(slot: str, attempts: _Attempts, channel_id: str | None, first_attempt: int) -> int:
    attempt = first_attempt
    for failure in attempts.failures:
        llm_calls.record_llm_call(
            slot=slot,
            model=failure["model"],
            outcome=failure["outcome"],
            latency_ms=failure["latency_ms"],
            fallback_used=failure["group"].endswith(_FALLBACK_SUFFIX),
            attempt=attempt,
            channel_id=channel_id,
        )
        attempt += 1
    return attempt


def _ask(
    slot: str, messages: list[dict[str, str]], schema: type[T], channel_id: str | None, attempt: int
) -> tuple[T | None, str, bool, int]:
    """One Router call (its retries and fallback included). Returns (value or None if invalid,
    model, fallback_used, next attempt number); raises when every deployment failed."""
    router = _slot_router(slot)
    attempts = _Attempts()
    _current.attempts = attempts
    started = time.monotonic()
    try:
        response = router.completion(model=slot, messages=messages, response_format={"type": "json_object"})
    except Exception:
        _record_failures(slot, attempts, channel_id, attempt)
        raise
    finally:
        _current.attempts = None
    attempt = _record_failures(slot, attempts, channel_id, attempt)
    hidden = getattr(response, "_hidden_params", {}) or {}
    group = str((hidden.get("additional_headers") or {}).get("x-litellm-model-group") or slot)
    fallback_used = group.endswith(_FALLBACK_SUFFIX)
    chosen = settings.JEEVES.slot(slot)
    model = chosen.fallback if fallback_used else chosen.model
    content = response.choices[0].message.content or ""
    value: T | None
    try:
        value = schema.model_validate(json.loads(content))
        outcome = "ok"
    except (ValueError, ValidationError):
        value, outcome = None, "invalid"
    usage = getattr(response, "usage", None)
    latency = getattr(response, "_response_ms", None)
    failed_ms = sum(f["latency_ms"] for f in attempts.failures)
    llm_calls.record_llm_call(
        slot=slot,
        model=model,
        outcome=outcome,
        latency_ms=int(latency) if latency else int((time.monotonic() - started) * 1000) - failed_ms,
        fallback_used=fallback_used,
        attempt=attempt,
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
        cost=_cost(response),
        channel_id=channel_id,
    )
    return value, model, fallback_used, attempt + 1


def structured(
    slot: str,
    messages: list[dict[str, str]] | Callable[[], list[dict[str, str]]],
    schema: type[T],
    offline: Callable[[], T],
    *,
    channel_id: str | None = None,
) -> Answer[T]:
    """A validated answer of `schema` from the slot's chain; `offline` is the offline engine's
    answer for the same question, used when the slot is `local` or every model is unreachable.

    `messages` may be a callable that builds the prompt: called only when a model is asked (the offline
    engine reads no prompt).

    Raises SlotFailure when a model answered but twice not in the schema.
    """
    if settings.JEEVES.slot(slot).model == LOCAL_MODEL:
        return _offline(slot, offline, channel_id, fallback_used=False)
    if callable(messages):
        messages = messages()
    attempt = 1
    for ask in range(2):
        try:
            value, model, fallback_used, attempt = _ask(slot, messages, schema, channel_id, attempt)
        except Exception as exc:
            logger.warning("slot %s: every model failed (%s); using the offline engine", slot, type(exc).__name__)
            return _offline(slot, offline, channel_id, fallback_used=True)
        if value is not None:
            return Answer(value, model, fallback_used)
        logger.warning("slot %s: model %s gave invalid output (ask %d of 2)", slot, model, ask + 1)
    raise SlotFailure(slot, "invalid output after one retry")


def _offline(slot: str, offline: Callable[[], T], channel_id: str | None, *, fallback_used: bool) -> Answer[T]:
    started = time.monotonic()
    call = {"slot": slot, "model": LOCAL_MODEL, "fallback_used": fallback_used, "channel_id": channel_id}

    def record(outcome: str) -> None:
        llm_calls.record_llm_call(**call, outcome=outcome, latency_ms=int((time.monotonic() - started) * 1000))

    try:
        value = offline()
    except Exception as exc:
        record("error")
        raise SlotFailure(slot, f"offline engine failed ({type(exc).__name__})") from exc
    record("ok")
    return Answer(value, LOCAL_MODEL, fallback_used)
