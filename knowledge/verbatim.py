"""The no-verbatim rule: how many consecutive words a synthesised text shares with its sources, and
what share of a source's words it keeps in order.

Stored text must never carry a run of ten or more words of a message (docs/guarantees.md §4). Words are
case-folded alphanumeric runs (apostrophes kept inside words), so punctuation and spacing
changes do not hide a copied run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

MAX_RUN = 9  # the longest shared run a stored text may have; ten words is a copy
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*", re.UNICODE)


def words(text: str) -> list[str]:
    return [w.casefold().replace("\u2019", "'") for w in _WORD.findall(text or "")]


def longest_common_run(text: str, sources: Iterable[str]) -> int:
    """Length in words of the longest run of consecutive words `text` shares with any source."""
    mine = words(text)
    if not mine:
        return 0
    best = 0
    for source in sources:
        theirs = words(source)
        if not theirs:
            continue
        # Classic longest-common-substring DP over words, one row at a time.
        previous = [0] * (len(theirs) + 1)
        for word in mine:
            current = [0] * (len(theirs) + 1)
            for j, other in enumerate(theirs, start=1):
                if word == other:
                    current[j] = previous[j - 1] + 1
                    if current[j] > best:
                        best = current[j]
            previous = current
    return best


def is_safe(text: str, sources: Iterable[str]) -> bool:
    return longest_common_run(text, sources) <= MAX_RUN


def kept_share(text: str, source: str) -> float:
    """The share of `source`'s words that `text` keeps in order (longest common subsequence of words)."""
    mine, theirs = words(text), words(source)
    if not mine or not theirs:
        return 0.0
    previous = [0] * (len(theirs) + 1)
    for word in mine:
        current = [0] * (len(theirs) + 1)
        for j, other in enumerate(theirs, start=1):
            current[j] = previous[j - 1] + 1 if word == other else max(previous[j], current[j - 1])
        previous = current
    return previous[-1] / len(theirs)


SHARE_MIN_WORDS = 8  # shorter messages are restated in about as many words as they have


def restatement(text: str, sources: Iterable[str]) -> dict[str, float | int]:
    """What a stored text keeps of the messages it restates: the largest share of one message's words
    kept in order (over messages of SHARE_MIN_WORDS words or more) and the longest shared run."""
    sources = [s for s in sources if s]
    long = [s for s in sources if len(words(s)) >= SHARE_MIN_WORDS]
    return {
        "kept_share": round(max((kept_share(text, s) for s in long), default=0.0), 3),
        "longest_run": longest_common_run(text, sources),
        "long_sources": len(long),
    }


# --------------------------------------------------------------------------- the guard every stored text passes


class VerbatimText(ValueError):
    """A text about to be stored repeats a run of more than MAX_RUN words of a message."""


# An opaque token (12+ letters and digits, no separator: a key, a hash, a pasted secret) cannot be
# restated, only copied; it is dropped from stored text. Ticket ids (BILL-412) have separators.
_OPAQUE = re.compile(r"\b(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{12,}\b")


def guard_text(text: str | None, sources: Sequence[str]) -> str | None:
    """`text` without opaque tokens when it shares no run of more than MAX_RUN (nine) words with
    any source (the one rule and tokenizer above); VerbatimText otherwise."""
    if not text:
        return text
    text = " ".join(_OPAQUE.sub("", text).split())
    if not is_safe(text, sources):
        raise VerbatimText("stored text would repeat ten or more words of a message")
    return text


def guard_tags(tags: Sequence[str] | None, sources: Sequence[str]) -> list[str]:
    """Tags that repeat no message: each on its own, and all of them read together (a model could
    spread a sentence over several tags); from the end, whatever would complete a copied run goes."""
    kept: list[str] = []
    for tag in tags or []:
        try:
            clean = guard_text(tag, sources)
            if clean:
                guard_text(" ".join([*kept, clean]), sources)
                kept.append(clean)
        except VerbatimText:
            continue
    return kept
