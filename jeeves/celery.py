"""The Celery app: queues declared with kombu, routes by module, safe delivery defaults, beat."""

from __future__ import annotations

import os
import sys

from celery import Celery, concurrency
from celery.schedules import crontab
from celery.signals import beat_init, task_postrun, task_prerun, worker_init, worker_process_shutdown
from kombu import Exchange
from kombu import Queue as KombuQueue

from ground import broker
from ground.queues import TIME_LIMITS, Queue
from jeeves.startup import refuse_unsafe_start, require_offline_engine

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jeeves.settings")

# `--pool threads` is Celery's thread pool with a wake-up of the worker's loop when a task ends
# (jeeves/threadpool.py: without it a threads worker fetched a message every 5-10 s, celery/celery#6941).
concurrency.ALIASES["threads"] = "jeeves.threadpool:TaskPool"
# redis:// and rediss:// brokers use kombu's Redis transport with a publishing channel that reuses its Redis
# client and can join the webhook's pipeline (ground/broker.py).
broker.register()

app = Celery("jeeves")

try:
    app.config_from_object("django.conf:settings", namespace="CELERY")
    from django.conf import settings

    settings.JEEVES  # noqa: B018 - force the settings import so a bad variable stops start-up here
except Exception as exc:  # pragma: no cover - exercised by tests/ground/test_config.py via a subprocess
    from ground.config import ConfigError

    if isinstance(exc, ConfigError):
        sys.exit(f"jeeves: configuration error: {exc}")
    raise

# Outside the embedded mode a service without its secrets does not start (jeeves/startup.py). Flower
# sends no start signal of its own; it is a `celery ... flower` command line that loads this app.
if "flower" in sys.argv[1:]:
    refuse_unsafe_start("flower")


@worker_init.connect
def _worker_starts(**kwargs) -> None:
    refuse_unsafe_start("a worker")
    require_offline_engine("a worker")


@beat_init.connect
def _beat_starts(**kwargs) -> None:
    refuse_unsafe_start("beat")


# Metrics (ground/metrics.py): every task counted by queue and outcome and timed, in the process that runs it.
from ground import metrics  # noqa: E402 - after the settings: PROMETHEUS_MULTIPROC_DIR is read at import

metrics.connect_celery_signals()


@worker_process_shutdown.connect
def _child_exits(pid=None, **kwargs) -> None:
    if pid:
        metrics.mark_process_dead(pid)


# Logs (ground/logs.py): every line a task writes carries its id, its queue, and the channel and message it
# is about (from its arguments), with nothing to pass down the call chain.
_log_context: dict[str, list] = {}


def _argument(task, args, kwargs, name: str) -> str | None:
    if name in (kwargs or {}):
        return str(kwargs[name])
    try:
        import inspect

        bound = inspect.signature(task.run).bind_partial(*(args or ()), **(kwargs or {}))
    except (TypeError, ValueError):
        return None
    value = bound.arguments.get(name)
    return None if value is None else str(value)


@task_prerun.connect
def _bind_log_context(task_id=None, task=None, args=None, kwargs=None, **extra) -> None:
    from ground import logs

    info = getattr(task.request, "delivery_info", None) or {}
    _log_context[task_id] = logs.set_context(
        task_id=task_id,
        queue=info.get("routing_key") or getattr(task, "queue", None),
        channel_id=_argument(task, args, kwargs, "channel_id"),
        message_id=_argument(task, args, kwargs, "wire_msg_id"),
    )


@task_postrun.connect
def _unbind_log_context(task_id=None, **extra) -> None:
    from ground import logs

    logs.reset_context(_log_context.pop(task_id, []))


_exchange = Exchange("jeeves", type="direct")


def _summarise_at(task: str, schedule: crontab, *, expires: int, **kwargs: object) -> dict:
    """A beat entry: `task` (with `kwargs`) on the summarise queue at `schedule`, dropped when no worker
    took it within `expires` seconds."""
    entry = {"task": task, "schedule": schedule, "options": {"queue": Queue.SUMMARISE.value, "expires": expires}}
    if kwargs:
        entry["kwargs"] = kwargs
    return entry


app.conf.update(
    task_queues=[KombuQueue(q.value, _exchange, routing_key=q.value) for q in Queue],
    task_default_queue=Queue.RESPOND.value,
    task_default_exchange="jeeves",
    task_default_routing_key=Queue.RESPOND.value,
    task_create_missing_queues=False,
    # Routes by module; a task may also bind its queue in its decorator.
    task_routes={
        "pipeline.tasks.classify*": {"queue": Queue.CLASSIFY.value},
        "pipeline.tasks.extract*": {"queue": Queue.EXTRACT.value},
        "pipeline.tasks.embed*": {"queue": Queue.EMBED.value},
        "pipeline.tasks.summar*": {"queue": Queue.SUMMARISE.value},
        "pipeline.tasks.stale*": {"queue": Queue.SUMMARISE.value},
        "retrieval.tasks.*": {"queue": Queue.RESPOND.value},
        "wire_bridge.tasks.*": {"queue": Queue.RESPOND.value},
    },
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    event_serializer="json",
    task_ignore_result=True,
    result_backend=None,
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_time_limit=max(TIME_LIMITS.values()),
    task_soft_time_limit=int(max(TIME_LIMITS.values()) * 0.8),
    broker_connection_retry_on_startup=True,
    # A broker that is down or black-holed fails a publish within a few seconds (the webhook answers
    # 503 and rolls the receipt back) instead of hanging it: socket timeouts, one quick retry.
    broker_connection_timeout=settings.JEEVES.backend_timeout_s,
    task_publish_retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.5, "interval_max": 0.5},
    broker_transport_options={
        # Above the longest hard time limit, so acks_late never redelivers a running task.
        "visibility_timeout": max(TIME_LIMITS.values()) + 300,
        "socket_timeout": settings.JEEVES.backend_timeout_s,
        "socket_connect_timeout": settings.JEEVES.backend_timeout_s,
    },
    # Flower follows tasks through the workers' events; no extra "sent" event per publish,
    # which cost the webhook about a tenth of its time.
    worker_send_task_events=True,
    worker_hijack_root_logger=False,
    timezone="UTC",
    enable_utc=True,
    # Beat: `summarise_due_channels` runs hourly and writes the daily (weekly: Monday) summary of
    # each channel where it is then the 08:00 hour in its own timezone (pipeline/summaries.py);
    # weekly at :05 so Sunday's daily, written at :00, is there. `staleness_check` twice a day
    # nudges about overdue open actions not asked about in 24 h (pipeline/staleness.py);
    # `raise_contradictions` every five minutes asks about held conflicting decisions once both are
    # 30 minutes old (pipeline/contradictions.py); `send_digests` hourly at :10 sends the personal digest
    # to subscribers whose 1:1 has just reached Monday 08:00 (retrieval/digest.py).
    beat_schedule={
        "daily-summaries": _summarise_at(
            "pipeline.tasks.summarise_due_channels", crontab(minute=0), expires=3000, granularity="daily"
        ),
        "weekly-summaries": _summarise_at(
            "pipeline.tasks.summarise_due_channels", crontab(minute=5), expires=3000, granularity="weekly"
        ),
        "contradiction-prompts": _summarise_at(
            "pipeline.tasks.raise_contradictions", crontab(minute="*/5"), expires=240
        ),
        "personal-digests": _summarise_at("retrieval.tasks.send_digests", crontab(minute=10), expires=3000),
        "staleness-check": _summarise_at(
            "pipeline.tasks.staleness_check", crontab(minute=0, hour="8,15"), expires=3600
        ),
        # Forgetting: channels Jeeves left, purged once their grace (JEEVES_RETENTION_AFTER_LEAVE_DAYS)
        # is over; records past JEEVES_RETENTION_DAYS and expired tombstones, nightly.
        "purge-left-channels": _summarise_at("pipeline.tasks.purge_left_channels", crontab(minute=30), expires=3000),
        "age-out-records": _summarise_at("pipeline.tasks.age_out_records", crontab(minute=0, hour=3), expires=3600),
    },
)


class _QueueTimeLimits:
    """Gives each task the time limits of the queue it binds in its decorator (`queue=`)."""

    def annotate(self, task):
        queue = getattr(task, "queue", None)
        if queue in TIME_LIMITS:
            limit = TIME_LIMITS[Queue(queue)]
            return {"time_limit": limit, "soft_time_limit": int(limit * 0.8)}
        return None


app.conf.task_annotations = [_QueueTimeLimits()]

app.autodiscover_tasks()
