"""Feature rows: the hashed text blocks taken from the per-text cache are the vectorisers' own matrices."""

from __future__ import annotations

import numpy as np

from pipeline.offline import features

TEXTS = [
    "Shall we move the retro to Thursday?",
    "",
    "ok, Thursday works for me",
    "I'll send the deck to @someone by Friday http",
    "Shall we move the retro to Thursday?",
    "néant — déjà vu, 42 ✅",
]


def test_cached_hashed_rows_are_the_vectorisers_matrices_bit_for_bit() -> None:
    vectorisers = features.vectorisers()
    for which in (features.WORDS, features.CHARS, features.EDGES, features.CONTEXT):
        expected = vectorisers[which].transform(TEXTS)
        features.hashed(which, TEXTS[2:4])  # some rows cached first, the rest hashed in the same call
        for texts in (TEXTS, TEXTS):  # then every row from the cache
            got = features.hashed(which, texts)
            assert got.shape == expected.shape
            for part in ("data", "indices", "indptr"):
                assert getattr(got, part).dtype == getattr(expected, part).dtype
                assert np.array_equal(getattr(got, part), getattr(expected, part))


def test_the_row_cache_is_bounded(monkeypatch) -> None:
    monkeypatch.setattr(features._rows_cache, "size", 3)
    features.hashed(features.WORDS, [f"message number {k}" for k in range(10)])
    assert len(features._rows_cache) <= 3


def test_loading_a_corpus_widens_the_caches_to_hold_it_and_never_narrows_them(monkeypatch, tmp_path) -> None:
    from pipeline.offline import corpus

    monkeypatch.setattr(features._cache, "size", 4096)
    monkeypatch.setattr(features._rows_cache, "size", 4096)
    features.hold(2000)  # a corpus of 2,000 messages: its texts and those built of them, per vectoriser
    assert features._cache.size == 6000 and features._rows_cache.size == 24000
    features.hold(10)
    assert features._cache.size == 6000 and features._rows_cache.size == 24000
    assert corpus.load_dir(tmp_path) == []  # an empty folder widens nothing
    assert features._cache.size == 6000
