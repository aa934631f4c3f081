"""Jeeves' own configuration: one typed, validated, frozen object built from an environment mapping.

`jeeves/settings.py` is the only module that passes `os.environ` in; everything else reads
`django.conf.settings.JEEVES`. A bad value raises `ConfigError` naming the variable.

Each field of `JeevesConfig` names its variable, default and type once; pydantic-settings reads the
variables (blank = the default) and pydantic validates them. The type's `Kind` is what the one-line
error says the value is not. Django's own variables (DJANGO_*, DATABASE_URL, ...) are declared the same
way in jeeves/settings.py and read by `load_variables`.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar, get_type_hints

from django.core.exceptions import ImproperlyConfigured
from pydantic import AfterValidator, BeforeValidator, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

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
T = TypeVar("T")

DEFAULT_PATH_WEIGHTS: dict[str, float] = {
    "structured": 1.0,
    "semantic": 1.0,
    "fulltext": 0.8,
    "graph": 0.6,
    "summary": 0.5,
}


class ConfigError(ImproperlyConfigured):
    """A variable of the environment has a value Jeeves cannot use."""


@dataclass(frozen=True)
class Kind:
    """What a value of this type is, for the error line: `NAME='raw' is not <text>`. A secret's line
    gives the validator's own reason instead, never the value."""

    text: str
    secret: bool = False


def _bool(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    lowered = raw.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError(raw)


def _weights(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    weights: dict[str, float] = {}
    for part in raw.split(","):
        name, _, value = part.partition("=")
        if not name.strip() or not value.strip():
            raise ValueError(raw)
        weights[name.strip()] = float(value)
    if set(weights) - set(DEFAULT_PATH_WEIGHTS):
        raise ValueError(raw)
    return {**DEFAULT_PATH_WEIGHTS, **weights}


def _fernet_keys(raw: Any) -> Any:
    """Comma-separated Fernet keys, the first encrypts, all decrypt. A bad key is named by its position,
    never echoed (it is a secret)."""
    if not isinstance(raw, str):
        return raw
    keys = tuple(k.strip() for k in raw.split(",") if k.strip())
    for n, key in enumerate(keys, 1):
        try:
            ok = len(base64.urlsafe_b64decode(key.encode("ascii"))) == 32
        except (binascii.Error, ValueError, UnicodeEncodeError):
            ok = False
        if not ok:
            raise ValueError(f"key {n} of {len(keys)} is not a Fernet key (32 url-safe base64 bytes)")
    return keys


def _names(raw: Any) -> Any:
    return tuple(name.strip() for name in raw.split(",") if name.strip()) if isinstance(raw, str) else raw


def _redis_url(raw: str) -> str:
    if raw and not raw.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(raw)
    return raw


def _qualified_id(raw: str) -> str:
    ident, sep, domain = raw.partition("@")
    if raw and (not sep or not ident or not domain):
        raise ValueError(raw)
    return raw


Text = Annotated[str, Kind("a string")]
Url = Annotated[str, AfterValidator(lambda url: url.rstrip("/")), Kind("a string")]
PositiveInt = Annotated[int, Field(gt=0), Kind("a positive integer")]
NonNegativeInt = Annotated[int, Field(ge=0), Kind("a non-negative integer")]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False), Kind("a positive number")]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False), Kind("a non-negative number")]
Days = Annotated[int, Field(ge=0), Kind("a whole number of days")]
UnitFloat = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False), Kind("a number between 0 and 1")]
Bool = Annotated[bool, BeforeValidator(_bool), Kind("a boolean (1/0, true/false)")]
LogLevel = Annotated[
    Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], BeforeValidator(str.upper), Kind("a logging level")
]
LogFormat = Annotated[Literal["", "json", "text"], BeforeValidator(str.lower), Kind("json or text")]
Handle = Annotated[str, AfterValidator(lambda handle: handle.lstrip("@").lower()), Kind("a string")]
QualifiedId = Annotated[str, AfterValidator(_qualified_id), Kind("a qualified id of the form uuid@domain")]
PathWeights = Annotated[
    dict[str, float], NoDecode, BeforeValidator(_weights), Kind("a list like structured=1,semantic=1")
]
FernetKeys = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_fernet_keys), Kind("Fernet keys", secret=True)]
# Unset (None): the caller decides, e.g. by the mode (jeeves/settings.py's deployment switches).
MaybeBool = Annotated[bool | None, BeforeValidator(_bool), Kind("a boolean (1/0, true/false)")]
MaybeSeconds = Annotated[int | None, Field(ge=0), Kind("a whole number of seconds")]
Names = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_names), Kind("a comma-separated list")]
RedisUrl = Annotated[str, AfterValidator(_redis_url), Kind("a redis:// URL")]


def var(name: str, default: Any, zero: str | None = None) -> Any:
    """A field read from the variable `name` (blank or unset: `default`); `zero`: what 0 means, said after its
    type's wording in the error line ("a non-negative integer (0 = off)")."""
    return dataclasses.field(default=default, metadata={"env": name, "zero": zero})


@dataclass(frozen=True)
class SlotConfig:
    model: str
    fallback: str


@dataclass(frozen=True)
class JeevesConfig:
    # Model provider and slots (docs/architecture.md §6): JEEVES_MODEL_<SLOT>, JEEVES_FALLBACK_<SLOT>;
    # with no provider configured every slot runs on the offline engine
    slots: dict[str, SlotConfig]
    llm_base_url: Text = var("JEEVES_LLM_BASE_URL", "")
    llm_api_key: Text = var("JEEVES_LLM_API_KEY", "")
    llm_timeout_ms: PositiveInt = var("JEEVES_LLM_TIMEOUT_MS", 60000)
    # Thresholds (docs/architecture.md §6)
    extract_confidence_min: UnitFloat = var("JEEVES_EXTRACT_CONFIDENCE_MIN", 0.6)
    complexity_threshold: UnitFloat = var("JEEVES_COMPLEXITY_THRESHOLD", 0.7)
    entity_dedup_threshold: UnitFloat = var("JEEVES_ENTITY_DEDUP_THRESHOLD", 0.92)
    contradiction_threshold: UnitFloat = var("JEEVES_CONTRADICTION_THRESHOLD", 0.78)
    # Embedding
    embed_dims: PositiveInt = var("JEEVES_EMBED_DIMS", 384)
    embed_threads: PositiveInt = var("JEEVES_EMBED_THREADS", 1)
    embed_messages: Bool = var("JEEVES_EMBED_MESSAGES", False)
    # Pipeline timing and bounds (docs/architecture.md §2-§4)
    queue_ttl_s: PositiveInt = var("JEEVES_QUEUE_TTL_S", 60)
    window_size: PositiveInt = var("JEEVES_WINDOW_SIZE", 30)
    window_max_age_s: PositiveInt = var("JEEVES_WINDOW_MAX_AGE_S", 900)
    extract_debounce_s: PositiveFloat = var("JEEVES_EXTRACT_DEBOUNCE_S", 5.0)
    extract_batch: PositiveInt = var("JEEVES_EXTRACT_BATCH", 10)
    # A model's extraction prompt (pipeline/extract.py): the burst's messages, after at most this many earlier
    # (already extracted) messages of the window as context, together at most this many tokens
    extract_context_messages: NonNegativeInt = var("JEEVES_EXTRACT_CONTEXT_MESSAGES", 4, zero="the burst alone")
    extract_context_tokens: NonNegativeInt = var("JEEVES_EXTRACT_CONTEXT_TOKENS", 400, zero="the burst alone")
    # Messages one classify task may classify together with the offline engine (pipeline/batch.py); 1: one each
    classify_batch: PositiveInt = var("JEEVES_CLASSIFY_BATCH", 16)
    # Embed tasks one embed task takes together into one forward pass (pipeline/batch.py); 1: one each
    embed_batch: PositiveInt = var("JEEVES_EMBED_BATCH", 16)
    staleness_days: PositiveInt = var("JEEVES_STALENESS_DAYS", 7)
    # Backing services (Redis, Postgres): how long one call may hang before it counts as a failure
    backend_timeout_s: PositiveFloat = var("JEEVES_BACKEND_TIMEOUT_S", 3.0)
    db_statement_timeout_s: NonNegativeInt = var("JEEVES_DB_STATEMENT_TIMEOUT_S", 60, zero="no limit")
    # Faults (issue 11): a running task holds a lease renewed every third of this; a task delivered to a
    # worker whose lease lapsed (the worker died) is put back on its queue by any live worker's sweeper
    task_lease_s: PositiveInt = var("JEEVES_TASK_LEASE_S", 15)
    sweep_interval_s: PositiveFloat = var("JEEVES_SWEEP_INTERVAL_S", 5.0)
    # Clocks: how far apart (seconds) the web host's, the workers' and Redis' clocks may be; measured
    # offsets are exported at /metrics and logged when over this
    clock_skew_s: NonNegativeFloat = var("JEEVES_CLOCK_SKEW_S", 5.0)
    # Fairness: per-channel token bucket at the bridge (messages/s, burst); over it a message is still
    # received but classified by the offline engine at low priority. 0 = no limit
    channel_rate: NonNegativeFloat = var("JEEVES_CHANNEL_RATE", 2.0, zero="off")
    channel_burst: PositiveInt = var("JEEVES_CHANNEL_BURST", 60)
    # Questions one person may ask per minute before the answer is a polite "one moment" (model spend)
    questions_per_minute: NonNegativeInt = var("JEEVES_QUESTIONS_PER_MINUTE", 10, zero="off")
    # Forgetting (docs/guarantees.md §7): a channel Jeeves left is purged this long after (0 = at once);
    # records older than retention_days are aged out nightly (0 = kept)
    retention_after_leave_days: Days = var("JEEVES_RETENTION_AFTER_LEAVE_DAYS", 7, zero="at once")
    retention_days: Days = var("JEEVES_RETENTION_DAYS", 0, zero="off")
    # Retrieval (docs/architecture.md §7)
    context_tokens: PositiveInt = var("JEEVES_CONTEXT_TOKENS", 6000)
    recency_half_life_days: PositiveFloat = var("JEEVES_RECENCY_HALF_LIFE_DAYS", 30.0)
    path_weights: PathWeights = dataclasses.field(
        default_factory=lambda: dict(DEFAULT_PATH_WEIGHTS), metadata={"env": "JEEVES_PATH_WEIGHTS", "zero": None}
    )
    # Wire bridge (docs/wire-protocols.md)
    wire_secret: Text = var("JEEVES_WIRE_SECRET", "")
    wire_sidecar_url: Url = var("JEEVES_WIRE_SIDECAR_URL", "http://127.0.0.1:8081")
    wire_app_id: QualifiedId = var("JEEVES_WIRE_APP_ID", "")
    wire_handle: Handle = var("JEEVES_WIRE_HANDLE", "jeeves")
    roman_secret: Text = var("JEEVES_ROMAN_SECRET", "")
    roman_url: Url = var("JEEVES_ROMAN_URL", "http://127.0.0.1:8082")
    wire_default_domain: Text = var("JEEVES_WIRE_DEFAULT_DOMAIN", "wire.com")
    # Secrets at rest: Fernet keys, the first encrypts, all decrypt (`jeeves rotate-keys`)
    encryption_keys: FernetKeys = var("JEEVES_ENCRYPTION_KEYS", ())
    # Operations: GET /metrics needs `Authorization: Bearer <token>` when set
    metrics_token: Text = var("JEEVES_METRICS_TOKEN", "")
    # Processes started by `jeeves up`
    web_port: PositiveInt = var("JEEVES_WEB_PORT", 8000)
    flower_port: PositiveInt = var("JEEVES_FLOWER_PORT", 5555)
    flower_basic_auth: Text = var("JEEVES_FLOWER_BASIC_AUTH", "")
    embedded_redis_port: PositiveInt = var("JEEVES_EMBEDDED_REDIS_PORT", 63799)
    log_level: LogLevel = var("JEEVES_LOG_LEVEL", "INFO")
    # json, text, or "" (json outside the embedded mode and DEBUG, text inside)
    log_format: LogFormat = var("JEEVES_LOG_FORMAT", "")
    # Benchmark-only endpoints (GET /wire/bench/noop, the baseline of bench/ingest.py); off in production
    bench_endpoints: Bool = var("JEEVES_BENCH_ENDPOINTS", False)
    data_dir: Text = var("JEEVES_DATA_DIR", "")

    def slot(self, name: str) -> SlotConfig:
        return self.slots[name]


class _Environment(BaseSettings):
    model_config = SettingsConfigDict(case_sensitive=True, extra="ignore", frozen=True)


def _model_field(f: dataclasses.Field, hint: Any) -> tuple[Any, Any]:
    """A var() field as a pydantic field read from its variable; what 0 means, if it says, as the description."""
    default = {"default": f.default} if f.default is not dataclasses.MISSING else {"default_factory": f.default_factory}
    return (hint, Field(**default, validation_alias=f.metadata["env"], description=f.metadata["zero"]))


def environment(config: type, **extra: Any) -> type[BaseSettings]:
    """One pydantic-settings model of every variable a frozen dataclass declares with var(), and `extra`'s."""
    hints = get_type_hints(config, include_extras=True)
    fields = {f.name: _model_field(f, hints[f.name]) for f in dataclasses.fields(config) if "env" in f.metadata}
    return create_model(f"{config.__name__}Environment", __base__=_Environment, **fields, **extra)


def _kind(info: FieldInfo) -> Kind:
    """A variable's Kind for its error line: its type's, and what 0 means where its field says."""
    kind = next(m for m in info.metadata if isinstance(m, Kind))
    return dataclasses.replace(kind, text=f"{kind.text} (0 = {info.description})") if info.description else kind


class _Given(EnvSettingsSource):
    """The mapping handed to read() (os.environ from settings.py, a dict in tests), values stripped; a
    blank value is unset, so its default applies."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]):
        self._given = env
        super().__init__(settings_cls, case_sensitive=True)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {name: value.strip() for name, value in self._given.items() if value and value.strip()}


def read(model: type[BaseSettings], env: Mapping[str, str]) -> Any:
    """The model's values from `env` (nothing else), raising ConfigError on the first bad variable."""

    class FromEnv(model):  # type: ignore[misc,valid-type]
        @classmethod
        def settings_customise_sources(
            cls, settings_cls: type[BaseSettings], **_sources: PydanticBaseSettingsSource
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return (_Given(settings_cls, env),)

    try:
        return FromEnv()
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0])
        kind = next(_kind(info) for info in model.model_fields.values() if info.validation_alias == name)
        if kind.secret:
            raise ConfigError(f"{name}: {error.get('ctx', {}).get('error', 'invalid')}") from None
        raise ConfigError(f"{name}={env[name].strip()!r} is not {kind.text}") from None


def load_variables(config: type[T], env: Mapping[str, str]) -> T:
    """`config`, a frozen dataclass whose fields are all var()s, from `env` (ConfigError as load())."""
    return config(**read(environment(config), env).model_dump())


# Every variable of JeevesConfig as one pydantic-settings model: the fields that name one, and the slots'.
_VARIABLES = [f.name for f in dataclasses.fields(JeevesConfig) if "env" in f.metadata]
_SLOT_VARIABLES = {
    f"{kind}_{slot}": f"JEEVES_{kind.upper()}_{slot.upper()}" for kind in ("model", "fallback") for slot in SLOTS
}
Environment: type[BaseSettings] = environment(
    JeevesConfig,
    **{name: (Text, Field(LOCAL_MODEL, validation_alias=variable)) for name, variable in _SLOT_VARIABLES.items()},
)


def load(env: Mapping[str, str]) -> JeevesConfig:
    """Build the configuration from `env`, raising ConfigError on the first bad variable."""
    values = read(Environment, env)
    slots = {slot: SlotConfig(getattr(values, f"model_{slot}"), getattr(values, f"fallback_{slot}")) for slot in SLOTS}
    return JeevesConfig(slots=slots, **{name: getattr(values, name) for name in _VARIABLES})


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
