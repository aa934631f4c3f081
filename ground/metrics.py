"""Prometheus metrics, one registry for every process of a deployment (prometheus-client, multiprocess mode).

Why prometheus-client's multiprocess mode rather than django-prometheus: most of what is worth counting happens
in Celery's prefork children and in gunicorn's workers, not in Django's request cycle, and a scrape must see
all of them at once. With `PROMETHEUS_MULTIPROC_DIR` set (by `jeeves up` for each run, by compose on a
volume the web and worker containers share) every process writes its counters and histograms to memory-mapped
files there; `GET /metrics` on any web worker sums them. Without it (a lone `runserver`, a shell) the
process's own registry is served.

Labels are closed sets written in code — protocol, event type, outcome, queue, task name, slot, model name
from the configuration, retrieval path — never a channel id, a user id or any text.

The page itself (`GET /metrics`, with the queue depths, Redis' reachability and the clocks read at scrape
time) is rendered by jeeves/scrape.py, on top of every layer.
"""

from __future__ import annotations

import os
import socket
import time

from prometheus_client import (
    Counter,
    Histogram,
    values,
)

from ground.queues import Queue

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiproc_dir() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or None


_HOST = socket.gethostname()


def process_identifier() -> str:
    """This process's name in the metric files: host and pid, so containers that share the metrics volume
    (their pids all start from 1) never write into each other's files."""
    return f"{_HOST}-{os.getpid()}"


if multiproc_dir():
    # Before any metric below is made: each one's value then lives in this process's files.
    values.ValueClass = values.MultiProcessValue(process_identifier)

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_TASK_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)

# The series: each one's name, labels (and buckets), then what it counts or times.
# fmt: off
WEBHOOK_EVENTS = Counter("jeeves_webhook_events", labelnames=["protocol", "type", "outcome"],
    documentation="Webhook events by protocol (sidecar, roman), event type and outcome (the ingest outcome, or why"
    " refused).")
INGEST_SECONDS = Histogram("jeeves_ingest_seconds", labelnames=["protocol"], buckets=_LATENCY_BUCKETS,
    documentation="Time from a webhook request's arrival to its answer (authentication, parsing, ingest).")
TASKS = Counter("jeeves_tasks", labelnames=["queue", "task", "outcome"],
    documentation="Celery tasks finished, by queue, task and outcome (succeeded, retried, failed, expired, revoked).")
TASK_SECONDS = Histogram("jeeves_task_duration_seconds", labelnames=["queue", "task"], buckets=_TASK_BUCKETS,
    documentation="Time a task ran in a worker, by queue (the tier: classify = Tier 1, extract = Tier 2, embed ="
    " Tier 3).")
CLAIM_CHECK_EXPIRED = Counter("jeeves_claim_check_expired",
    documentation="Messages whose text expired under its claim-check key before a worker classified it.")
LLM_CALLS = Counter("jeeves_llm_calls", labelnames=["slot", "model", "outcome"],
    documentation="Model calls (one per attempt; model 'local' is the offline engine) by slot, model and outcome.")
LLM_TOKENS = Counter("jeeves_llm_tokens", labelnames=["slot", "model", "kind"],
    documentation="Tokens the model provider reported, by slot, model and kind (prompt, completion).")
LLM_SECONDS = Histogram("jeeves_llm_latency_seconds", labelnames=["slot", "model"], buckets=_LATENCY_BUCKETS,
    documentation="Latency of a model call (an attempt), by slot and model.")
LLM_FALLBACKS = Counter("jeeves_llm_fallbacks", labelnames=["slot", "model"],
    documentation="Model calls made by a slot's fallback (its fallback model, or the offline engine after the models"
    " failed).")
RETRIEVAL_SECONDS = Histogram("jeeves_retrieval_seconds", labelnames=["path", "outcome"], buckets=_LATENCY_BUCKETS,
    documentation="Time of a question's steps and paths (plan, structured, semantic, fulltext, graph, summary, fuse,"
    " answer, total), by the answer's outcome (cited, no_record).")
PROACTIVE = Counter("jeeves_proactive_messages", labelnames=["kind"],
    documentation="What Jeeves said unasked, by kind (nudge, summary, contradiction_prompt, digest).")
# fmt: on

QUEUES = tuple(q.value for q in Queue)


def queue_label(name: str | None) -> str:
    """A queue name as a label: one of Jeeves' queues, or 'other' (never a value from outside)."""
    return name if name in QUEUES else "other"


# --------------------------------------------------------------------------- recording helpers


def webhook_event(protocol: str, event_type: str, outcome: str, started: float) -> None:
    WEBHOOK_EVENTS.labels(protocol, event_type, outcome).inc()
    INGEST_SECONDS.labels(protocol).observe(time.perf_counter() - started)


def llm_call(
    *,
    slot: str,
    model: str,
    outcome: str,
    latency_ms: int,
    fallback_used: bool,
    prompt_tokens: int | None,
    completion_tokens: int | None,
) -> None:
    LLM_CALLS.labels(slot, model, outcome).inc()
    LLM_SECONDS.labels(slot, model).observe(max(0, latency_ms) / 1000)
    if fallback_used:
        LLM_FALLBACKS.labels(slot, model).inc()
    if prompt_tokens:
        LLM_TOKENS.labels(slot, model, "prompt").inc(prompt_tokens)
    if completion_tokens:
        LLM_TOKENS.labels(slot, model, "completion").inc(completion_tokens)


def retrieval(timings_ms: dict[str, float], outcome: str) -> None:
    for path, ms in timings_ms.items():
        RETRIEVAL_SECONDS.labels(path, outcome).observe(max(0.0, ms) / 1000)


def proactive(kind: str, n: int = 1) -> None:
    if n:
        PROACTIVE.labels(kind).inc(n)


# --------------------------------------------------------------------------- Celery signals

_started: dict[str, float] = {}


def _task_queue(task, request=None) -> str:
    request = request if request is not None else getattr(task, "request", None)
    info = getattr(request, "delivery_info", None) or {}
    return queue_label(info.get("routing_key") or getattr(task, "queue", None))


def connect_celery_signals() -> None:
    """Counts and times every task in the worker process that runs it (prefork children included)."""
    from celery.signals import task_failure, task_postrun, task_prerun, task_retry, task_revoked, task_success

    @task_prerun.connect(weak=False)
    def _prerun(task_id=None, task=None, **kwargs) -> None:
        _started[task_id] = time.perf_counter()

    @task_postrun.connect(weak=False)
    def _postrun(task_id=None, task=None, **kwargs) -> None:
        started = _started.pop(task_id, None)
        if started is not None and task is not None:
            TASK_SECONDS.labels(_task_queue(task), task.name).observe(time.perf_counter() - started)

    @task_success.connect(weak=False)
    def _success(sender=None, **kwargs) -> None:
        TASKS.labels(_task_queue(sender), sender.name, "succeeded").inc()

    @task_retry.connect(weak=False)
    def _retry(sender=None, request=None, **kwargs) -> None:
        TASKS.labels(_task_queue(sender, request), sender.name, "retried").inc()

    @task_failure.connect(weak=False)
    def _failure(sender=None, **kwargs) -> None:
        TASKS.labels(_task_queue(sender), sender.name, "failed").inc()

    @task_revoked.connect(weak=False)
    def _revoked(sender=None, request=None, expired=False, **kwargs) -> None:
        name = getattr(sender, "name", None) or getattr(request, "name", None) or "unknown"
        TASKS.labels(_task_queue(sender, request), name, "expired" if expired else "revoked").inc()


def mark_process_dead(pid: int) -> None:
    """gunicorn's child_exit and Celery's process shutdown: forget a dead process's live gauges."""
    path = multiproc_dir()
    if path:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(f"{_HOST}-{pid}", path)
