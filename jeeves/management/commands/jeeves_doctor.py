"""`jeeves doctor [--json]`: what an operator checks first, one line each: ok, or a problem with a hint.

The configuration (every secret masked: whether it is set, never its value), the services (PostgreSQL, Redis,
the model provider, the Wire peers), migrations, the model slots and the queue depths. Exit 0 when every line is
ok, 1 when one is a problem. It starts nothing and changes nothing.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.core.management.base import BaseCommand

# A queue deeper than this is worth a look: its workers are behind.
DEEP_QUEUE = 500


@dataclass(frozen=True)
class Line:
    check: str
    status: str  # ok | problem
    detail: str
    hint: str = ""


def mask_url(url: str) -> str:
    """The URL with its password replaced by ***; a path of a socket kept (it names no secret)."""
    if not url:
        return ""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def _secret(value: str) -> str:
    return f"set ({len(value)} characters)" if value else "unset"


def config_lines() -> list[Line]:
    from django.conf import settings

    cfg = settings.JEEVES
    db = settings.DATABASES["default"]
    db_url = f"postgresql://{db.get('USER') or ''}{':***' if db.get('PASSWORD') else ''}@{db.get('HOST')}"
    db_url += f":{db['PORT']}" if db.get("PORT") else ""
    db_url += f"/{db.get('NAME')}"
    lines = [
        Line("mode", "ok", "embedded (local secrets under the data dir)" if settings.EMBEDDED else "deployment"),
        Line("DATABASE_URL", "ok", db_url),
        Line("REDIS_URL", "ok", mask_url(settings.REDIS_URL)),
        Line("DJANGO_SECRET_KEY", "ok", _secret(settings.SECRET_KEY)),
        Line("JEEVES_WIRE_SECRET", "ok" if cfg.wire_secret else "problem", _secret(cfg.wire_secret),
             "" if cfg.wire_secret else "set JEEVES_WIRE_SECRET: the sidecar's bearer token"),
        Line("JEEVES_ENCRYPTION_KEYS", "ok" if cfg.encryption_keys else "problem",
             f"{len(cfg.encryption_keys)} key(s)" if cfg.encryption_keys else "unset",
             "" if cfg.encryption_keys else "set JEEVES_ENCRYPTION_KEYS (Fernet keys, comma-separated)"),
        Line("JEEVES_FLOWER_BASIC_AUTH", "ok", f"user {cfg.flower_basic_auth.partition(':')[0] or '(none)'}, "
             f"password {_secret(cfg.flower_basic_auth.partition(':')[2])}"),
        Line("JEEVES_METRICS_TOKEN", "ok", _secret(cfg.metrics_token) + ("" if cfg.metrics_token else
             ": /metrics answers clients on this host only")),
        Line("JEEVES_LLM_BASE_URL", "ok", mask_url(cfg.llm_base_url) or "(unset: offline engine)"),
        Line("JEEVES_LLM_API_KEY", "ok", _secret(cfg.llm_api_key)),
        Line("JEEVES_EMBED_DIMS", "ok", str(cfg.embed_dims)),
        Line("JEEVES_QUEUE_TTL_S", "ok", f"{cfg.queue_ttl_s} s"),
    ]  # fmt: skip
    for problem in getattr(settings, "STARTUP_PROBLEMS", []):
        lines.append(Line("startup", "problem", problem, "see .env.example: services refuse to start without it"))
    return lines


def _http(url: str, timeout: float) -> str | None:
    """None when something answered over HTTP (any status), else why not."""
    import httpx

    try:
        httpx.get(url, timeout=timeout)
    except httpx.HTTPError as exc:
        return type(exc).__name__
    return None


def service_lines() -> list[Line]:
    from django.conf import settings

    from jeeves import health

    cfg = settings.JEEVES
    lines = [Line(c.name, "ok" if c.ok else "problem", c.detail, c.hint) for c in health.readiness()]
    if cfg.llm_base_url:
        failed = _http(cfg.llm_base_url.rstrip("/") + "/models", cfg.backend_timeout_s)
        lines.append(
            Line("model provider", "problem" if failed else "ok", f"unreachable ({failed})" if failed else "answers",
                 "is JEEVES_LLM_BASE_URL reachable from here? (slots fall back to the offline engine meanwhile)")
        )  # fmt: skip
    # Replies go to whichever Wire peer the deployment uses: one answering is enough.
    peers = {name: url for name, url in (("wire sidecar", cfg.wire_sidecar_url), ("roman", cfg.roman_url)) if url}
    failed = {name: _http(url, cfg.backend_timeout_s) for name, url in peers.items()}
    some = any(reason is None for reason in failed.values())
    for name, url in peers.items():
        if failed[name] is None:
            lines.append(Line(name, "ok", f"{mask_url(url)} answers"))
        elif some:
            lines.append(Line(name, "ok", f"{mask_url(url)} not answering (fine if only the other peer is used)"))
        else:
            lines.append(
                Line(name, "problem", f"{mask_url(url)} unreachable ({failed[name]})",
                     "replies cannot be posted: is the sidecar (JEEVES_WIRE_SIDECAR_URL) or Roman up?")
            )  # fmt: skip
    return lines


def slot_lines() -> list[Line]:
    from django.conf import settings

    from ground.config import LOCAL_MODEL, SLOTS

    cfg = settings.JEEVES
    lines = []
    for slot in SLOTS:
        chosen = cfg.slot(slot)
        remote = chosen.model != LOCAL_MODEL
        ok = not remote or "/" in chosen.model or bool(cfg.llm_base_url)
        detail = f"{chosen.model}, fallback {chosen.fallback}" if remote else "offline engine"
        lines.append(
            Line(f"slot {slot}", "ok" if ok else "problem", detail,
                 "" if ok else "set JEEVES_LLM_BASE_URL or a provider prefix (openai/…)")
        )  # fmt: skip
    return lines


def queue_lines() -> list[Line]:
    from ground.queues import Queue
    from ground.redis import get_redis

    try:
        pipe = get_redis().pipeline()
        for queue in Queue:
            pipe.llen(queue.value)
        depths = pipe.execute()
    except Exception as exc:
        return [Line("queues", "problem", f"not read ({type(exc).__name__})", "Redis must be reachable first")]
    return [
        Line(f"queue {queue.value}", "problem" if depth > DEEP_QUEUE else "ok", f"{depth} waiting",
             f"add worker-{queue.value} processes (see the README's scaling guide)" if depth > DEEP_QUEUE else "")
        for queue, depth in zip(Queue, depths, strict=True)
    ]  # fmt: skip


def diagnose() -> list[Line]:
    return [*config_lines(), *service_lines(), *slot_lines(), *queue_lines()]


class Command(BaseCommand):
    help = "Check configuration (secrets masked), services, migrations, model slots and queue depths: ok/problem/hint."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        lines = diagnose()
        problems = sum(line.status == "problem" for line in lines)
        if options["json"]:
            self.stdout.write(json.dumps({"problems": problems, "lines": [asdict(line) for line in lines]}))
        else:
            width = max(len(line.check) for line in lines)
            for line in lines:
                text = f"{line.status:<8} {line.check:<{width}}  {line.detail}"
                if line.status != "ok" and line.hint:
                    text += f"\n{'':<8} {'':<{width}}  hint: {line.hint}"
                self.stdout.write(text)
            self.stdout.write(f"{problems} problem(s)" if problems else "all ok")
        if problems:
            raise SystemExit(1)
