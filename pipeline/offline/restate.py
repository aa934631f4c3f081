"""Synthesised restatements: third-person rewrites of a clause, cut until no ten-word run is copied.

Never returns message text as is: pronouns are moved to the third person, chat filler and
links are dropped, and `guard` deletes words (fillers first) until the no-verbatim rule holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pipeline.offline.verbatim import MAX_RUN, longest_common_run, words

_URL = re.compile(r"https?://\S+|www\.\S+")
_MENTION = re.compile(r"@([\w.\-]+)")
_EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\ufe0f\u200d]")
_LEAD = re.compile(
    r"^\s*((ok|okay|right|so|yes|yep|yeah|fine|alright|cool|great|well|hmm|ah|oh|and|but|also|genau|"
    r"agreed|decided|decision|approved|confirmed|for the record|calling it( for [\w ]+)?|final call|change of plan|"
    r"ok team|team|new rule( as of today)?|let'?s make it official|changing the plan|slept on it|done deal)"
    r"\b\s*[,:;.!\-\u2013—]*\s*)+",
    re.IGNORECASE,
)
_FILLER = {
    "the",
    "a",
    "an",
    "just",
    "really",
    "basically",
    "actually",
    "of",
    "to",
    "for",
    "with",
    "on",
    "in",
    "at",
    "is",
    "are",
    "be",
    "that",
    "this",
    "it",
    "and",
    "so",
    "we",
    "our",
    "then",
    "now",
    "all",
    "by",
}
_PRONOUNS = [
    (r"\bwe'?re\b", "the team is"),
    (r"\bwe'?ll\b", "the team will"),
    (r"\bwe'?ve\b", "the team has"),
    (r"\bwe\b", "the team"),
    (r"\bour\b", "the team's"),
    (r"\bus\b", "the team"),
    (r"\blet'?s\b", "the team will"),
]


def clean(text: str) -> str:
    """The message without links, emoji, leading chat filler and stray whitespace."""
    text = (text or "").replace("\u2019", "'")
    text = _URL.sub("", text)
    text = _EMOJI.sub("", text)
    text = _MENTION.sub(lambda m: m.group(1), text)
    text = _LEAD.sub("", text)
    return " ".join(text.split()).strip(" ,;:-.")


def third_person(text: str, actor: str, addressee: str | None = None) -> str:
    """First person → `actor`, second person → `addressee`, "we"/"let's" → the team."""
    out = re.sub(r"\bi (don'?t|do not)\b", f"{actor} does not", text, flags=re.IGNORECASE)
    out = re.sub(r"\bi (haven'?t|have not)\b", f"{actor} has not", out, flags=re.IGNORECASE)
    out = re.sub(r"\bi am\b", f"{actor} is", out, flags=re.IGNORECASE)
    out = re.sub(r"\bi have\b", f"{actor} has", out, flags=re.IGNORECASE)
    out = re.sub(r"\bi'?ll\b", f"{actor} will", out, flags=re.IGNORECASE)
    out = re.sub(r"\bi'?m\b", f"{actor} is", out, flags=re.IGNORECASE)
    out = re.sub(r"\bi'?ve\b", f"{actor} has", out, flags=re.IGNORECASE)
    out = re.sub(r"\bi'?d\b", f"{actor} would", out, flags=re.IGNORECASE)
    out = re.sub(r"\bI\b", actor, out)
    out = re.sub(r"\b(me)\b", actor, out, flags=re.IGNORECASE)
    out = re.sub(r"\bmy\b", "their", out, flags=re.IGNORECASE)
    if addressee:
        out = re.sub(r"\byour\b", f"{addressee}'s", out, flags=re.IGNORECASE)
        out = re.sub(r"\byou\b", addressee, out, flags=re.IGNORECASE)
    for pattern, replacement in _PRONOUNS:
        out = re.sub(pattern, replacement, out, flags=re.IGNORECASE)
    return out


def shorten(text: str, max_words: int) -> str:
    tokens = text.split()
    if len(tokens) <= max_words:
        return text
    return " ".join(tokens[:max_words]).rstrip(",;:-") + " …"


def guard(text: str, sources: Iterable[str]) -> str:
    """`text` with words removed until it shares no run of more than MAX_RUN words with a source."""
    sources = [s for s in sources if s]
    for _ in range(200):
        if longest_common_run(text, sources) <= MAX_RUN:
            return text
        text = _drop_one(text, sources)
    return ""  # unreachable in practice; an empty text is refused by the schemas, never stored


def _drop_one(text: str, sources: list[str]) -> str:
    """Remove one word inside the longest copied run, a filler word when there is one."""
    spans = [(m.start(), m.end(), m.group(0).casefold()) for m in re.finditer(r"[^\W_]+(?:'[^\W_]+)*", text)]
    mine = [w for _, _, w in spans]
    best_len, best_end = 0, 0
    for source in sources:
        theirs = words(source)
        previous = [0] * (len(theirs) + 1)
        for i, word in enumerate(mine):
            current = [0] * (len(theirs) + 1)
            for j, other in enumerate(theirs, start=1):
                if word == other:
                    current[j] = previous[j - 1] + 1
                    if current[j] > best_len:
                        best_len, best_end = current[j], i
            previous = current
    if best_len == 0:
        return text
    run = range(best_end - best_len + 1, best_end + 1)
    fillers = [i for i in run if mine[i] in _FILLER]
    victim = fillers[len(fillers) // 2] if fillers else run[len(run) // 2]
    start, end, _ = spans[victim]
    return " ".join((text[:start] + text[end:]).split())


def first_name(full: str) -> str:
    return full.split(" ")[0] if full and not full.startswith("@") else full.lstrip("@")


def sentence(text: str) -> str:
    text = text.strip(" ,;:-")
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "…", "?")) else text + "."
