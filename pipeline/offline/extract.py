"""Offline Tier 2: decisions, actions, entities, relationships and signals of a window, from patterns.

Each record is anchored on the message that commits (a decision cue, an approval of a proposal,
an "I'll…", a request addressed to someone); replies that agree, acknowledge or report
completion join its evidence. A record is emitted only when its anchor is pending, so a burst
never re-emits what an earlier burst stored. All text is a guarded third-person restatement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipeline.context import ChannelContext
from pipeline.members import Member
from pipeline.offline import cues, deadlines, restate, topic
from pipeline.offline.classify import cue_categories, decision_sentence, settles_question
from pipeline.offline.entities import Spotted, find_entities
from pipeline.schemas import (
    ExtractedAction,
    ExtractedDecision,
    ExtractedEntity,
    ExtractedRelationship,
    ExtractedSignal,
    ExtractResult,
)
from pipeline.window import WindowMessage

_LOOKAHEAD = 4  # replies this close can agree with a decision or acknowledge a request
_SHORT = 14  # words: longer replies carry their own content rather than agreeing
_REQUEST_LEAD = re.compile(
    r"^.*?\b(?:can|could|would) you(?: please)?\s+|^.*?\bplease\s+|^.*?\bpls\s+|^.*?\bcan i ask you to\s+"
    r"|^.*?\bare you (?:ok|okay|able|happy) to\s+|^.*?\byou right to\s+|^.*?\bneed you to\s+",
    re.IGNORECASE,
)
_COMMIT_LEAD = re.compile(
    r"^.*?\b(?:i'?ll|i will|i can|i'?m going to|i'?m)\s+(?:also\s+|just\s+|then\s+|go ahead and\s+)?", re.IGNORECASE
)
_PROPOSAL_LEAD = re.compile(
    r"^.*?\b(?:what if we|maybe we could|maybe we|i'?d suggest(?: we)?|i suggest(?: we)?|i propose(?: we)?|how about"
    r"|why don'?t we|could we|should we|shall we|we could|we should|i'?d rather|i'?d prefer|what about)\s+",
    re.IGNORECASE,
)
_RATIONALE = re.compile(r"\b(?:because|since|bc|as|so that|given|per|due to)\b\s+(.{8,160})", re.IGNORECASE)


@dataclass
class _Msg:
    m: WindowMessage
    text: str  # lowered, normalised
    words: int
    pending: bool
    categories: set[str]
    addressees: list[Member] = field(default_factory=list)


@dataclass
class _Action:
    anchor: _Msg
    owner: Member | None
    task: str
    evidence: list[str]
    deadline_text: list[tuple[str, WindowMessage]]
    done: bool = False
    offer: str | None = None  # the offer an acceptance answers: the task's words come from it


def _addressees(msg: WindowMessage, ctx: ChannelContext) -> list[Member]:
    """Members a message speaks to: @mentions in order, else a first name opening a clause."""
    people: list[Member] = []
    for uid in msg.mentions:
        member = next((m for m in ctx.members if m.user_id == uid), None)
        if member and uid not in ctx.bot_ids and uid != msg.author_id and member not in people:
            people.append(member)
    if people:
        return people
    for match in re.finditer(
        r"(?:^|[.!?:;,]\s*|\bso\s+|\bok\s+)([A-Z][a-z]+)(?=\s*,|\s+(?:can|could|please|pls|to|you|owns|on|will)\b)",
        msg.text,
    ):
        member = ctx.member_by_name(match.group(1))
        if member and member.user_id != msg.author_id and member.user_id not in ctx.bot_ids and member not in people:
            people.append(member)
    return people


def _member(ctx: ChannelContext, user_id: str) -> Member:
    return next((m for m in ctx.members if m.user_id == user_id), Member(user_id=user_id))


def _name(ctx: ChannelContext, user_id: str | None) -> str:
    return restate.first_name(ctx.display_name(user_id)) if user_id else "Someone"


def _strip_tail(task: str) -> str:
    task = re.split(r"\?|(?<=[a-z0-9)])\.(\s|$)|\n", task)[0]
    return task.strip(" ,;:-")


def _task_text(msg: _Msg, ctx: ChannelContext, owner: Member | None, segment: str | None = None) -> str:
    raw = segment if segment is not None else msg.m.text
    for sentence in cues.sentences(raw) or [raw]:
        lowered = cues.norm(sentence)
        if cues.REQUEST.search(lowered) and (match := _REQUEST_LEAD.search(sentence)):
            return _strip_tail(sentence[match.end() :])
        if cues.SELF_COMMIT.search(lowered) and (match := _COMMIT_LEAD.search(sentence)):
            return _strip_tail(sentence[match.end() :])
    return _strip_tail(restate.clean(raw))


def _describe(owner_name: str, task: str, sources: list[str], actor: str) -> str:
    task = restate.third_person(restate.clean(task), actor, owner_name)
    task = re.sub(r"^(will|to)\s+", "", task, flags=re.IGNORECASE)
    text = restate.sentence(f"{owner_name} to {restate.shorten(task, 24)}" if task else f"{owner_name} to follow up")
    return restate.guard(text, sources)[:400]


def _decision_core(msg: WindowMessage, author: str) -> str:
    parts = cues.sentences(msg.text) or [msg.text]
    chosen = [p for p in parts if decision_sentence(cues.norm(p))]
    start = parts.index(chosen[0]) if chosen else 0
    if start > 0 and len(parts[start].split()) <= 4:
        start -= 1  # "12 sounds right. let's do it": the terse commit agrees to the sentence before it
    core = " ".join(parts[start : start + 2])
    core = re.sub(r"\b(everyone|all) ok\??|\bshout (now )?if you disagree\.?|\bany objections\??", "", core, flags=re.I)
    core = re.sub(r"\blet'?s (go|roll) with\b", "go with", core, flags=re.IGNORECASE)
    return restate.third_person(restate.clean(core), author)


def _rationale(texts: list[str], author: str, sources: list[str]) -> str | None:
    for text in texts:
        if match := _RATIONALE.search(text):
            reason = restate.third_person(restate.clean(match.group(1)), author)
            if len(reason.split()) >= 2:
                return restate.guard(restate.sentence(f"Reason given: {restate.shorten(reason, 20)}"), sources)[:600]
    return None


def _settled_question(msgs: list[_Msg], i: int) -> _Msg | None:
    """The question about the team's course that message `i` answers and settles, asked by someone else
    within the two messages before it."""
    msg = msgs[i]
    if msg.words > 30 or "question" in msg.categories:
        return None
    for back in range(i - 1, max(-1, i - 3), -1):
        prev = msgs[back]
        if prev.m.author_id != msg.m.author_id and "question" in prev.categories:
            return prev if settles_question(msg.m.text, prev.m.text) else None
    return None


def _decisions(msgs: list[_Msg], ctx: ChannelContext) -> tuple[list[ExtractedDecision], set[str]]:
    out: list[ExtractedDecision] = []
    used: set[str] = set()
    for i, msg in enumerate(msgs):
        anchor: _Msg | None = None
        evidence: list[_Msg] = []
        if "decision" in msg.categories:
            anchor, evidence = msg, [msg]
        elif cues.APPROVAL.search(msg.text) and msg.words <= _SHORT and msg.m.id not in used:
            for back in range(i - 1, max(-1, i - 1 - _LOOKAHEAD), -1):
                prev = msgs[back]
                if prev.m.author_id != msg.m.author_id and cues.PROPOSAL.search(prev.text):
                    if "decision" not in prev.categories:
                        anchor, evidence = msg, [prev, msg]
                    break
        if anchor is None and msg.m.id not in used and "action" not in msg.categories:
            question = _settled_question(msgs, i)
            if question is not None:
                anchor, evidence = msg, [msg]
        if anchor is None or not anchor.pending:
            continue
        for j in range(i + 1, min(len(msgs), i + 1 + _LOOKAHEAD)):
            reply = msgs[j]
            if reply.m.author_id == msg.m.author_id or reply.words > _SHORT or "decision" in reply.categories:
                continue
            if cues.AGREEMENT.search(reply.text) or cues.APPROVAL.search(reply.text):
                evidence.append(reply)
                used.add(reply.m.id)
        ids = list(dict.fromkeys(e.m.id for e in evidence))
        used.update(ids)
        deciders = list(dict.fromkeys(e.m.author_id for e in evidence))
        sources = [e.m.text for e in evidence]
        first = evidence[0]
        author = _name(ctx, first.m.author_id)
        question = _settled_question(msgs, i) if "decision" not in first.categories and first is anchor else None
        if question is not None:
            # The answer alone ("yes, all of it") says little: the question it settles carries the topic.
            asker = _name(ctx, question.m.author_id)
            parts = cues.sentences(question.m.text) or [question.m.text]
            asked = next((p for p in parts if p.rstrip().endswith("?")), parts[0])
            asked = restate.third_person(restate.clean(asked), asker).replace("?", "")
            answer = restate.third_person(restate.clean(first.m.text), author)
            summary = restate.sentence(
                f"{author} settled {asker}'s question ({restate.shorten(asked, 14)}): {restate.shorten(answer, 22)}"
            )
            sources = [*sources, question.m.text]
        elif first is anchor:
            summary = restate.sentence(
                f"{author} confirmed the decision: {restate.shorten(_decision_core(first.m, author), 28)}"
            )
        else:
            core = first.m.text
            if match := _PROPOSAL_LEAD.search(core):
                core = core[match.end() :]
            core = restate.third_person(restate.clean(core), author)
            summary = restate.sentence(f"The team agreed to {restate.shorten(core, 28)}".replace("?", ""))
        summary = restate.guard(summary, sources)[:400]
        if not summary:
            continue
        # The thread's topic goes into the rationale (searched and embedded with the summary).
        thread = topic.context_messages([m.m for m in msgs], ids)
        tags = topic.terms(thread, ctx, ids)
        rationale = _rationale([e.m.text for e in evidence], author, sources) or ""
        rationale = topic.clause(rationale, tags, [m.text for m in thread])[:600] or None
        out.append(
            ExtractedDecision(
                summary=summary,
                rationale=rationale,
                tags=tags,
                decided_by=deciders,
                source_msg_ids=ids,
                confidence=0.75 if first is anchor else 0.65,
            )
        )
    return out, used


def _segments(text: str, people: list[Member]) -> list[tuple[Member, str]]:
    """Split "@a do X, @b do Y" into one task per mentioned member."""
    marks: list[tuple[int, Member]] = []
    for person in people:
        handle = person.handle or ""
        match = re.search(rf"@{re.escape(handle)}\b", text, re.IGNORECASE) if handle else None
        if match:
            marks.append((match.end(), person))
    marks.sort(key=lambda m: m[0])
    segments = []
    for k, (start, person) in enumerate(marks):
        end = marks[k + 1][0] - len(marks[k + 1][1].handle or "") - 1 if k + 1 < len(marks) else len(text)
        segments.append((person, text[start:end].strip(" ,;:-")))
    return segments


def _open_request(actions: list[_Action], owner: Member, msgs: list[_Msg], i: int) -> _Action | None:
    """The latest single-message action of `owner` within reach of message `i`: what an "I'll…" or
    an acknowledgement by that owner answers."""
    return next(
        (
            a
            for a in reversed(actions)
            if a.owner == owner and len(a.evidence) == 1 and msgs.index(a.anchor) >= i - _LOOKAHEAD
        ),
        None,
    )


def _acknowledge(actions: list[_Action], owner: Member, msgs: list[_Msg], i: int, used: set[str]) -> bool:
    """Message `i` answers `owner`'s open request (see _open_request): it joins that action's evidence."""
    earlier = _open_request(actions, owner, msgs, i)
    if earlier is None:
        return False
    earlier.evidence.append(msgs[i].m.id)
    earlier.deadline_text.append((msgs[i].m.text, msgs[i].m))
    used.add(msgs[i].m.id)
    return True


def _accepted_offer(msgs: list[_Msg], i: int) -> _Msg | None:
    """The offer ("I can…", "do you want me to…", "happy to…") by someone else in the two messages
    before message `i` that `i` accepts ("yes please", "go for it")."""
    msg = msgs[i]
    if not cues.ACCEPT.search(msg.text) or msg.words > _SHORT:
        return None
    for back in range(i - 1, max(-1, i - 3), -1):
        prev = msgs[back]
        if prev.m.author_id != msg.m.author_id and cues.OFFER.search(prev.text):
            return prev
    return None


def _actions(msgs: list[_Msg], ctx: ChannelContext) -> tuple[list[_Action], set[str]]:
    actions: list[_Action] = []
    used: set[str] = set()
    for i, msg in enumerate(msgs):
        if msg.m.id in used:
            continue
        request = bool(cues.REQUEST.search(msg.text)) and bool(msg.addressees)
        commit = bool(cues.SELF_COMMIT.search(msg.text))
        if request:
            people = msg.addressees
            segments = _segments(msg.m.text, people) if len(people) > 1 else []
            if len(segments) > 1:
                for person, segment in segments:
                    actions.append(_Action(msg, person, _task_text(msg, ctx, person, segment), [msg.m.id], []))
            else:
                actions.append(_Action(msg, people[0], _task_text(msg, ctx, people[0]), [msg.m.id], []))
            actions[-1].deadline_text.append((msg.m.text, msg.m))
            for action in actions:
                if action.anchor is msg and not action.deadline_text:
                    action.deadline_text.append((msg.m.text, msg.m))
        elif commit:
            # An "I'll…" answering a request to its author is that request's acknowledgement.
            owner = _member(ctx, msg.m.author_id)
            if _acknowledge(actions, owner, msgs, i, used):
                continue
            actions.append(_Action(msg, owner, _task_text(msg, ctx, owner), [msg.m.id], [(msg.m.text, msg.m)]))
        elif (offer := _accepted_offer(msgs, i)) is not None:
            # "I can make a template" … "yes please, by Friday": the offerer owns the task from the acceptance.
            owner = _member(ctx, offer.m.author_id)
            lead = cues.OFFER.search(offer.m.text.replace("\u2019", "'"))
            task = _strip_tail(re.split(r",|\bthen\b", offer.m.text[lead.end() :] if lead else "")[0])
            action = _Action(msg, owner, task, [msg.m.id], [(msg.m.text, msg.m)], offer=offer.m.text)
            actions.append(action)
        elif "decision" in msg.categories and msg.addressees:
            continue
        elif cues.ACK.search(msg.text) and msg.words <= _SHORT:
            _acknowledge(actions, _member(ctx, msg.m.author_id), msgs, i, used)
    # Completion: a later report by the owner that names something from the task.
    for action in actions:
        if action.owner is None:
            continue
        task_words = {w for w in re.findall(r"[a-z0-9][\w-]{3,}", action.task.lower())}
        start = msgs.index(action.anchor)
        for later in msgs[start + 1 :]:
            if later.m.id in action.evidence or later.m.author_id != action.owner.user_id:
                continue
            if cues.COMPLETION.search(later.text) and (task_words & set(re.findall(r"[\w-]+", later.text))):
                action.evidence.append(later.m.id)
                action.done = True
                break
    return actions, used


_SIGNAL_LEAD = re.compile(
    r"^\s*((bad news|good news|heads[ -]up|fyi|update|status|quick update|small update|found it|status update|snag"
    r"|problem|issue|so|ok|okay|right|hm+|ugh|argh|ouch|nope|well|also|btw|honestly|update from \w+)\b"
    r"\s*[,:;.!\-\u2013—]*\s*)+",
    re.IGNORECASE,
)
_SIGNAL_WORDS = 18  # a restated gist of the status message
# Thread-topic terms per signal kind: a blocker is often terse ("blocked on it") and the thread says what
# it holds up; an update or a concern restates its own content, and thread terms on every one of them
# make questions about things never reported match (measured: fewer answered questions with them).
_SIGNAL_TOPIC_TERMS = {"blocker": 3, "update": 0, "concern": 0}
_SIGNAL_PHRASE = {
    "blocker": "{who} reported a blocker: {core}",
    "update": "{who} posted an update: {core}",
    "concern": "{who} raised a concern: {core}",
}


def _signal_core(msg: WindowMessage, who: str) -> str:
    """The first sentences of a status message, restated in the third person and cut short."""
    text = restate.clean(msg.text)
    text = _SIGNAL_LEAD.sub("", text)
    parts = cues.sentences(text) or [text]
    core = " ".join(parts[:2])
    return restate.shorten(restate.third_person(core, who), _SIGNAL_WORDS).strip(" ,;:-")


def _signals(msgs: list[_Msg], ctx: ChannelContext, taken: set[str]) -> list[ExtractedSignal]:
    out: list[ExtractedSignal] = []
    window_msgs = [msg.m for msg in msgs]
    for msg in msgs:
        if not msg.pending:
            continue
        kind: str | None = None
        if "blocker" in msg.categories:
            kind = "blocker"
        elif msg.m.id in taken:
            continue
        elif cues.CONCERN.search(msg.text):
            kind = "concern"
        elif "question" in msg.categories:
            kind = "question"
        elif "update" in msg.categories:
            kind = "update"
        if kind is None:
            continue
        who = _name(ctx, msg.m.author_id)
        summary = ""
        if kind in _SIGNAL_PHRASE:
            # What was blocked or reported, restated, plus the thread's topic terms (as actions carry them).
            core = _signal_core(msg.m, who)
            if len(core.split()) >= 2:
                thread = topic.context_messages(window_msgs, [msg.m.id])
                tags = topic.terms(thread, ctx, [msg.m.id])
                text = restate.sentence(_SIGNAL_PHRASE[kind].format(who=who, core=core))
                text = restate.guard(text, [m.text for m in thread])
                terms = _SIGNAL_TOPIC_TERMS[kind]
                summary = topic.clause(text, tags, [m.text for m in thread], terms)[:400] if text else ""
        if not summary:
            spotted = [e.name for e in find_entities(msg.m.text, ctx) if e.type != "person"][:3]
            about = ", ".join(spotted) if spotted else "the channel's work"
            phrase = {
                "blocker": f"{who} reported a blocker concerning {about}",
                "concern": f"{who} raised a concern about {about}",
                "question": f"{who} asked a question about {about}",
                "update": f"{who} posted a progress update on {about}",
            }[kind]
            summary = restate.guard(restate.sentence(phrase), [msg.m.text])[:400]
        if summary:
            out.append(
                ExtractedSignal(
                    signal_type=kind,  # type: ignore[arg-type]
                    summary=summary,
                    participants=[msg.m.author_id],
                    source_msg_ids=[msg.m.id],
                    confidence=0.6,
                )
            )
    return out


def _relationships(msgs: list[_Msg], ctx: ChannelContext, actions: list[_Action]) -> list[ExtractedRelationship]:
    out: dict[tuple[str, str, str], ExtractedRelationship] = {}

    def add(source: str, target: str, kind: str, msg_id: str) -> None:
        if source.casefold() == target.casefold():
            return
        key = (source.casefold(), target.casefold(), kind)
        if key not in out:
            out[key] = ExtractedRelationship(
                source=source[:120], target=target[:120], relationship=kind, source_msg_ids=[msg_id], confidence=0.6
            )  # type: ignore[arg-type]

    for action in actions:
        if action.owner is None or not action.anchor.pending or not action.owner.name:
            continue
        for spotted in find_entities(action.anchor.m.text, ctx)[:6]:
            if spotted.type != "person":
                add(action.owner.name, spotted.name, "works_on", action.anchor.m.id)
    for msg in msgs:
        if not msg.pending:
            continue
        spotted = find_entities(msg.m.text, ctx)
        if len(spotted) < 2:
            continue
        for sentence in cues.sentences(msg.m.text):
            for verb, kind in (
                (r"depends on|relies on|needs|uses|calls|reads from|talks to|runs on", "depends_on"),
                (r"blocks|is blocking|blocked by|waiting on", "blocks"),
                (r"owns|is responsible for|maintains", "owns"),
            ):
                match = re.search(rf"\b({verb})\b", sentence, re.IGNORECASE)
                if not match:
                    continue
                left = [s for s in spotted if s.name in sentence[: match.start()]]
                right = [s for s in spotted if s.name in sentence[match.end() :]]
                if left and right:
                    source, target = left[-1], right[0]
                    if "blocked by" in match.group(1).lower() or "waiting on" in match.group(1).lower():
                        source, target = target, source
                    add(source.name, target.name, kind, msg.m.id)
    return list(out.values())


def _entities(msgs: list[_Msg], ctx: ChannelContext) -> list[ExtractedEntity]:
    seen: dict[str, Spotted] = {}
    for msg in msgs:
        if msg.pending:
            for spotted in find_entities(msg.m.text, ctx):
                seen.setdefault(spotted.name.casefold(), spotted)
    return [
        ExtractedEntity(name=s.name[:120], type=s.type, aliases=[a[:120] for a in s.aliases]) for s in seen.values()
    ]


def extract(window: list[WindowMessage], ctx: ChannelContext, pending_ids: set[str] | None = None) -> ExtractResult:
    """Tier 2 on the offline engine over `window` (oldest first). Never raises on odd text."""
    msgs: list[_Msg] = []
    for message in window:
        if message.author_id in ctx.bot_ids or any(m in ctx.bot_ids for m in message.mentions):
            continue  # talk to Jeeves is a command or a query, never evidence
        text = cues.norm(message.text[:10000])
        others = [m for m in message.mentions if m != message.author_id]
        msgs.append(
            _Msg(
                m=message,
                text=text,
                words=len(text.split()),
                pending=pending_ids is None or message.id in pending_ids,
                categories=cue_categories(message.text[:10000], bool(others)),
            )
        )
    for msg in msgs:
        msg.addressees = _addressees(msg.m, ctx)
    decisions, decision_ids = _decisions(msgs, ctx)
    found, ack_ids = _actions(msgs, ctx)
    actions: list[ExtractedAction] = []
    by_id = {msg.m.id: msg for msg in msgs}
    window_msgs = [msg.m for msg in msgs]
    for action in found:
        if not action.anchor.pending:
            continue
        sources = [by_id[i].m.text for i in action.evidence] + ([action.offer] if action.offer else [])
        owner_name = _name(ctx, action.owner.user_id) if action.owner else "Someone"
        actor = _name(ctx, action.anchor.m.author_id)
        description = _describe(owner_name, action.task, sources, actor)
        if not description:
            continue
        # Actions have no rationale column: a short topic clause rides on the searched description.
        evidence_ids = list(dict.fromkeys(action.evidence))
        thread = topic.context_messages(window_msgs, evidence_ids)
        tags = topic.terms(thread, ctx, evidence_ids)
        with_topic = topic.clause(description, tags, [m.text for m in thread])
        if len(with_topic) <= 400:
            description = with_topic
        deadline = None
        for text, message in action.deadline_text:
            deadline = deadlines.resolve(text, deadlines.local_date(message.ts, ctx.timezone))
            if deadline:
                break
        actions.append(
            ExtractedAction(
                description=description,
                owner_id=action.owner.user_id if action.owner else None,
                deadline=deadline,
                source_msg_ids=evidence_ids,
                confidence=0.75 if action.owner else 0.6,
                status="done" if action.done else "open",
                tags=tags,
            )
        )
    taken = decision_ids | ack_ids | {i for a in actions for i in a.source_msg_ids}
    return ExtractResult(
        decisions=decisions,
        actions=actions,
        entities=_entities(msgs, ctx),
        relationships=_relationships(msgs, ctx, found),
        signals=_signals(msgs, ctx, taken),
    )
