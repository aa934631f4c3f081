"""Logs as data (ground/logs.py): JSON lines with the context fields, a readable line in development, and the
filter that drops known text-bearing fields whatever a caller passed."""

from __future__ import annotations

import json
import logging

from ground import logs

CANARY = "canary-5d1e9a"


def _record(msg: str = "classified %s", *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("jeeves.test", logging.INFO, __file__, 1, msg, args or ("m-1",), None)
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def test_a_json_line_carries_the_bound_context_and_never_a_text_field():
    with logs.bind(channel_id="c-1@wire.example", message_id="m-1", task_id="t-1", queue="classify"):
        record = _record(text=f"we said {CANARY}", prompt=CANARY, tier=1)
        assert logs.AddContext().filter(record) and logs.DropText().filter(record)
    line = json.loads(logs.JsonFormatter().format(record))
    assert line["msg"] == "classified m-1" and line["level"] == "INFO" and line["logger"] == "jeeves.test"
    assert (line["channel_id"], line["message_id"], line["task_id"], line["queue"]) == (
        "c-1@wire.example",
        "m-1",
        "t-1",
        "classify",
    )
    assert line["text"] == line["prompt"] == logs.DROPPED and line["tier"] == 1
    assert CANARY not in json.dumps(line)
    # Outside the block nothing is bound.
    assert logs.current() == {}


def test_mapping_arguments_lose_their_text_keys():
    record = _record("%(text)s for %(channel)s", {"text": CANARY, "channel": "c-1"})
    logs.DropText().filter(record)
    assert CANARY not in record.getMessage() and "c-1" in record.getMessage()


def test_an_exception_is_its_type_and_frames_never_its_message():
    try:
        raise ValueError(f"payload quoted: {CANARY}")
    except ValueError:
        import sys

        record = logging.LogRecord("jeeves.test", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    line = json.loads(logs.JsonFormatter().format(record))
    assert line["exc_type"] == "ValueError" and "test_logs.py" in line["stack"]
    assert CANARY not in json.dumps(line)


def test_development_lines_are_readable():
    with logs.bind(channel_id="c-1@wire.example", task_id="t-1"):
        record = _record()
        logs.AddContext().filter(record)
    text = logs.TextFormatter().format(record)
    assert text.endswith("INFO jeeves.test [channel=c-1@wire.example task=t-1] classified m-1")


def test_production_logs_json_and_the_embedded_mode_text(tmp_path):
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = "from django.conf import settings; print(settings.LOGGING['handlers']['console']['formatter'])"
    base = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "JEEVES_EMBEDDED", "JEEVES_LOG_FORMAT"}}
    base.update(DJANGO_SETTINGS_MODULE="jeeves.settings", JEEVES_DATA_DIR=str(tmp_path))

    def formatter(**env: str) -> str:
        run = [sys.executable, "-c", f"import django; django.setup(); {code}"]
        done = subprocess.run(run, cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert formatter() == "text"  # embedded (no DATABASE_URL)
    assert formatter(DATABASE_URL="postgresql://u@db/jeeves") == "json"
    assert formatter(DATABASE_URL="postgresql://u@db/jeeves", JEEVES_LOG_FORMAT="text") == "text"
