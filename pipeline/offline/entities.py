"""Entity spotting for the offline engine: members, known entities, service-like names, proper nouns."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.context import ChannelContext
from pipeline.schemas import EntityKind

_SERVICE_SUFFIX = {
    "api",
    "db",
    "worker",
    "service",
    "svc",
    "queue",
    "replica",
    "adapter",
    "consumer",
    "producer",
    "cluster",
    "bucket",
    "sync",
    "ci",
    "sdk",
    "app",
    "web",
    "proxy",
    "gateway",
    "cron",
    "bot",
    "server",
    "render",
    "reports",
    "pipeline",
    "platform",
    "portal",
    "assets",
    "private",
    "sandbox",
    "retries",
    "lb",
    "cdn",
    "dashboard",
    "project",
}
_IDENT = re.compile(r"(?<![\w/.@-])([a-z][a-z0-9]*(?:[-_][a-z0-9]+)+)(?![\w/-])", re.IGNORECASE)
_PROPER = re.compile(r"(?<![\w@/.-])([A-Z][a-zA-Z0-9]+(?:[ -](?:[A-Z][a-zA-Z0-9]+|\d+(?:\.\d+)?))*)")
_ACRONYM = re.compile(r"(?<![\w@/.-])([A-Z]{2,6}s?)(?![\w-])")
_URL = re.compile(r"https?://\S+|www\.\S+")
_NOT_ENTITIES = {
    "i",
    "ok",
    "okay",
    "pr",
    "prs",
    "eod",
    "eow",
    "asap",
    "fyi",
    "lgtm",
    "tbh",
    "imo",
    "imho",
    "am",
    "pm",
    "eta",
    "utc",
    "btw",
    "afaik",
    "re",
    "ps",
    "nb",
    "tl;dr",
    "wip",
    "ooo",
    "q1",
    "q2",
    "q3",
    "q4",
    "yes",
    "no",
    "yep",
    "hi",
    "hey",
    "thanks",
    "the",
    "we",
    "our",
    "it",
    "this",
    "that",
    "right",
    "so",
    "and",
    "but",
    "also",
    "if",
    "when",
    "what",
    "who",
    "why",
    "how",
    "great",
    "cool",
    "nice",
    "agreed",
    "decided",
    "final",
    "for",
    "let's",
    "lets",
    "morning",
    "sorry",
    "done",
    "sure",
    "fine",
    "good",
    "happy",
    "one",
    "new",
    "just",
    "any",
    "can",
    "could",
    "should",
    "will",
    "do",
    "does",
    "did",
    "is",
    "are",
    "was",
    "be",
    "on",
    "in",
    "at",
    "a",
    "an",
    "to",
    "my",
    "me",
    "you",
    "he",
    "she",
    "they",
    "heads",
    "quick",
    "update",
    "status",
    "big",
    "bad",
    "news",
    "found",
    "calling",
    "slept",
    "genau",
    "please",
    "pls",
    "not",
    "still",
    "well",
    "hmm",
    "ah",
    "oh",
    "lol",
    "ta",
    "cheers",
    "perfect",
    "noted",
    "both",
    "everyone",
    "team",
    "all",
}
_MONTHS_DAYS = re.compile(
    r"^(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec|january|february|march|april|june|july|august"
    r"|september|october|november|december|monday|tuesday|wednesday|thursday|friday|saturday|sunday|mon|tue|wed"
    r"|thu|fri|sat|sun)$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Spotted:
    name: str
    type: EntityKind
    aliases: tuple[str, ...] = ()
    user_id: str | None = None


def _ok_name(name: str) -> bool:
    return bool(name) and name.casefold() not in _NOT_ENTITIES and not _MONTHS_DAYS.match(name) and len(name) <= 80


def find_entities(text: str, ctx: ChannelContext) -> list[Spotted]:
    """Entities named in `text`, people first; never raises."""
    text = _URL.sub(" ", (text or "")[:10000])
    found: dict[str, Spotted] = {}
    member_words: set[str] = set()
    for member in ctx.members:
        if member.user_id in ctx.bot_ids:
            continue
        names = [n for n in (member.name, member.handle) if n]
        first = member.name.split(" ")[0] if member.name else None
        hit = False
        if member.handle and re.search(rf"@{re.escape(member.handle)}\b", text, re.IGNORECASE):
            hit = True
        for candidate in [member.name, first]:
            if candidate and re.search(rf"\b{re.escape(candidate)}\b", text):
                hit = True
        for n in names + ([first] if first else []):
            member_words.update(n.casefold().split())
        if hit:
            label = member.name or member.handle or member.user_id
            aliases = tuple(a for a in {member.handle, first} if a and a != label)
            found[label.casefold()] = Spotted(label, "person", aliases, member.user_id)
    for known in ctx.known_entities:
        if known and re.search(rf"(?<!\w){re.escape(known)}(?!\w)", text, re.IGNORECASE):
            found.setdefault(known.casefold(), Spotted(known, "concept"))
    for match in _IDENT.finditer(text):
        name = match.group(1)
        parts = re.split(r"[-_]", name.lower())
        if "_" in name:
            found.setdefault(name.casefold(), Spotted(name, "concept"))
        elif parts[-1] in _SERVICE_SUFFIX or parts[0] in _SERVICE_SUFFIX:
            found.setdefault(name.casefold(), Spotted(name, "service"))
    for match in _ACRONYM.finditer(text):
        name = match.group(1)
        if _ok_name(name) and name.casefold() not in member_words:
            found.setdefault(name.casefold(), Spotted(name, "concept"))
    for sentence in re.split(r"(?<=[.!?:;\n])\s+|^\s*", text):
        for match in _PROPER.finditer(sentence):
            name = match.group(1)
            if match.start() == 0 and " " not in name:
                continue  # a capital at sentence start is grammar, not a name
            words = name.split()
            while words and (words[0].casefold() in _NOT_ENTITIES or _MONTHS_DAYS.match(words[0])):
                words = words[1:]
            name = " ".join(words)
            if not _ok_name(name) or name.casefold() in member_words or name.isupper():
                continue
            kind: EntityKind = "team" if name.lower().endswith(" team") else "concept"
            found.setdefault(name.casefold(), Spotted(name, kind))
    return list(found.values())
