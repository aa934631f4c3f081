"""What the offline engine's learned heads see of a message: general features, no phrase of any dataset.

A message is described by
- MiniLM sentence embeddings (the bundled `all-MiniLM-L6-v2`) of the message, the message before it
  and, for extraction, the message after it (a decision is often recognisable by its reply);
- hashed word uni/bigrams and character 2-4-grams of the message (style-robust: terse, verbose,
  non-native writing), its opening and closing words (how a message starts says much: a reply, a
  verdict, a request), and the words of the neighbouring messages at half weight; no vocabulary to
  ship (`HashingVectorizer` is stateless);
- a few scalars of shape: length, question mark, figures, links, mentions of others, whether the
  author changed, minutes since the previous message, first/second person;
- discourse cues (`CUES`): general English markers of what a message does — a verdict ("decided",
  "agreed", "approved"), a choice ("go with", "picked"), a proposal or hedge ("what if", "maybe"), a
  request, a commitment, being blocked, being done — each group one feature of the message and of its
  neighbours. A group pools words no single conversation repeats, so its weight is learned from every
  use of any of them in train; n-grams alone spread that evidence over thousands of hashed columns.
  The groups are English grammar and idiom, none taken from a dataset sentence; which of them matter,
  and how much, is the model's to learn.

Everything is computed from the window the tier is given; the text never leaves this call's memory.
Embeddings of identical texts are reused from a small in-process cache keyed by a digest of the text
(never by the text); Tier 1's reach Tier 2's process through Redis (`pack`, `unpack`: pipeline/window.py).
Each text's hashed n-gram rows are reused the same way (`hashed`): a run's window is mostly the last run's.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from scipy import sparse

FEATURE_VERSION = "msg-v4"
EMBEDDER = "all-MiniLM-L6-v2"
DIM = 384
WORD_BITS = 15
CHAR_BITS = 15
EDGE_BITS = 14
CONTEXT_BITS = 14
CONTEXT_WEIGHT = 0.5  # the neighbours' words count half as much as the message's own
CUE_WEIGHT = 0.5  # the cue features' scale (chosen by train cross-validation: 0.5, 1 and 2 tried)

_URL = re.compile(r"https?://\S+|www\.\S+")
_MENTION = re.compile(r"@[\w.\-]+")
_FIGURE = re.compile(r"\d")
# The persons a message speaks in, each a scalar of its own (SCALARS names them in this order).
_PERSONS: dict[str, re.Pattern[str]] = {
    name: re.compile(rf"\b(?:{words})\b")
    for name, words in {
        "first_person": r"i|i'm|i'll|i've|i'd|me|my",
        "we": r"we|we're|we'll|we've|let's|lets|our|us",
        "you": r"you|you're|you'll|your",
    }.items()
}
_QUESTION_WORD = re.compile(
    r"^\s*(?:who|what|when|where|why|how|which|is|are|do|does|did|can|could|should|will|would)\b"
)

SCALARS = (
    "log_words",
    "question_mark",
    "question_word_first",
    "has_figure",
    "has_link",
    "mentions_other",
    "author_changed",
    "log_minutes_since_previous",
    "first_person",
    "we",
    "you",
    "exclamation",
    "is_first",
)
NEXT_SCALARS = ("next_same_author", "log_minutes_to_next")  # extraction only: Tier 1 has no next message

CUES: dict[str, re.Pattern[str]] = {
    name: re.compile(pattern)
    for name, pattern in {
        "verdict": r"\b(?:decided|decision|agreed|approved?|confirm(?:ed|ing)?|final(?:ly|i[sz]ed?)?|settled?"
        r"|signed off|sign off|official(?:ly)?)\b",
        "choice": r"\b(?:go(?:ing)? with|went with|chose|chosen|choose|pick(?:ed|ing)?|opt(?:ed|ing)? for|prefer)\b",
        "from_now": r"\b(?:from now on|going forward|effective|as of|starting (?:today|tomorrow|monday|next)"
        r"|from (?:today|monday|next))\b",
        "we_will": r"\b(?:we'll|we will|we're going to|let's|lets|we're|we are)\b",
        "proposal": r"\b(?:should we|shall we|what if|how about|what about|could we|can we|suggest|propos\w*|idea"
        r"|option|maybe|perhaps|might|i think|imo|thoughts)\b",
        "hedge": r"\b(?:not sure|unsure|i guess|probably|possibly|depends|unless)\b",
        "assent": r"^\W*(?:ok(?:ay)?|yes|yep|yeah|sure|sounds good|works for me|agreed|deal|perfect|great|fine"
        r"|\+1|lgtm)\b",
        "change": r"\b(?:no longer|no more|instead|replac\w*|switch\w* to|move[sd]? to|moving to|cancel\w*"
        r"|drop(?:ped|ping)?|scrap\w*|revert\w*)\b",
        "contrast": r"\b(?:but|however|although|though)\b",
        "request": r"\b(?:can you|could you|would you|can someone|could someone|please|pls|plz)\b",
        "commitment": r"\b(?:i'll|i will|ill|i can|on it|will do|i'm on|let me|i'll take|mine)\b",
        "blocked": r"\b(?:blocked|blocking|blocker|stuck|waiting (?:on|for)|can't|cannot|unable|depends on)\b",
        "done": r"(?:\b(?:done|finished|shipped|merged|deployed|fixed|sent|completed|live)\b|\u2705)",
        "by_when": r"\bby (?:mon|tue|wed|thu|fri|sat|sun|eod|eow|end of|tomorrow|tonight|next|the \d|\d)",
    }.items()
}

_TOKEN = re.compile(r"[a-z0-9']+|[?!]")


def _edges(text: str) -> list[str]:
    """The first one to three and the last one or two tokens, as features of their own."""
    t = _TOKEN.findall(text.lower())
    if not t:
        return ["<empty>"]
    return [f"^{t[0]}", f"^{' '.join(t[:2])}", f"^{' '.join(t[:3])}", f"{t[-1]}$", f"{' '.join(t[-2:])}$"]


@cache
def vectorisers() -> tuple[Any, Any, Any, Any]:
    """The hashed word, character, edge and context vectorisers (stateless), built on first use: scikit-learn
    and SciPy (~110 MB) are imported only by a process that builds feature rows, not by every process that
    checks the engine's artefacts (web, beat, flower, summarise; pipeline/tasks.py imports them in an
    embedding worker's main process before its pool forks, so the children share them)."""
    from sklearn.feature_extraction.text import HashingVectorizer

    words = HashingVectorizer(
        n_features=2**WORD_BITS, ngram_range=(1, 2), alternate_sign=False, norm="l2", lowercase=True,
        token_pattern=r"(?u)\b\w[\w']*\b",
    )  # fmt: skip
    chars = HashingVectorizer(
        n_features=2**CHAR_BITS, analyzer="char_wb", ngram_range=(2, 4), alternate_sign=False, norm="l2",
        lowercase=True,
    )  # fmt: skip
    edges = HashingVectorizer(n_features=2**EDGE_BITS, analyzer=_edges, alternate_sign=False, norm="l2")
    context = HashingVectorizer(
        n_features=2**CONTEXT_BITS, ngram_range=(1, 2), alternate_sign=False, norm="l2", lowercase=True,
        token_pattern=r"(?u)\b\w[\w']*\b",
    )  # fmt: skip
    return words, chars, edges, context


@dataclass(frozen=True)
class Msg:
    """One message as the features see it (a window message, or an evalset message)."""

    id: str
    author_id: str
    text: str
    minutes: float  # minutes since an arbitrary origin (only differences are used)
    mentions_other: bool


def normalise(text: str) -> str:
    """Links and @handles become placeholders: who is addressed is a feature, which handle is not."""
    text = (text or "").replace("\u2019", "'")[:4000]
    return _MENTION.sub(" @someone ", _URL.sub(" http ", text))


# --- embeddings -------------------------------------------------------------------------------------


class _Lru:
    """A bounded, thread-safe map of this process, least recently used first out: the embedding cache and the
    hashed rows' cache (keyed by digests of texts, never the texts)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def get(self, key: Any) -> Any:
        with self._lock:
            return self._data.get(key)

    def lookup(self, keys: Sequence[Any]) -> tuple[list[Any], dict[Any, int]]:
        """What is held for each of `keys` (None where nothing; a hit becomes the most recent) and the keys not
        held, each with the first position it stands at."""
        found: list[Any] = [None] * len(keys)
        missing: dict[Any, int] = {}
        with self._lock:
            for i, key in enumerate(keys):
                hit = self._data.get(key)
                if hit is not None:
                    found[i] = hit
                    self._data.move_to_end(key)
                else:
                    missing.setdefault(key, i)
        return found, missing

    def store(self, fresh: dict[Any, Any], *, replace: bool = True) -> None:
        """`fresh` put in (over what is held unless `replace` is False), the oldest dropped past `size`."""
        with self._lock:
            for key, value in fresh.items():
                if replace or key not in self._data:
                    self._data[key] = value
            while len(self._data) > self.size:
                self._data.popitem(last=False)


_cache = _Lru(4096)  # MiniLM vectors by the digest of their text


def hold(messages: int) -> None:
    """Widen this process's caches to hold a corpus of `messages` replayed again and again (`jeeves train` and the
    benches replay every training conversation once per fold and per setting tried): past the default bound every
    replay would embed and hash its texts anew (a corpus of 4,196 messages trained 4x slower). Never narrows them;
    workers keep the default bound."""
    _cache.size = max(_cache.size, 3 * messages)  # the messages, and the decision and comparison texts built of them
    _rows_cache.size = max(_rows_cache.size, 3 * 4 * messages)  # per vectoriser (WORDS, CHARS, EDGES, CONTEXT)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).digest()


def embed(texts: Sequence[str]) -> np.ndarray:
    """MiniLM vectors (normalised) of `texts`, one row each; empty texts get a zero row."""
    from pipeline import embedder

    out = np.zeros((len(texts), DIM), dtype=np.float32)
    said = [i for i, text in enumerate(texts) if text.strip()]
    keys = [_digest(texts[i]) for i in said]
    found, missing = _cache.lookup(keys)
    for i, hit in zip(said, found, strict=True):
        if hit is not None:
            out[i] = hit
    if missing:
        order = list(missing.items())
        vectors = np.asarray(embedder.embed_local([texts[said[k]][:2000] for _, k in order]), dtype=np.float32)
        fresh = {key: vector for (key, _), vector in zip(order, vectors, strict=True)}
        _cache.store(fresh)
        for i, key in zip(said, keys, strict=True):
            if key in fresh:
                out[i] = fresh[key]
    return out


# The characters of a message the engine reads (Tier 1 and Tier 2 alike).
TEXT_LIMIT = 10000


def message_text(text: str | None) -> str:
    """What `embed` is given for a message's text, in either tier."""
    return normalise((text or "")[:TEXT_LIMIT])


def pack(text: str) -> str | None:
    """This process's vector of `text` (as `embed` was given it) with a digest of the text, as ASCII for another
    process to `unpack` (`pipeline.window.keep_vectors`: Tier 1 hands its vectors to Tier 2); None when the
    cache does not hold it."""
    key = _digest(text)
    vector = _cache.get(key)
    if vector is None:
        return None
    return base64.b64encode(key + np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def unpack(texts: Sequence[str], packed: Sequence[str]) -> int:
    """Put into this process's cache the vectors another process `pack`ed of `texts` (as `embed` will be given
    them), each only when its digest is that of its text; how many. `embed` then returns them as it would
    have its own (the same model's float32 vector of the same text)."""
    fresh: dict[bytes, np.ndarray] = {}
    for text, raw in zip(texts, packed, strict=True):
        try:
            blob = base64.b64decode(raw, validate=True)
        except ValueError:
            continue
        key = _digest(text)
        if len(blob) == 16 + 4 * DIM and blob[:16] == key and text.strip():
            fresh[key] = np.frombuffer(blob, dtype="<f4", offset=16).astype(np.float32)
    _cache.store(fresh, replace=False)
    return len(fresh)


def cached(texts: Sequence[str]) -> list[bool]:
    """Whether this process's cache holds the vector of each of `texts` (as `embed` would be given them)."""
    return [_digest(t) in _cache for t in texts]


# --- feature matrices -----------------------------------------------------------------------------


def scalars(msgs: Sequence[Msg], with_next: bool) -> np.ndarray:
    rows = []
    for i, m in enumerate(msgs):
        low = normalise(m.text).lower()
        prev = msgs[i - 1] if i > 0 else None
        nxt = msgs[i + 1] if i + 1 < len(msgs) else None
        rows.append(
            [
                math.log1p(len(low.split())) / 4,
                float("?" in low),
                float(bool(_QUESTION_WORD.match(low))),
                float(bool(_FIGURE.search(low))),
                float("http" in low),
                float(m.mentions_other),
                float(prev is None or prev.author_id != m.author_id),
                math.log1p(max(0.0, m.minutes - prev.minutes)) / 8 if prev else 1.0,
                *(float(bool(person.search(low))) for person in _PERSONS.values()),
                float("!" in low),
                float(prev is None),
            ]
            + (
                [
                    float(nxt is not None and nxt.author_id == m.author_id),
                    math.log1p(max(0.0, nxt.minutes - m.minutes)) / 8 if nxt else 1.0,
                ]
                if with_next
                else []
            )
        )
    return np.asarray(rows, dtype=np.float32).reshape(len(msgs), len(SCALARS) + with_next * len(NEXT_SCALARS))


def cues(msgs: Sequence[Msg], with_next: bool) -> np.ndarray:
    """Which `CUES` groups each message uses, then the same for the message before (and after)."""
    own = np.array(
        [[float(bool(rx.search(normalise(m.text).lower()))) for rx in CUES.values()] for m in msgs], dtype=np.float32
    ).reshape(len(msgs), len(CUES))
    zero = np.zeros((1, len(CUES)), dtype=np.float32)
    blocks = [own, np.vstack([zero, own[:-1]])]
    if with_next:
        blocks.append(np.vstack([own[1:], zero]))
    return np.hstack(blocks)[: len(msgs)] * CUE_WEIGHT


def matrix(msgs: Sequence[Msg], vectors: np.ndarray | None = None, *, with_next: bool) -> sparse.csr_matrix:
    """The feature rows of `msgs` (a conversation or window, in order). `vectors`: their embeddings."""
    if vectors is None:
        vectors = embed([normalise(m.text) for m in msgs])
    texts = [normalise(m.text) for m in msgs]
    return _rows(_dense(msgs, vectors, with_next), texts, ["", *texts[:-1]], [*texts[1:], ""] if with_next else None)


def _dense(msgs: Sequence[Msg], vectors: np.ndarray, with_next: bool) -> np.ndarray:
    """The dense part of `msgs`' rows: their embeddings, the previous (and next) one's, scalars and cues."""
    zero = np.zeros((1, DIM), dtype=np.float32)
    prev = np.vstack([zero, vectors[:-1]]) if len(msgs) else vectors
    blocks = [vectors, prev]
    if with_next:
        blocks.append(np.vstack([vectors[1:], zero]) if len(msgs) else vectors)
    blocks.append(scalars(msgs, with_next))
    blocks.append(cues(msgs, with_next))
    return np.hstack(blocks)


# Each text's hashed rows, per vectoriser: a run's window is mostly the last run's, and a run builds two
# matrices (Tier 1's, Tier 2's) over the same texts, so most rows were hashed before. Keyed by the vectoriser and
# a digest of the text (never the text); bounded, least recently used first out.
_rows_cache = _Lru(4096)  # (vectoriser, digest) -> the row's (indices, data)
WORDS, CHARS, EDGES, CONTEXT = range(4)


def hashed(which: int, texts: Sequence[str]) -> sparse.csr_matrix:
    """`vectorisers()[which].transform(texts)`, the same matrix (each row is its text's alone: a stateless
    hashing and a row's own L2 norm), with the rows of texts hashed before taken from `_rows_cache`."""
    from scipy import sparse

    vectoriser = vectorisers()[which]
    if not texts:
        return vectoriser.transform(texts)
    keys = [(which, _digest(t)) for t in texts]
    rows, missing = _rows_cache.lookup(keys)
    if missing:
        order = list(missing.items())
        fresh_rows = vectoriser.transform([texts[i] for _, i in order])
        fresh = {
            key: (
                fresh_rows.indices[fresh_rows.indptr[r] : fresh_rows.indptr[r + 1]].copy(),
                fresh_rows.data[fresh_rows.indptr[r] : fresh_rows.indptr[r + 1]].copy(),
            )
            for r, (key, _) in enumerate(order)
        }
        _rows_cache.store(fresh)
        rows = [row if row is not None else fresh[key] for row, key in zip(rows, keys, strict=True)]
    indptr = np.zeros(len(rows) + 1, dtype=np.int32)
    np.cumsum([len(row[0]) for row in rows], out=indptr[1:])  # type: ignore[index]
    return sparse.csr_matrix(
        (
            np.concatenate([row[1] for row in rows]),  # type: ignore[index]
            np.concatenate([row[0] for row in rows]),  # type: ignore[index]
            indptr,
        ),
        shape=(len(rows), vectoriser.n_features),
    )


def _rows(dense: np.ndarray, texts: list[str], before: list[str], after: list[str] | None) -> sparse.csr_matrix:
    """Rows from their dense part and their texts (normalised), the texts before them (and after them)."""
    from scipy import sparse

    blocks = [
        sparse.csr_matrix(dense),
        hashed(WORDS, texts),
        hashed(CHARS, texts),
        hashed(EDGES, texts),
        hashed(CONTEXT, before) * CONTEXT_WEIGHT,
    ]
    if after is not None:
        blocks += [hashed(CONTEXT, after) * CONTEXT_WEIGHT, hashed(EDGES, after) * CONTEXT_WEIGHT]
    return sparse.hstack(blocks, format="csr")


def last_rows(groups: Sequence[Sequence[Msg]], vectors: Sequence[np.ndarray]) -> sparse.csr_matrix:
    """The last row of `matrix(group, vectors, with_next=False)` for each group (a message and the messages
    before it), built for all groups at once from the same parts (`_dense`, `_rows`): the same values, one
    vectoriser call per block instead of one per group. `vectors[i]`: the embeddings of `groups[i]`."""
    dense = np.vstack([_dense(g, v, False)[-1:] for g, v in zip(groups, vectors, strict=True)])
    texts = [normalise(g[-1].text) for g in groups]
    before = [normalise(g[-2].text) if len(g) > 1 else "" for g in groups]
    return _rows(dense, texts, before, None)


def column_blocks(with_next: bool) -> dict[str, slice]:
    """Where each block of a `matrix` row lies: the sentence embeddings, the scalars, the cues, and the hashed
    n-grams (`words`, `chars`, `edges` of the message; `context`: the neighbours' words, and the next message's
    edges), in `_dense` and `_rows`' order."""
    out, start = {}, 0
    dense = DIM * (3 if with_next else 2)
    context = 2**CONTEXT_BITS + (2**CONTEXT_BITS + 2**EDGE_BITS if with_next else 0)
    for name, size in (
        ("embeddings", dense), ("scalars", len(SCALARS) + with_next * len(NEXT_SCALARS)),
        ("cues", len(CUES) * (3 if with_next else 2)), ("words", 2**WORD_BITS), ("chars", 2**CHAR_BITS),
        ("edges", 2**EDGE_BITS), ("context", context),
    ):  # fmt: skip
        out[name] = slice(start, start + size)
        start += size
    return out


def embedding_columns(n_columns: int) -> int:
    """How many of the first columns of a `matrix` row of `n_columns` are sentence embeddings."""
    return DIM * (3 if n_columns == width(True) else 2)


def width(with_next: bool) -> int:
    text = 2**WORD_BITS + 2**CHAR_BITS + 2**EDGE_BITS + 2**CONTEXT_BITS
    if with_next:
        text += 2**CONTEXT_BITS + 2**EDGE_BITS
    cue = len(CUES) * (3 if with_next else 2)
    return DIM * (3 if with_next else 2) + len(SCALARS) + with_next * len(NEXT_SCALARS) + cue + text
