"""Offline Tier 1: cue phrases first, then the nearest hand-written prototype (MiniLM) when no cue fires.

The prototypes are generic sentences written for this engine, one small set per category; they
decide only the messages the cue rules leave open, so a missing embedder degrades to cues alone.
"""

from __future__ import annotations

import logging
import re
import threading

from pipeline import embedder
from pipeline.context import ChannelContext
from pipeline.offline import cues
from pipeline.offline.entities import find_entities
from pipeline.offline.restate import first_name
from pipeline.schemas import HIGH_SIGNAL, ClassifyResult

logger = logging.getLogger(__name__)

PROTOTYPES: dict[str, list[str]] = {
    "decision": [
        "We have decided to go ahead with the second option.",
        "Agreed, that is the plan from now on.",
        "Final call: the release ships next week without the extra feature.",
        "OK, we are going with the cheaper vendor.",
        "Approved, let's do it.",
    ],
    "action": [
        "I'll take care of the migration script.",
        "Can you update the documentation before the release?",
        "I will send the contract to legal tomorrow.",
        "Could you review my pull request by Thursday?",
        "Leave it with me, I'll sort it out.",
    ],
    "question": [
        "Does anyone know how the billing export works?",
        "What time is the meeting tomorrow?",
        "Is the staging environment down for everyone?",
        "Who is responsible for the on-call rota?",
    ],
    "blocker": [
        "I'm blocked until someone gives me access to the database.",
        "We can't deploy until the security review is finished.",
        "Still waiting on the vendor before we can continue.",
    ],
    "update": [
        "The fix is deployed to production now.",
        "Finished the report, it's in the shared folder.",
        "Quick status: the migration is halfway through.",
        "The new build passed all checks.",
    ],
    "discussion": [
        "I think the queue approach might scale better than the cron job.",
        "Maybe we could try a smaller pilot first?",
        "The numbers look worse than last quarter because of churn.",
        "Not sure that vendor is worth the price.",
        "What if we split the work into two phases?",
    ],
    "reference": [
        "Here is the link to the design doc.",
        "The ticket for this is in the tracker.",
        "Spreadsheet with the figures is attached.",
    ],
    "routine": [
        "Good morning everyone",
        "Thanks, much appreciated",
        "haha nice one",
        "Have a good weekend all",
        "noted",
    ],
}
_PROTO_MIN_SIMILARITY = 0.35
_lock = threading.Lock()
_proto_vectors: list[tuple[str, list[float]]] | None = None

_GIST_VERB = {
    "decision": "confirmed a decision about",
    "action": "took on or assigned a task about",
    "blocker": "reported being blocked on",
    "question": "asked about",
    "update": "gave an update on",
    "reference": "shared a reference on",
    "discussion": "discussed",
    "routine": "exchanged pleasantries",
}
_ORDER = ["decision", "action", "blocker", "question", "update", "reference", "discussion", "routine"]


def _prototype_vectors() -> list[tuple[str, list[float]]]:
    global _proto_vectors
    if _proto_vectors is None:
        with _lock:
            if _proto_vectors is None:
                labels = [(cat, s) for cat, sentences in PROTOTYPES.items() for s in sentences]
                vectors = embedder.embed([s for _, s in labels])
                _proto_vectors = [(cat, vec) for (cat, _), vec in zip(labels, vectors, strict=True)]
    return _proto_vectors


def nearest_prototype(text: str) -> tuple[str, float] | None:
    """The category of the most similar prototype and its cosine, or None without an embedder."""
    if not embedder.enabled():
        return None
    try:
        protos = _prototype_vectors()
        vector = embedder.embed([text[:2000]])[0]
    except Exception as exc:
        logger.warning("offline classify: prototype embedding failed (%s)", type(exc).__name__)
        return None
    best = max(protos, key=lambda p: sum(a * b for a, b in zip(p[1], vector, strict=False)))
    return best[0], sum(a * b for a, b in zip(best[1], vector, strict=False))


def is_bot_message(ctx: ChannelContext, mentions: list[str]) -> bool:
    return any(m in ctx.bot_ids for m in mentions)


def is_question(text: str) -> bool:
    lowered = cues.norm(text)
    return any(s.rstrip().endswith("?") or cues.QUESTION_START.match(s) for s in cues.sentences(lowered))


def decision_sentence(sentence: str) -> bool:
    """A sentence where the group commits: a decision cue, no hedge, not a question about it."""
    lowered = sentence.lower()
    if not (cues.DECISION.search(lowered) or cues.LETS.search(lowered)):
        return False
    if cues.HEDGE.search(lowered):
        return False
    return not lowered.rstrip().endswith("?")


def settles_question(answer: str, question: str) -> bool:
    """`answer` (a reply by someone else) settles `question` about the team's own course: an unhedged
    statement opening with yes/no, or naming what the question asked about with a rule-shaped word
    ("only", "X's fine", "held flat", "no new … without", "follows in Q4")."""
    a, q = cues.norm(answer).strip(), cues.norm(question)
    if not is_question(question) or not cues.COURSE_QUESTION.search(q) or cues.ASKER_COURSE.search(q):
        return False
    if is_question(answer) or cues.HEDGE.search(a) or cues.OPEN_ANSWER.search(a) or cues.PROPOSAL.search(a):
        return False
    if len(a.split()) > 30:
        return False
    if cues.SETTLING_OPENER.search(a):
        return True
    asked = {w for w in re.findall(r"[a-z][a-z0-9-]{2,}", q)} - _ECHO_STOP
    echoed = {w for w in re.findall(r"[a-z][a-z0-9-]{2,}", a)} & asked
    return bool(echoed) and bool(cues.SETTLING_RULE.search(a))


_ECHO_STOP = set(
    "the and are for our you your that this with not can just only all any but from then than have has was were "
    "will would should shall also does did its it's is do we or in of on ok okay fine yes no".split()
)


def cue_categories(text: str, mentions_others: bool) -> set[str]:
    lowered = cues.norm(text)
    parts = cues.sentences(lowered) or [lowered]
    found: set[str] = set()
    # The lead ("ok:", "yes —") can be split off as its own sentence; judge the opening pair together too.
    if any(decision_sentence(s) for s in [*parts, " ".join(parts[:2])]):
        found.add("decision")
    if cues.SELF_COMMIT.search(lowered) or (cues.REQUEST.search(lowered) and (mentions_others or "you" in lowered)):
        found.add("action")
    # Asking whether something is stuck ("anyone stuck on the old version?") is a question, not a blocker;
    # "blocked on X, can you…?" states the blocker before the question.
    stated = [(s.rsplit(",", 1)[0] if "," in s else "") if s.rstrip().endswith("?") else s for s in parts]
    if any(cues.BLOCKER.search(s) for s in stated):
        found.add("blocker")
    if is_question(text) and "action" not in found:
        found.add("question")
    if cues.UPDATE.search(lowered) and "decision" not in found:
        found.add("update")
    if cues.REFERENCE.search(lowered):
        found.add("reference")
    if cues.PROPOSAL.search(lowered) and "decision" not in found:
        found.add("discussion")
    if not found and cues.ROUTINE.search(lowered.strip()):
        found.add("routine")
    return found


def _content_words(text: str) -> bool:
    return bool(re.search(r"[^\W\d_]{2,}", text))


def gist(text: str, categories: list[str], author_name: str, entities: list[str]) -> str:
    lead = next((c for c in _ORDER if c in categories), "discussion")
    who = first_name(author_name) or "Someone"
    if lead == "routine":
        return f"{who} exchanged pleasantries."
    topic = ", ".join(entities[:3]) if entities else "the channel's work"
    return f"{who} {_GIST_VERB[lead]} {topic}."[:300]


def classify(text: str, ctx: ChannelContext, author_id: str, mentions: list[str]) -> ClassifyResult:
    """Tier 1 on the offline engine. Never raises on odd input."""
    text = (text or "")[:10000]
    others = [m for m in mentions if m not in ctx.bot_ids and m != author_id]
    if is_bot_message(ctx, mentions):
        lowered = cues.norm(text)
        category = "routine" if cues.CONTROL_COMMAND.search(lowered) else "question"
        return ClassifyResult(
            categories=[category],
            confidence=0.9,
            is_high_signal=False,
            gist=f"{first_name(ctx.display_name(author_id))} addressed Jeeves directly.",
        )
    if not _content_words(text):
        return ClassifyResult(
            categories=["routine"],
            confidence=0.8,
            is_high_signal=False,
            gist=f"{first_name(ctx.display_name(author_id))} reacted briefly.",
        )
    found = cue_categories(text, bool(others))
    confidence = 0.75 if found else 0.5
    if not found:
        nearest = nearest_prototype(text)
        if nearest and nearest[1] >= _PROTO_MIN_SIMILARITY:
            # A prototype alone never makes a message high-signal: patterns must back a commitment.
            found = {nearest[0] if nearest[0] not in HIGH_SIGNAL else "discussion"}
            confidence = round(min(0.7, max(0.4, nearest[1])), 2)
        else:
            found = {"discussion"}
    categories = [c for c in _ORDER if c in found]
    entities = [e.name for e in find_entities(text, ctx)][:12]
    return ClassifyResult(
        categories=categories,
        confidence=confidence,
        entities=[e[:120] for e in entities],
        is_high_signal=bool(HIGH_SIGNAL & set(categories)),
        gist=gist(text, categories, ctx.display_name(author_id), entities),
    )
