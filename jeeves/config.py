"""Jeeves' own configuration: one typed, validated, frozen object built from an environment mapping.

`jeeves/settings.py` is the only module that passes `os.environ` in; everything else reads
`django.conf.settings.JEEVES`. A bad value raises `ConfigError` naming the variable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from django.core.exceptions import ImproperlyConfigured

SLOTS: tuple[str, ...] = (
    "classify",
    "extract",
    "embed",
    "summarise",
    "query_analyse",
    "respond",
    "complex",
)
LOCAL_MODEL = "local"


class ConfigError(ImproperlyConfigured):
    """A variable of the environment has a value Jeeves cannot use."""


T = TypeVar("T")


def _read(env: Mapping[str, str], name: str, default: T, cast: Callable[[str], T], kind: str) -> T:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return cast(raw.strip())
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={raw!r} is not {kind}") from None


def _bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError(raw)


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError(raw)
    return value


def _non_negative_int(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError(raw)
    return value


def _non_negative_float(raw: str) -> float:
    value = float(raw)
    if value < 0 or value != value:
        raise ValueError(raw)
    return value


def _unit_float(raw: str) -> float:
    value = float(raw)
    if not 0.0 <= value <= 1.0:
        raise ValueError(raw)
    return value


def _positive_float(raw: str) -> float:
    value = float(raw)
    if value <= 0:
        raise ValueError(raw)
    return value


def _weights(raw: str) -> dict[str, float]:
    weights: dict[str, float] = {}
    for part in raw.split(","):
        name, _, value = part.partition("=")
        if not name.strip() or not value.strip():
            raise ValueError(raw)
        weights[name.strip()] = float(value)
    unknown = set(weights) - set(DEFAULT_PATH_WEIGHTS)
    if unknown:
        raise ValueError(raw)
    return {**DEFAULT_PATH_WEIGHTS, **weights}


def _fernet_keys(env: Mapping[str, str]) -> tuple[str, ...]:
    """JEEVES_ENCRYPTION_KEYS: comma-separated Fernet keys, the first encrypts, all decrypt. A bad key is
    named by its position, never echoed (it is a secret)."""
    import base64
    import binascii

    raw = env.get("JEEVES_ENCRYPTION_KEYS", "")
    keys = tuple(k.strip() for k in raw.split(",") if k.strip())
    for n, key in enumerate(keys, 1):
        try:
            ok = len(base64.urlsafe_b64decode(key.encode("ascii"))) == 32
        except (binascii.Error, ValueError, UnicodeEncodeError):
            ok = False
        if not ok:
            raise ConfigError(
                f"JEEVES_ENCRYPTION_KEYS: key {n} of {len(keys)} is not a Fernet key (32 url-safe base64 bytes)"
            )
    return keys


def _qualified_id(raw: str) -> str:
    ident, sep, domain = raw.partition("@")
    if not sep or not ident or not domain:
        raise ValueError(raw)
    return raw


DEFAULT_PATH_WEIGHTS: dict[str, float] = {
    "structured": 1.0,
    "semantic": 1.0,
    "fulltext": 0.8,
    "graph": 0.6,
    "summary": 0.5,
}


@dataclass(frozen=True)
class SlotConfig:
    model: str
    fallback: str


@dataclass(frozen=True)
class JeevesConfig:
    # Model provider and slots (docs/architecture.md §6)
    llm_base_url: str
    llm_api_key: str
    llm_timeout_ms: int
    slots: dict[str, SlotConfig]
    # Thresholds (docs/architecture.md §6)
    extract_confidence_min: float
    complexity_threshold: float
    entity_dedup_threshold: float
    contradiction_threshold: float
    # Embedding
    embed_dims: int
    embed_messages: bool
    embed_threads: int
    # Pipeline timing and bounds (docs/architecture.md §2-§4)
    queue_ttl_s: int
    window_size: int
    window_max_age_s: int
    extract_debounce_s: float
    extract_batch: int
    staleness_days: int
    # Backing services (Redis, Postgres): how long one call may hang before it counts as a failure
    backend_timeout_s: float
    db_statement_timeout_s: int
    # Faults (issue 11): a running task holds a lease renewed every third of this; a task delivered to a
    # worker whose lease lapsed (the worker died) is put back on its queue by any live worker's sweeper
    task_lease_s: int
    sweep_interval_s: float
    # Clocks: how far apart (seconds) the web host's, the workers' and Redis' clocks may be; measured
    # offsets are exported at /metrics and logged when over this
    clock_skew_s: float
    # Fairness: per-channel token bucket at the bridge (messages/s, burst); over it a message is still
    # received but classified by the offline engine at low priority. 0 = no limit
    channel_rate: float
    channel_burst: int
    # Questions one person may ask per minute before the answer is a polite "one moment" (model spend)
    questions_per_minute: int
    # Forgetting (docs/guarantees.md §7)
    retention_after_leave_days: int  # a channel Jeeves left is purged this long after; 0 = at once
    retention_days: int  # records older than this are aged out nightly; 0 = kept
    # Retrieval (docs/architecture.md §7)
    context_tokens: int
    recency_half_life_days: float
    path_weights: dict[str, float]
    # Wire bridge (docs/wire-protocols.md)
    wire_secret: str
    wire_sidecar_url: str
    wire_app_id: str
    wire_handle: str
    roman_secret: str
    roman_url: str
    wire_default_domain: str
    # Secrets at rest: Fernet keys, the first encrypts, all decrypt (`jeeves rotate-keys`)
    encryption_keys: tuple[str, ...]
    # Operations: GET /metrics needs `Authorization: Bearer <token>` when set
    metrics_token: str
    # Processes started by `jeeves up`
    web_port: int
    flower_port: int
    flower_basic_auth: str
    embedded_redis_port: int
    log_level: str
    log_format: str  # json, text, or "" (json outside the embedded mode and DEBUG, text inside)
    # Benchmark-only endpoints (GET /wire/bench/noop, the baseline of bench/ingest.py); off in production
    bench_endpoints: bool
    data_dir: str

    def slot(self, name: str) -> SlotConfig:
        return self.slots[name]


def load(env: Mapping[str, str]) -> JeevesConfig:
    """Build the configuration from `env`, raising ConfigError on the first bad variable."""

    def s(name: str, default: str) -> str:
        return _read(env, name, default, str, "a string")

    def i(name: str, default: int) -> int:
        return _read(env, name, default, _positive_int, "a positive integer")

    def f01(name: str, default: float) -> float:
        return _read(env, name, default, _unit_float, "a number between 0 and 1")

    def fpos(name: str, default: float) -> float:
        return _read(env, name, default, _positive_float, "a positive number")

    def b(name: str, default: bool) -> bool:
        return _read(env, name, default, _bool, "a boolean (1/0, true/false)")

    base_url = s("JEEVES_LLM_BASE_URL", "")
    # With no provider configured every slot runs on the offline engine.
    slot_default = LOCAL_MODEL
    slots = {
        name: SlotConfig(
            model=s(f"JEEVES_MODEL_{name.upper()}", slot_default),
            fallback=s(f"JEEVES_FALLBACK_{name.upper()}", LOCAL_MODEL),
        )
        for name in SLOTS
    }
    log_level = s("JEEVES_LOG_LEVEL", "INFO").upper()
    if log_level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
        raise ConfigError(f"JEEVES_LOG_LEVEL={log_level!r} is not a logging level")
    log_format = s("JEEVES_LOG_FORMAT", "").lower()
    if log_format not in {"", "json", "text"}:
        raise ConfigError(f"JEEVES_LOG_FORMAT={log_format!r} is not json or text")
    app_id = _read(env, "JEEVES_WIRE_APP_ID", "", _qualified_id, "a qualified id of the form uuid@domain")
    handle = s("JEEVES_WIRE_HANDLE", "jeeves").lstrip("@").lower()

    return JeevesConfig(
        llm_base_url=base_url,
        llm_api_key=s("JEEVES_LLM_API_KEY", ""),
        llm_timeout_ms=i("JEEVES_LLM_TIMEOUT_MS", 60000),
        slots=slots,
        extract_confidence_min=f01("JEEVES_EXTRACT_CONFIDENCE_MIN", 0.6),
        complexity_threshold=f01("JEEVES_COMPLEXITY_THRESHOLD", 0.7),
        entity_dedup_threshold=f01("JEEVES_ENTITY_DEDUP_THRESHOLD", 0.92),
        contradiction_threshold=f01("JEEVES_CONTRADICTION_THRESHOLD", 0.78),
        embed_dims=i("JEEVES_EMBED_DIMS", 384),
        embed_messages=b("JEEVES_EMBED_MESSAGES", False),
        embed_threads=i("JEEVES_EMBED_THREADS", 1),
        queue_ttl_s=i("JEEVES_QUEUE_TTL_S", 60),
        window_size=i("JEEVES_WINDOW_SIZE", 30),
        window_max_age_s=i("JEEVES_WINDOW_MAX_AGE_S", 900),
        extract_debounce_s=fpos("JEEVES_EXTRACT_DEBOUNCE_S", 5.0),
        extract_batch=i("JEEVES_EXTRACT_BATCH", 10),
        staleness_days=i("JEEVES_STALENESS_DAYS", 7),
        backend_timeout_s=fpos("JEEVES_BACKEND_TIMEOUT_S", 3.0),
        db_statement_timeout_s=_read(
            env, "JEEVES_DB_STATEMENT_TIMEOUT_S", 60, _non_negative_int, "a non-negative integer (0 = no limit)"
        ),
        task_lease_s=i("JEEVES_TASK_LEASE_S", 15),
        sweep_interval_s=fpos("JEEVES_SWEEP_INTERVAL_S", 5.0),
        clock_skew_s=_read(env, "JEEVES_CLOCK_SKEW_S", 5.0, _non_negative_float, "a non-negative number"),
        channel_rate=_read(env, "JEEVES_CHANNEL_RATE", 2.0, _non_negative_float, "a non-negative number (0 = off)"),
        channel_burst=i("JEEVES_CHANNEL_BURST", 60),
        questions_per_minute=_read(
            env, "JEEVES_QUESTIONS_PER_MINUTE", 10, _non_negative_int, "a non-negative integer (0 = off)"
        ),
        retention_after_leave_days=_read(
            env, "JEEVES_RETENTION_AFTER_LEAVE_DAYS", 7, _non_negative_int, "a whole number of days (0 = at once)"
        ),
        retention_days=_read(env, "JEEVES_RETENTION_DAYS", 0, _non_negative_int, "a whole number of days (0 = off)"),
        context_tokens=i("JEEVES_CONTEXT_TOKENS", 6000),
        recency_half_life_days=fpos("JEEVES_RECENCY_HALF_LIFE_DAYS", 30.0),
        path_weights=_read(
            env, "JEEVES_PATH_WEIGHTS", dict(DEFAULT_PATH_WEIGHTS), _weights, "a list like structured=1,semantic=1"
        ),
        wire_secret=s("JEEVES_WIRE_SECRET", ""),
        wire_sidecar_url=s("JEEVES_WIRE_SIDECAR_URL", "http://127.0.0.1:8081").rstrip("/"),
        wire_app_id=app_id,
        wire_handle=handle,
        roman_secret=s("JEEVES_ROMAN_SECRET", ""),
        roman_url=s("JEEVES_ROMAN_URL", "http://127.0.0.1:8082").rstrip("/"),
        wire_default_domain=s("JEEVES_WIRE_DEFAULT_DOMAIN", "wire.com"),
        encryption_keys=_fernet_keys(env),
        metrics_token=s("JEEVES_METRICS_TOKEN", ""),
        web_port=i("JEEVES_WEB_PORT", 8000),
        flower_port=i("JEEVES_FLOWER_PORT", 5555),
        flower_basic_auth=s("JEEVES_FLOWER_BASIC_AUTH", ""),
        embedded_redis_port=i("JEEVES_EMBEDDED_REDIS_PORT", 63799),
        log_level=log_level,
        log_format=log_format,
        bench_endpoints=b("JEEVES_BENCH_ENDPOINTS", False),
        data_dir=s("JEEVES_DATA_DIR", ""),
    )


# The password Flower once shipped with: never accepted outside the embedded mode.
OLD_FLOWER_DEFAULT = "admin:jeeves"


def unsafe_start(cfg: JeevesConfig, *, secret_key_set: bool) -> list[str]:
    """What a service outside the embedded mode may not start without (each a variable to set).

    Outside the embedded mode nothing is made up locally: every container would make its own."""
    problems = []
    if not secret_key_set:
        problems.append("DJANGO_SECRET_KEY")
    if not cfg.wire_secret:
        problems.append("JEEVES_WIRE_SECRET")
    user, _, password = cfg.flower_basic_auth.partition(":")
    if not user or not password or cfg.flower_basic_auth == OLD_FLOWER_DEFAULT:
        problems.append("JEEVES_FLOWER_BASIC_AUTH (user:password, not the old admin:jeeves)")
    if not cfg.encryption_keys:
        problems.append("JEEVES_ENCRYPTION_KEYS")
    return problems
