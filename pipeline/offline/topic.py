"""Thread topic of an extracted record: salient terms of its evidence and of the messages that led to it.

A commit message ("confirmed: max 3 over 72h") rarely names what it is about; the thread does.
The terms become the record's tags (searched and embedded with it), so questions that use the
thread's words find the record. Single words and short names only, never a copied run.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from pipeline.context import ChannelContext
from pipeline.offline.entities import find_entities
from pipeline.window import WindowMessage

MAX_TAGS = 8
_CONTEXT = 3  # preceding messages by others that may carry the topic
_LOOKBACK = 6
_TERSE = 2  # evidence with fewer content words than this takes its topic from the thread
_URL = re.compile(r"https?://\S+|www\.\S+")
_MENTION = re.compile(r"@[\w.\-]+")
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_'\u2019][A-Za-z0-9]+)*")
_OPAQUE = re.compile(r"[a-z]+\d+[a-z\d]*|\d+[a-z]+[a-z\d]*", re.IGNORECASE)  # ids, hashes, 72h, v2
_STOP = set(
    """a about above after again against all almost also although always am among an and another any anyone
    anything anyway are around as ask asked at away back be because been before being below between both but by
    can cannot could did do does doing done down during each either else enough even ever every everyone
    everything few for from further get gets getting go goes going gone got had has have having he her here hers
    him his how however i if in instead into is it its itself just keep kind know last least less let lets like
    likely made make makes making many may maybe me might mine more most much must my myself need needs never new
    next no nobody none nor not nothing now of off often ok okay on once one only onto or other others otherwise
    our ours out over own per perhaps please pls probably put quite rather really right said same say says see
    seems shall she should since so some someone something soon still such sure take than thank thanks that the
    their theirs them then there these they thing things think this those though through thus till to today
    tomorrow too toward under until up upon us use used very via want wants was way we well went were what
    whatever when where whether which while who whom whose why will with within without would yes yet you your
    yours yourself yeah yep nope hey hi hello cool great nice good fine awesome sounds sound agree agreed
    decided decision confirm confirmed approve approved lgtm go ahead plan idea point option call works work
    worked done finished shipped merged fixed week weeks day days hour hours minute minutes time times morning
    afternoon evening tonight monday tuesday wednesday thursday friday saturday sunday eod eow asap fyi btw imo
    tbh re let's i'll i'm we'll we're it's that's don't can't won't didn't isn't there's what's ll ve
    first second third everybody team folks guys people someone anybody else bit lot lots stuff
    yesterday tomorrow later earlier currently actually basically already again quick quickly maybe
    feel feels felt calling find found mention mentioned send sent run running check checked looks look
    min max mins tbd etc ping pinged update updated suggest suggested suggestion propose proposed proposal""".split()
)


def _words(text: str, people: set[str]) -> list[str]:
    text = _MENTION.sub(" ", _URL.sub(" ", text))
    out = []
    for token in _TOKEN.findall(text):
        low = token.lower().strip("-_")
        if "'" in low or "\u2019" in low:  # contractions (doesn't, we'll) are grammar, not topic
            continue
        if len(low) < 3 or low in _STOP or low in people or _OPAQUE.fullmatch(low):
            continue
        out.append(low)
    return out


def _people(ctx: ChannelContext) -> set[str]:
    names: set[str] = set()
    for member in ctx.members:
        for value in (member.name, member.handle):
            names.update(part.lower() for part in re.split(r"[\s._-]+", value or "") if part)
    return names


def context_messages(window: Sequence[WindowMessage], evidence_ids: Sequence[str]) -> list[WindowMessage]:
    """The evidence, the messages it quotes, and up to three earlier messages by others on the same thing."""
    by_id = {m.id: m for m in window}
    core = [by_id[i] for i in evidence_ids if i in by_id]
    if not core:
        return []
    chosen = list(core)
    for message in core:
        if message.quoted_id and message.quoted_id in by_id and by_id[message.quoted_id] not in chosen:
            chosen.append(by_id[message.quoted_id])
    authors = {m.author_id for m in core}
    first = min(window.index(m) for m in core)
    seen = {w for m in chosen for w in _words(m.text, set())}
    taken = 0
    for back in range(first - 1, max(-1, first - 1 - _LOOKBACK), -1):
        if taken >= _CONTEXT:
            break
        prev = window[back]
        if prev in chosen or (prev.author_id in authors and back != first - 1):
            continue
        words = set(_words(prev.text, set()))
        # The message just before is the thread's lead-in; further back ones must share a content word.
        if back == first - 1 or words & seen:
            chosen.append(prev)
            seen |= words
            taken += 1
    return chosen


def terms(messages: Sequence[WindowMessage], ctx: ChannelContext, evidence_ids: Sequence[str]) -> list[str]:
    """Up to MAX_TAGS lowercase topic terms: names (services, tools, acronyms) first, then content words."""
    people = _people(ctx)
    names: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    # A terse or pronoun-only record ("let's do it", "Diego to pin it") names nothing itself: what it
    # agrees to is the topic, so the messages it answers count as much as the evidence.
    own = {w for m in messages if m.id in evidence_ids for w in _words(m.text, people)}
    context_weight = 2 if len(own) < _TERSE else 1
    for message in messages:
        weight = 2 if message.id in evidence_ids else context_weight
        for spotted in find_entities(message.text, ctx):
            name = spotted.name.lower()
            if spotted.type != "person" and name not in people and not _OPAQUE.fullmatch(name) and len(name) <= 40:
                names[name] += weight
        for word in _words(message.text, people):
            counts[word] += weight
    out: list[str] = []
    for name, _ in names.most_common():
        if name not in out:
            out.append(name)
    covered = {part for name in out for part in re.split(r"[\s_-]+", name)}
    for word, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        # A word said once in a lead-in message is chatter; in the evidence or repeated, it is the topic.
        if count >= 2 and word not in out and word not in covered:
            out.append(word)
    return out[:MAX_TAGS]
