"""Offline Tier 2: decisions, actions, entities, relationships and signals of a window, from learned heads.

Which messages are evidence of a decision or of an action is judged by logistic heads fitted on
`evalsets/train` (`pipeline.offline.model`), from the message with the one before and after it.
The records are then built by general rules with parameters tuned on train:
- a message close after a decision (an agreement, an amendment, the decision said again) joins it when the
  learned evidence join (`model.Join`: cosines, distance, authors, the message's decision heads) says so;
- an action's owner is its author for a self-commitment, the addressed member for a request (a head
  learns when a message naming someone is still the author's own task), one action per member when
  several are given their own part; a short reply by the owner (an acknowledgement, "done") joins it;
  a request that names no one is owned by the member whose short reply at once takes it up;
- a signal is kept only when it carries information: a blocker (even in a message a record rests on: "stuck
  on X, @ben can you chase Y?" is Ben's action and the author's blocker), or an update stating a figure or a
  date.
A record is emitted only when its first evidence is pending, so a burst never re-emits what an earlier
one stored; an earlier action comes again only when a pending message moves its date (a continuation:
the store updates the action it stored with the new date). Every text is a third-person
restatement, cut to at most 60 % of its message's words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import numpy as np

from pipeline.context import ChannelContext
from pipeline.members import Member
from pipeline.offline import deadlines, features, model, restate, topic
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

# Messages after the last pending one that the engine reads (when they are there), in the stack as in the
# simulator: the Tier 2 heads are fitted with each message's next one as a feature, and a request answered in
# the next run ("can you reserve the room?" / "sure, Thursday") was otherwise read without its reply, then never again
# as a record of its own (its first message no longer pending). Records still rest on a pending message first.
LOOKAHEAD = 1

_FIGURE = re.compile(r"\d")
_RATIONALE = re.compile(r"\b(?:because|since|so that|given that|due to)\b\s+(.{8,200})", re.IGNORECASE)


@dataclass
class _Record:
    kind: str
    evidence: list[int]
    owner: Member | None = None
    segment: str | None = None  # the part of a multi-person request that is this owner's
    done: bool = False
    done_at: int | None = None  # the message reporting it done
    proposal: int | None = None  # a terse agreement's proposal (its words carry the decision)

    @property
    def anchor(self) -> int:
        return self.evidence[0]


@dataclass
class _Window:
    msgs: list[WindowMessage]
    ctx: ChannelContext
    scored: model.Scored
    pending: list[bool]
    addressees: list[list[Member]] = field(default_factory=list)
    _known: dict[int, deadlines.Known] = field(default_factory=dict)

    def known(self, i: int) -> deadlines.Known:
        """What the window's messages before message `i` said that its date phrases may refer to (sprints'
        dates, dates named with their month: `deadlines.known`)."""
        if i not in self._known:
            self._known[i] = deadlines.known((m.text, self.day(k)) for k, m in enumerate(self.msgs[:i]))
        return self._known[i]

    def words(self, i: int) -> int:
        return len(restate.clean(self.msgs[i].text).split())

    def cosine(self, i: int, j: int) -> float:
        return float(np.dot(self.scored.vectors[i], self.scored.vectors[j]))

    def name(self, user_id: str | None) -> str:
        """What a record calls the member: the word of their name their handle spells ("Huy" for Bùi Đức Huy,
        @huy), else their first name (`restate.called`)."""
        if not user_id:
            return "Someone"
        member = _member(self.ctx, user_id)
        return restate.called(member.name, member.handle) if member.name else self.ctx.display_name(user_id)

    def day(self, i: int) -> date:
        """The local date of message `i` in the channel's timezone."""
        return deadlines.local_date(self.msgs[i].ts, self.ctx.timezone)


# A word opening a clause before a comma, a colon, a request ("Ana, …", "Tuấn: …", "Huy pls …") or a verb's plain
# form ("Ana send the deck"): a name said to its bearer, when it is a member's.
_CALLED = re.compile(
    r"(?:^|[.!?:;,]\s*)([^\W\d_][^\W\d_'-]*)"
    r"(?:(?=\s*[,:]|\s+(?:can|could|please|pls|would)\b)|\s+([a-z]+)\b(?!['\u2019]))"
)


def _bids(word: str) -> bool:
    """Is `word`, after a name, a verb bidding its bearer do something ("Ana send …"), not telling what they did or
    will do ("Ana found …", "Ana will …")?"""
    return word not in restate.MODALS and restate.is_plain_verb(word) and not restate.is_past(word)


def addressees(msg: WindowMessage, ctx: ChannelContext) -> list[Member]:
    """Members a message speaks to: @mentions in order, else names of theirs opening a clause (`_CALLED`,
    `ChannelContext.member_called`)."""
    people: list[Member] = []
    for uid in msg.mentions:
        member = next((m for m in ctx.members if m.user_id == uid), None)
        if member and uid not in ctx.bot_ids and uid != msg.author_id and member not in people:
            people.append(member)
    if people:
        return people
    for match in _CALLED.finditer(msg.text):
        verb = match.group(2)
        if not match.group(1)[0].isupper() or (verb and not _bids(verb)):
            continue
        member = ctx.member_called(match.group(1))
        if member and member.user_id != msg.author_id and member.user_id not in ctx.bot_ids and member not in people:
            people.append(member)
    return people


def _member(ctx: ChannelContext, user_id: str) -> Member:
    return next((m for m in ctx.members if m.user_id == user_id), Member(user_id=user_id))


# --------------------------------------------------------------------------------------- decisions


def _opening(w: _Window, i: int) -> float:
    """How strongly message `i` states a decision: Tier 1's `decision` head (the message and the one before; for a
    message of several sentences, its likeliest sentence's if higher) and the `decision_anchor` head (the same
    label, with the message after it too), each as a share of its threshold, mixed by `decision_anchor_mix`."""
    params = w.scored.engine.params
    mix = params.get("decision_anchor_mix", 0.0)
    decision = max(w.scored.p("decision", i), w.scored.by_sentence(i))
    score = (1 - mix) * decision / w.scored.engine.threshold("decision")
    return score + mix * w.scored.p("decision_anchor", i) / w.scored.engine.threshold("decision_anchor")


def _states_decision(w: _Window, i: int) -> bool:
    """Does message `i` state a decision? Its `_opening` score against the scale `decision_anchor_scale`."""
    return _opening(w, i) >= w.scored.engine.params.get("decision_anchor_scale", 1.0)


def _join_row(w: _Window, record: _Record, i: int) -> list[float]:
    """What the learned join reads of decision `record` and a later message `i` (`model.JOIN_FEATURES`)."""
    msg, anchor = w.msgs[i], w.msgs[record.anchor]
    authors = {w.msgs[k].author_id for k in record.evidence}
    ids = {w.msgs[k].id for k in record.evidence}
    return [
        w.cosine(i, record.anchor),
        max(w.cosine(i, k) for k in record.evidence),
        np.log1p(i - record.anchor),
        np.log1p(i - record.evidence[-1]),
        np.log1p(max(0.0, (msg.ts - anchor.ts).total_seconds() / 60)),
        float(msg.author_id == anchor.author_id),
        float(msg.author_id in authors),
        w.scored.p("decision_ev", i),
        w.scored.p("decision_anchor", i),
        w.scored.p("decision", i),
        w.scored.p("question", i),
        min(3.0, _opening(w, i)),
        np.log1p(w.words(i)),
        float("?" in msg.text),
        float(bool(msg.quoted_id) and msg.quoted_id in ids),
    ]


def _joins(w: _Window, record: _Record, i: int) -> bool:
    """Does message `i` (close after `record`) join it? The learned join when the engine has one."""
    join = w.scored.engine.join
    assert join is not None
    return join.prob(_join_row(w, record, i)) >= join.threshold


def _decisions(w: _Window) -> list[_Record]:
    """Records open at messages the `decision_anchor` head says state a decision (Tier 1's decision label,
    judged with the reply after the message as well); nearby decision evidence joins the latest: by the learned
    join (`model.Join`) when the engine has one, else when it says the same thing (MiniLM cosine) or is over the
    decision-evidence head's threshold. A message stating a decision within `decision_merge_gap` messages of the
    latest record's last one joins it whatever the join says (`learn.MERGE_GAPS`)."""
    params = w.scored.engine.params
    learned = w.scored.engine.join is not None
    merge_gap = params.get("decision_merge_gap", 0)
    records: list[_Record] = []
    for i in range(len(w.msgs)):
        last = records[-1] if records else None
        near = last is not None and i - last.evidence[-1] <= params["join_gap"]
        joins = near and learned and _joins(w, last, i)
        if _states_decision(w, i):
            if joins or (near and not learned and w.cosine(i, last.anchor) >= params["join_cosine"]):
                last.evidence.append(i)  # the same decision said again (an amendment, a confirmation)
                continue
            if last is not None and i - last.evidence[-1] <= merge_gap:
                last.evidence.append(i)  # said at once after it: the same exchange (`learn.MERGE_GAPS`)
                continue
            content = restate.content_words(w.msgs[i].text)
            if len(content) < 4 and i > 0 and w.msgs[i - 1].author_id != w.msgs[i].author_id:
                if last is not None and i - 1 == last.anchor and last.proposal is None:
                    last.evidence.append(i)  # agreeing to a decision already on record: its evidence
                    continue
                record = _Record("decision", [i], proposal=i - 1)  # "agreed": what was agreed is the message before
            else:
                record = _Record("decision", [i])
            records.append(record)
        elif joins or (near and not learned and w.scored.over("decision_ev", i)):
            last.evidence.append(i)
    return records


def _decision_texts(w: _Window, record: _Record) -> tuple[list[str], list[str], list[int]]:
    """What a decision record says, restated, the texts it rests on, and the messages its text borrows words from
    beyond its own (the question it answers, `_asked`): one decision, or one per part of its core message when
    several of its parts each state one (`_stated_parts`: "Agreed: (1) prices up 6% from February. (2) no new hires
    until the forecast.")."""
    ids = ([record.proposal] if record.proposal is not None else []) + record.evidence
    sources = [w.msgs[i].text for i in ids]
    # The message that states it best by the `decision_ev` head, of those that say enough to restate (four content
    # words): "None from me, approved." agrees to a decision, the message it agrees to states it.
    core_at = max(
        ids,
        key=lambda i: (
            len(restate.content_words(w.msgs[i].text)) >= 4,
            w.scored.p("decision_ev", i) if i != record.proposal else 0.0,
            w.words(i),
        ),
    )
    if record.proposal is not None:
        core_at = record.proposal
    author = w.name(w.msgs[core_at].author_id)
    if len(parts := _stated_parts(w, core_at)) >= 2:
        return [restate.decision(part, author, sources) for part in parts], sources, []
    best, also, after = _core(w, core_at)
    borrowed = []
    if asked := _asked(w, core_at, best):  # "We're not pulling it." after "Do we pull the build from the store?"
        # The record rests on the question too: forgetting it takes the words it lent with it.
        best, sources, borrowed = asked[1], [*sources, w.msgs[asked[0]].text], [asked[0]]
    # The decision itself, as knowledge: who decided and when are fields of the record, said by the answer.
    return [restate.decision(best, author, sources, also=also, after=after)], sources, borrowed


def _asked(w: _Window, i: int, said: str) -> tuple[int, str] | None:
    """`said`, a decision's sentence in message `i`, with its pronoun in place of what the question it answers asked
    about (`restate.asked_object`): the nearest of the `ANSWERED_BACK` messages before it by someone else that
    asks with the same verb; the question's index and the sentence, else None."""
    for k in range(i - 1, max(-1, i - 1 - ANSWERED_BACK), -1):
        if w.msgs[k].author_id != w.msgs[i].author_id and (said_of := restate.asked_object(said, w.msgs[k].text)):
            return k, said_of
    return None


# An item of a list said in one line: "(2) ...", "b) ...", "; 3) ...".
_INLINE_ITEM = re.compile(r"(?:^|(?<=[\s;,:]))\(?(?:[1-9]|[a-h])\)\s+")
_LINE_ITEM = re.compile(r"^\s*(?:\(?(?:[1-9]|[a-h])[.)]|[-\u2022*\u2013])\s+")


def _items(text: str) -> list[str]:
    """A message's list items, without their numbers or bullets, each a sentence or more: lines that open on
    "1.", "2)", "(b)", "-" or a bullet, or "(1) ... (2) ..." in a line. Empty when it holds no list of two."""
    items: list[str] = []
    for line in text.splitlines():
        if _LINE_ITEM.match(line):
            items.append(_LINE_ITEM.sub("", line))
        elif len(inline := _INLINE_ITEM.split(line)) > 2:  # a lead-in and two items at least
            items += inline[1:]
    items = [item.strip(" ;,") for item in items if item.strip(" ;,")]
    return items if len(items) >= 2 else []


def _stated_parts(w: _Window, i: int) -> list[str]:
    """The list items of message `i` (`_items`, four words or more, none asking a member to act) that each state a
    decision: the `decision_ev` head scores each, had the message said it alone, at least `decision_split` of
    its threshold (the engine's `decision_split`; 0: none)."""
    split = w.scored.engine.params.get("decision_split", 0.0)
    if not split:
        return []
    parts = [p for p in _items(w.msgs[i].text) if len(restate.clean(p).split()) >= 4 and not _asks_member(w, p)]
    if len(parts) < 2:
        return []
    bar = split * w.scored.engine.threshold("decision_ev")
    return [p for p in parts if _sentence_score(w, i, p, "decision_ev") >= bar]


# A decision said over several sentences ("Talked to the landlord today. We take the second floor from May. Rent
# as before.") is restated from the sentence the `decision_ev` head scores highest when the message says only it,
# and the next best beside it when that scores at least `CORE_SECOND` of it, rather than from its first sentence of
# four words (often a lead-in). Train, mean MiniLM cosine of a matched decision's text to its gold restatement:
# 0.549 first sentence, 0.572 the best alone, 0.598 with the second at half the best's score (0.601 at 0.3, whose
# answers were no better).
CORE_SECOND = 0.5


def _core(w: _Window, i: int) -> tuple[str, str | None, bool]:
    """What of message `i` a decision restates: its sentence (of four words or more) that states the decision
    best by the `decision_ev` head (`_sentence_score`), the second best when it scores at least `CORE_SECOND`
    of the best (else None), and whether that one comes after the best in the message. A message of one such
    sentence is restated whole."""
    text = w.msgs[i].text
    parts = [part for part in restate.sentences(text) if len(restate.clean(part).split()) >= 4]
    if len(parts) < 2:
        return text, None, True
    # A heading ("Notes from the call with the landlord:") announces what the sentences after it say.
    if (stated := [part for part in parts if not restate.heading(part)]) and len(stated) < len(parts):
        parts = stated
        if len(parts) < 2:
            return parts[0], None, True
    # A sentence that points back at what was said ("Then that's the plan.") says nothing read on its own: the
    # message's other statements say what it points at (not a promise beside it: "I'll add it to the guide").
    if back := [part for part in parts if restate.refers_back(part)]:
        rest = [part for part in parts if part not in back]
        if rest and not all(_COMMITS.search(part) for part in rest):
            parts = rest
            if len(parts) < 2:
                return parts[0], None, True
    # A sentence that asks a member to do something ("Ana, book the hall.") is an action beside the decision.
    stating = [part for part in parts if not _asks_member(w, part)]
    if stating and len(stating) < len(parts):
        parts = stating
        if len(parts) < 2:
            return parts[0], None, True
    scores = [_sentence_score(w, i, part, "decision_ev") for part in parts]
    best, second = sorted(range(len(parts)), key=lambda k: (-scores[k], k))[:2]
    if scores[second] < CORE_SECOND * scores[best]:
        return parts[best], None, True
    return parts[best], parts[second], second > best


_VOCATIVE = re.compile(r"^\W*@?([\w.\-]+)\s*[,:\u2013\u2014-]\s*\w")


def _asks_member(w: _Window, part: str) -> bool:
    """Does the sentence `part` ask a member of something: open on their @handle or name said to them
    ("@ana …", "Ben, …") or ask with "can you"/"please"?"""
    said = part.strip()
    if said.startswith("@") or restate.asks(said):
        return True
    called = _VOCATIVE.match(said)
    if not called:
        return False
    name = called.group(1).casefold()
    return any(
        name in {(m.handle or "").casefold(), restate.first_name(m.name or "").casefold()} for m in w.ctx.members
    )


def _sentence_score(w: _Window, i: int, part: str, head: str) -> float:
    """The Tier 2 `head`'s probability for message `i` had it said only `part` (the messages around it as
    they are)."""
    lo, hi = max(0, i - 1), min(len(w.msgs), i + 2)
    msgs = [
        WindowMessage(id=m.id, author_id=m.author_id, ts=m.ts, text=part if k == i else m.text, mentions=m.mentions)
        for k, m in enumerate(w.msgs[lo:hi], start=lo)
    ]
    return w.scored.engine.score(view(msgs, w.ctx)).p(head, i - lo)


def _rationale(w: _Window, ids: list[int], sources: list[str]) -> str | None:
    for i in ids:
        if match := _RATIONALE.search(w.msgs[i].text):
            reason = restate.normal_form(match.group(1), w.name(w.msgs[i].author_id))
            if len(reason.split()) >= 2:
                return restate.fit(restate.sentence(reason), sources)[:600] or None
    return None


# ----------------------------------------------------------------------------------------- actions


# What asks the addressee to do something: "can you", "please", "over to you", "yours".
_ASKS = re.compile(
    r"\b(?:can|could|would|will) (?:you|u)\b|\b(?:please|pls|plz)\b|\bover to you\b|\byours\b|\byou(?:'ll| will| to)\b",
    re.IGNORECASE,
)


def _commits_apart(w: _Window, i: int) -> bool:
    """Does message `i` commit its author ("I'll send the invite") in a sentence that names none of the members it
    addresses, while no sentence naming them asks them anything ("Kasia, thanks", "Omar, could I borrow a
    tester?")? Then its task is the author's own, whoever else it speaks to."""
    people = w.addressees[i]
    said = restate.sentences(w.msgs[i].text)

    def names(part: str) -> bool:
        return any(
            (p.handle and re.search(rf"@?{re.escape(p.handle)}\b", part, re.IGNORECASE))
            or (p.name and re.search(rf"\b{re.escape(restate.first_name(p.name))}\b", part, re.IGNORECASE))
            for p in people
        )

    own = [part for part in said if _COMMITS.search(part) and not names(part)]
    return bool(own) and not any(names(part) and _ASKS.search(part) for part in said)


def _segments(text: str, people: list[Member]) -> list[tuple[Member, str]]:
    """Split "@a do X, @b do Y" into one task per mentioned member (by @handle position), or "Ana, do X. Ben, do Y."
    into one per member called by name at a sentence's start."""
    marks: list[tuple[int, int, Member]] = []
    for person in people:
        handle = person.handle or ""
        match = re.search(rf"@{re.escape(handle)}\b", text, re.IGNORECASE) if handle else None
        if match is None and (called := restate.first_name(person.name or "")):
            match = re.search(rf"(?:^|(?<=[.!?;]\s)){re.escape(called)}\s*[,:]\s*", text)
        if match:
            marks.append((match.start(), match.end(), person))
    marks.sort(key=lambda m: m[0])
    return [
        (person, text[end : (marks[k + 1][0] if k + 1 < len(marks) else len(text))].strip(" ,;:-"))
        for k, (_, end, person) in enumerate(marks)
    ]


# A member's name said as the subject of a task in a list item: "Leila updates …", "Ben will book …", "Cara to send …".
_SUBJECT = re.compile(r"(?:^|[\s,;:(])@?([A-Z][\w\u00C0-\u024F'-]+)\s+(?:(will|to|is to)\s+)?([a-z]+)\b")


def _listed_tasks(w: _Window, i: int) -> list[tuple[Member, str]]:
    """The tasks a list message (`_items`) gives members by name, one per item at most: an item where a member
    other than the author is the subject of a verb ("Leila updates it by Friday", "Amani will book the tent"),
    as (member, what they do in the base form: "update it by Friday")."""
    out: list[tuple[Member, str]] = []
    for item in _items(w.msgs[i].text):
        for match in _SUBJECT.finditer(item):
            member = w.ctx.member_by_name(match.group(1)) or w.ctx.member_by_handle(match.group(1))
            if member is None or member.user_id in (w.msgs[i].author_id, *w.ctx.bot_ids):
                continue
            rest = item[match.start(3) :]
            said = rest if match.group(2) else restate.from_third_person(rest)
            if (match.group(2) or said != rest) and restate.starts_with_verb(said):
                out.append((member, said))
                break
    return out


def _actions(w: _Window) -> list[_Record]:
    """Actions open at messages the anchor head claims; other action evidence joins the latest action
    its author owns (an acknowledgement, "done") or, close by, the latest action."""
    params = w.scored.engine.params
    records: list[_Record] = []
    for i, msg in enumerate(w.msgs):
        anchor, evidence = w.scored.over("action_anchor", i), w.scored.over("action_ev", i)
        if not (anchor or evidence):
            continue
        mine = [
            r
            for r in records
            if r.owner and r.owner.user_id == msg.author_id and i - r.evidence[-1] <= 2 * params["join_gap"]
        ]
        short = w.words(i) <= params["ack_words"]
        # A request to someone else ("@kim please check the cabs") is not its author's note on their own task.
        asks_another = anchor and bool(w.addressees[i]) and not w.scored.over("owner_is_author", i)
        # A short reply is the owner's word on a task someone gave them ("ok, Friday"); after a task the author
        # took on themselves, a message the anchor head claims is another task unless it restates the first.
        acknowledges = short and mine and w.msgs[mine[-1].anchor].author_id != msg.author_id
        if (
            mine
            and not asks_another
            and (not anchor or acknowledges or w.cosine(i, mine[-1].anchor) >= params["join_cosine"])
        ):
            target = mine[-1]
            target.evidence.append(i)
            if w.scored.over("update", i) and not _takes_on(w, target, i) and not _moves_date(w, target, i):
                target.done, target.done_at = True, i
            continue
        if not anchor:
            if records and i - records[-1].evidence[-1] <= params["join_gap"]:
                records[-1].evidence.append(i)
            continue
        if listed := _listed_tasks(w, i):  # "(1) … Leila updates the list by Friday. (2) … Ben books the van."
            records += [_Record("action", [i], owner=p, segment=seg) for p, seg in listed]
            continue
        people = w.addressees[i]
        if people and not w.scored.over("owner_is_author", i) and not _commits_apart(w, i) and not _vows(w, msg.text):
            parts = _segments(msg.text, people) if len(people) > 1 else []
            if len(parts) > 1 and all(len(seg.split()) >= 2 for _, seg in parts):
                records += [_Record("action", [i], owner=p, segment=seg) for p, seg in parts]
            else:
                records.append(_Record("action", [i], owner=people[0]))
        else:
            records.append(_Record("action", [i], owner=_member(w.ctx, msg.author_id)))
    records = _taken_up(w, records)
    # Completion: a later report by the owner that is about the same thing. A later message by the owner or the
    # requester that moves the task's date before it (`_moves_date`: "the export slips to the 9th") joins it and
    # reports nothing done, though it is an update about the same thing; one after the report says that it was not
    # done ("not yet, sorry. Monday"; "the survey needs another day" then "ok, the survey moves to Friday"): the record
    # is open again from it.
    for record in records:
        if record.owner is None:
            continue
        if not record.done:
            said = next((i for i in record.evidence[1:] if _says_done(w, record, i)), None)
            if said is not None:
                record.done, record.done_at = True, said
        while True:
            if not record.done:
                _complete(w, record)
            if record.done_at is None:
                break
            slip = next((j for j in range(record.done_at + 1, len(w.msgs)) if _moves_date(w, record, j)), None)
            if slip is None:
                break
            record.done, record.done_at = False, None
            record.evidence = sorted({*record.evidence, slip})
    return records


# Agreeing to a task ("okay", "sure, leave it with me", "yep, on it", "can do 👍"), at a reply's start or end.
_AGREES = re.compile(
    r"^\W*(?:ok(?:ay)?|yes|yep|yeah|yup|sure|fine|agreed|noted|will do|on it|can do)\b"
    r"|\b(?:ok(?:ay)?|sure|will do|on it|can do)\W*$|\U0001f44d",
    re.IGNORECASE,
)


def _takes_on(w: _Window, record: _Record, i: int) -> bool:
    """Is message `i`, the owner's answer right after the task's first message, taking the task on rather than
    reporting it done: it agrees ("sure, can do") or names a date (as a deadline, or in a short reply: "next wed
    latest"), and says nothing done in so many words (`_REPORTS_DONE`: "Sent. They meet next week." reports it)?
    A later message is no such answer."""
    if i - record.anchor != 1 or _REPORTS_DONE.search(w.msgs[i].text):
        return False
    if _AGREES.search(w.msgs[i].text):
        return True
    # a date said as a deadline ("wednesday at the latest"), or any in a short reply ("mon 13, early"); a longer
    # answer's date in passing is what was done ("booked for the 12th and the 26th, ref …")
    today = w.day(i)
    marked_only = w.words(i) > w.scored.engine.params["ack_words"]
    return deadlines.resolve(w.msgs[i].text, today, marked_only=marked_only, known=w.known(i)) is not None


def _says_done(w: _Window, record: _Record, i: int) -> bool:
    """Does message `i` of the record's evidence report its task done in so many words (`_REPORTS_DONE`: "done ✅",
    "sent to them"), said by its owner and asking nothing?"""
    msg = w.msgs[i]
    return msg.author_id == record.owner.user_id and "?" not in msg.text and bool(_REPORTS_DONE.search(msg.text))


def _complete(w: _Window, record: _Record) -> None:
    """Join the messages after the record's evidence that move its date, up to its owner's report that it is done
    (an update about the same task, `_about`)."""
    assert record.owner is not None
    for j in range(record.evidence[-1] + 1, len(w.msgs)):
        if _moves_date(w, record, j):
            record.evidence.append(j)
            continue
        if w.msgs[j].author_id != record.owner.user_id or j in record.evidence:
            continue
        if w.scored.over("update", j) and _about(w, record, j):
            record.evidence.append(j)
            record.done, record.done_at = True, j
            return


# Content words a later update shares with what was said of a task that make it about the same task however long
# it runs on ("the rota is redone: 14 wardens, <link>" after "I'll redo the fire warden rota").
SHARED_WORDS = 2


def _about(w: _Window, record: _Record, j: int) -> bool:
    """Is message `j` about the record's task: near it by MiniLM (cosine with its first message >= `done_cosine`)
    or sharing `SHARED_WORDS` content words with what was said of it before (its first message, and the record's
    earlier messages by `j`'s author: "on it, drafting the notice for tenants" then "tenant notice is out")?"""
    if w.cosine(j, record.anchor) >= w.scored.engine.params["done_cosine"]:
        return True
    said = [k for k in record.evidence if k < j and (k == record.anchor or w.msgs[k].author_id == w.msgs[j].author_id)]
    task = {x for k in said for x in restate.content_words(w.msgs[k].text)}
    return len(task & set(restate.content_words(w.msgs[j].text))) >= SHARED_WORDS


# A slip of a task's date in general English (narrower than `deadlines.moves`, which reads messages already
# in the task's evidence): the task slips, is pushed, postponed, delayed, rebooked, not done yet, has a new date.
_SLIPS = re.compile(
    r"\b(?:slip(?:s|ped|ping)?|push(?:es|ed|ing)? (?:back|out|to)|postpon\w*|delay\w*|reschedul\w*|rebook\w*"
    r"|not yet|won'?t make|can'?t make|new (?:date|deadline|cut-?off|eta|target)|sorry)\b",
    re.IGNORECASE,
)
_DONE_WORD = re.compile(r"[\u2705\u2714]|(?<!\bnot )(?<!n't )\b(?:done|finished|completed)\b", re.IGNORECASE)


def _reports_done(text: str) -> bool:
    """Does `text` say something is done ("the import is done", "finished ✅"), not that it is not ("isn't done")?"""
    return bool(_DONE_WORD.search(text))


def _moves_date(w: _Window, record: _Record, j: int) -> bool:
    """Does message `j`, after the record, move its task's date: said by its owner or its requester in the words of
    a slip (`_SLIPS`: "the export slips to the 9th", "not yet, sorry. Tuesday"), about the same task (MiniLM cosine
    with the task's first message; for a short reply, or that of the question it answers), with a date, and its
    sentence nearest the task (most content words in common with its first message) reports nothing done ("the
    import is done, but the export slips to the 9th" moves the export's date, not the import's)?"""
    msg = w.msgs[j]
    if msg.author_id not in {w.msgs[record.anchor].author_id, record.owner.user_id if record.owner else None}:
        return False
    if _REPORTS_DONE.search(msg.text) or not _SLIPS.search(msg.text):
        return False
    task = set(restate.content_words(w.msgs[record.anchor].text))
    parts = restate.sentences(msg.text) or [msg.text]
    nearest = max(parts, key=lambda part: len(task & set(restate.content_words(part))))
    if not task & set(restate.content_words(nearest)):
        nearest = msg.text
    today = w.day(j)
    if _reports_done(nearest) or deadlines.moved_to(msg.text, today, w.known(j)) is None:
        return False
    near = w.cosine(j, record.anchor)
    if w.words(j) <= w.scored.engine.params["ack_words"] and j > 0 and w.msgs[j - 1].author_id != msg.author_id:
        near = max(near, w.cosine(j - 1, record.anchor))
    return near >= w.scored.engine.params["done_cosine"]


# A promise of the author's own ("I'll send it", "I can take Monday", "let me check the logs first"). Not "me"
# otherwise: in a request it is who the task is for ("send me the stats", "the drawings to me by Friday", "let me
# know"), not who does it.
_SELF = re.compile(rf"\b(?:i'll|ill|i will|i'm|im|i am|i can|i'd|myself|{restate.LET_ME})\b", re.IGNORECASE)
# "I send it today", "I redo the sections": the plain present said of what one is about to do is a promise in much
# written English (a second language's above all); not a verb of thinking, wanting or having ("I think", "I need the
# list", "I have two").
_I_VERB = re.compile(r"\bi\s+([a-z]+)\b(?!['\u2019])", re.IGNORECASE)
_NOT_PROMISED = frozenset(
    """think guess wonder need want know mean feel hope like love hate see agree believe suppose understand remember
    forget prefer have do reckon expect doubt miss wish""".split()
)


# An offer ("want me to book it?", "want me there?", "shall I call them?", "can I send them the letter?"): who says
# yes to it is not taking it on. Not asking for something ("can I have the file?"). `restate._OFFER_LEAD` is the
# restatement's list of offer leads (what follows is the offerer's task); this one leaves out its "happy to", which in
# a reply agrees ("Happy to lift the hold."), and adds "can I"/"could I", which the restatement reads through
# `_ASK_FOR` and the request leads. Kept apart so that neither list changes the other's records
# (docs/measurements.md, "An offer said yes to stays the offerer's").
_OFFERS = re.compile(
    r"\b(?:(?:do|would) you (?:want|like) me|want me|shall i|should i|i could|can i|could i)\b\s*"
    r"(?!(?:please\s+)?(?:have|get|grab|ask|borrow)\b)",
    re.IGNORECASE,
)


def _promises(w: _Window, text: str) -> bool:
    """Does `text` promise something of its author's own ("I'll …", "I can …", or `_vows`)?"""
    return bool(_SELF.search(text)) or _vows(w, text)


def _vows(w: _Window, text: str) -> bool:
    """Does `text` say in the plain present what its author is about to do ("I send it today"), said and not asked,
    when no other clause of it asks a member to act ("@ana I send the plan today" is the author's; "I send the
    plan. Ben, can you check it?" and "@ana send me the names, I call the rest" are not theirs alone)?"""
    clauses = [(c, "?" in part) for part in restate.sentences(text) for c in re.split(r"\s*[,;]\s*", part) if c]
    promised = [
        c
        for c, asked in clauses
        if not asked
        and any(
            (word := m.group(1).casefold()) not in _NOT_PROMISED and restate.is_plain_verb(word)
            for m in _I_VERB.finditer(c)
        )
    ]
    return bool(promised) and not any(_asks_member(w, c) for c, _ in clauses if c not in promised)


def _taken_up(w: _Window, records: list[_Record]) -> list[_Record]:
    """A request with no one named, answered at once by another member's short commitment ("on it",
    "will do", "sure, tomorrow"), is that member's task: the reply joins it instead of opening its own. An offer
    ("shall I call them?") said yes to ("yes please, and copy me in") stays the offerer's; the yes joins it."""
    params = w.scored.engine.params
    dropped: set[int] = set()
    for record in records:
        a = record.anchor
        author = w.msgs[a].author_id
        if record.segment is not None or record.owner is None or record.owner.user_id != author:
            continue
        offered = bool(_OFFERS.search(w.msgs[a].text))
        if not offered and _promises(w, w.msgs[a].text):
            continue  # the author's own commitment
        for j in range(a + 1, min(a + 3, len(w.msgs))):
            reply = w.msgs[j]
            if reply.author_id == author or reply.author_id in w.ctx.bot_ids:
                continue
            if offered:
                if "?" not in reply.text and _AGREES.search(reply.text):
                    record.evidence = sorted({*record.evidence, j})
                    dropped |= {id(r) for r in records if r is not record and r.anchor == j}
                break
            takes = w.words(j) <= params["ack_words"] and "?" not in reply.text and w.scored.over("action_ev", j)
            # or, the very next message, reports it done ("rota updated, the hall rebooked for the 3rd"): who did it
            # owns it
            reports = j == a + 1 and "?" not in reply.text and w.scored.over("update", j) and _about(w, record, j)
            if takes or reports:
                record.owner = _member(w.ctx, reply.author_id)
                record.evidence = sorted({*record.evidence, j})
                if reports and not _takes_on(w, record, j):
                    record.done, record.done_at = True, j
                dropped |= {id(r) for r in records if r is not record and r.anchor == j}
            break
    return [r for r in records if id(r) not in dropped]


_NEGATED = re.compile(
    r"^(?:\w+ly\s+)?(?:can'?t|cannot|couldn'?t|won'?t|wouldn'?t|don'?t|didn'?t|doesn'?t|haven'?t|hasn'?t"
    r"|isn'?t|wasn'?t|not|never|no longer)\b",
    re.IGNORECASE,
)


# A task whose object is a pronoun ("order them", "file those", "print one") says what only its context says.
_PRONOUN_TASK = re.compile(r"^\w+ to (\w+ (?:it|that|this|them|those|one))\b", re.IGNORECASE)


def _referent(w: _Window, record: _Record, phrase: str) -> tuple[int, str] | None:
    """What the pronoun of a task's `phrase` ("order them") refers to, restated: the sentences before the one
    saying the phrase in the message that opened the task ("… the scanners need spare batteries. Omar, order
    them"), else the message before that one; None when neither says enough (four content words) to be worth
    saying."""
    first = record.evidence[0]
    parts = restate.sentences(w.msgs[first].text)
    said_at = next((k for k, part in enumerate(parts) if phrase.casefold() in part.casefold()), 0)
    candidates = [(first, " ".join(parts[:said_at]))] if said_at else []
    if first > 0:
        before = w.msgs[first - 1]
        # After a promise the pronoun stands for what was promised about ("I'll draft the memo" then "and I'll
        # circulate it": the memo), not for the promise.
        if said := restate.promised_object(before.text, w.name(before.author_id)):
            return _gist_of(w, candidates) or (first - 1, said)
        candidates.append((first - 1, before.text))
    return _gist_of(w, candidates)


def _gist_of(w: _Window, candidates: list[tuple[int, str]]) -> tuple[int, str] | None:
    """The first of `candidates` (a message index and what it said) that says enough (four content words),
    restated in a few words (`restate.gist`)."""
    for at, said in candidates:
        if len(restate.content_words(said)) >= 4:
            if kept := restate.gist(said, w.name(w.msgs[at].author_id)):
                return at, kept
    return None


# Closed-class words that point at what the context says ("this part is yours", "same for me", "do it").
_POINTING = frozenset("one ones yours mine theirs ours his hers same thing things done".split())
# A terse record's context: the messages before it that it may answer, nearest first.
ANSWERED_BACK = 3


def _says_little(w: _Window, text: str) -> bool:
    """Does a record's `text` say at most one word of its own: no more than one content word that is not a
    member's name or a word that points at the context ("Ana to do.", "This part is yours.", "Ben to approve.")?"""
    names = {part.casefold() for m in w.ctx.members for part in [*(m.name or "").split(), m.handle or ""] if part}
    own = [x for x in restate.content_words(text) if x not in names and x not in _POINTING]
    return len(own) <= 1


def _answered(w: _Window, record: _Record, text: str) -> tuple[int, str] | None:
    """What a terse record (`_says_little`) is about: what its own message said before the clause its text restates,
    nearest first (what asks to be approved: "we need two more licences. @ana can you approve?"); else the nearest
    of the `ANSWERED_BACK` messages before it by someone else that says enough (the proposal or request its message
    agrees to or takes on: "I'll build" after "we could cache the tariff table per region"), of a message the
    sentence with the most content words; else what its message says after the clause ("@ana this part is yours —
    a call with each shop manager")."""
    a = record.anchor
    said = set(restate.content_words(text))
    pieces = [p for part in restate.sentences(w.msgs[a].text) for p in re.split(r"\s[-\u2013\u2014]\s|;", part)]
    at = next((k for k, p in enumerate(pieces) if set(restate.content_words(p)) & said), 0)
    before_it = [(a, p) for p in reversed(pieces[:at])]
    after_it = [(a, p) for p in pieces[at:] if not set(restate.content_words(p)) & said]
    earlier = [
        (i, max(restate.sentences(w.msgs[i].text) or [""], key=lambda p: len(restate.content_words(p))))
        for i in range(a - 1, max(-1, a - 1 - ANSWERED_BACK), -1)
        if w.msgs[i].author_id != w.msgs[a].author_id
    ]
    return _gist_of(w, before_it + earlier + after_it)


def _action_text(w: _Window, record: _Record) -> tuple[str, list[int]]:
    """The action restated, and the indices of the messages it rests on: its evidence, and the message its
    pronoun refers to when the text says what that was ("Omar to order them (spare batteries for the scanners)")."""
    text, sources = _said_task(w, record)
    pronoun_task = _PRONOUN_TASK.match(text)
    if pronoun_task:
        referent = _referent(w, record, pronoun_task.group(1))
    else:
        referent = _answered(w, record, text) if text and _says_little(w, text) else None
    if referent is None:
        return text, record.evidence
    at, said = referent
    fitted = restate.fit(f"{text.rstrip('.')} ({said})", [*sources, w.msgs[at].text])
    if fitted.count("(") > fitted.count(")"):
        fitted = fitted.rstrip(".…") + ")."
    if len(fitted) <= len(text):
        return text, record.evidence
    return fitted, sorted({*record.evidence, at})


def _said_task(w: _Window, record: _Record) -> tuple[str, list[str]]:
    msg = w.msgs[record.anchor]
    sources = [w.msgs[i].text for i in record.evidence]
    owner = w.name(record.owner.user_id) if record.owner else "Someone"
    actor = w.name(msg.author_id)
    # A promise's "you" is whoever the owner answers: the last one before it who is not its author.
    answered = next((m.author_id for m in reversed(w.msgs[: record.anchor]) if m.author_id != msg.author_id), None)
    said = record.segment if record.segment is not None else _owners_item(w, record) or msg.text
    if record.owner and record.owner.handle:  # "@rafa tell the drivers …": the handle opens no task
        said = re.sub(rf"^\s*@{re.escape(record.owner.handle)}\b[\s,:]*", "", said, flags=re.IGNORECASE) or said
    task = restate.task(said, actor, owner, w.name(answered) if answered else None)
    if record.segment is not None and task and not restate.starts_with_verb(task):
        task = f"{_gapped_verb(w, record, actor, owner)} {task}".strip()  # "@ana you take X, @ben the Y"
    if task and task.casefold().startswith(f"{owner.casefold()} "):
        text = restate.sentence(task)  # "Wendell is happy presenting it": not a "to do" form
    elif task and (
        stated := restate.as_state(owner, task, own=msg.author_id == getattr(record.owner, "user_id", None))
    ):
        text = restate.sentence(stated)  # "Cheryl needs the plan first", "Park to send the numbers", not "… to need …"
    elif task and restate.lacks_subject(task):
        text = restate.sentence(f"{owner} {task}")  # "@ana is lead on the rollout": "Ana is lead on the rollout."
    elif task and _NEGATED.match(task):
        text = restate.sentence(restate.negated(owner, task))  # "Wendell can't sign it off", not "Wendell to can't …"
    elif task and not restate.opens_on_task(task, msg.text) and restate.fit(restate.sentence(task), sources):
        text = restate.sentence(task)  # "New date: the launch moves …", never "Wendell to new date: …"
    else:
        first = task.split(" ", 1)[0] if task else ""
        if first[1:].islower() and first[:1].isupper() and restate.starts_with_verb(first):
            task = task[0].lower() + task[1:]  # "Tell them …" said after "to" reads "to tell them …"
        text = restate.sentence(f"{owner} to {task}" if task else f"{owner} to follow up on {actor}'s request")
    if task and (about := restate.topic(said, text)):
        text = f"{about}: {text}"  # "Quote Q-118 for the hall hire: Ana to chase it on Monday."
    return restate.fit(text, sources), sources


def _owners_item(w: _Window, record: _Record) -> str | None:
    """In a message that lists things (`_items`: "Agreed: (1) … Leila updates it by Friday. (2) …"), the first
    item that is the owner's task: the one naming them (what it says they do: "Leila updates the list by Friday"
    is "update the list by Friday"), or for a promise the one that commits ("3. I'll send the minutes"). None in a
    message that is no list, or when no item is theirs."""
    owner = record.owner
    items = _items(w.msgs[record.anchor].text) if owner is not None else []
    if not items:
        return None
    if owner.user_id == w.msgs[record.anchor].author_id:
        return next((item for item in items if _COMMITS.search(item)), None)
    names = [n for n in (owner.handle, restate.first_name(owner.name) if owner.name else None) if n]
    for item in items if names else []:
        if found := re.search(rf"@?\b(?:{'|'.join(map(re.escape, names))})\b", item, re.IGNORECASE):
            # what the item says from their name on is their part ("prices up 6%, Leila updates the list by Friday")
            theirs = restate.from_third_person(item[found.end() :].lstrip(" :,-\u2013"))
            return theirs if len(theirs.split()) >= 2 and restate.starts_with_verb(theirs) else item
    return None


def _gapped_verb(w: _Window, record: _Record, actor: str, owner: str) -> str:
    """The verb a shared request gives once for every owner's part ("@ana you take the invoices, @ben the
    receipts": Ben's part is to take the receipts), or "" when no part opens on one."""
    for _, part in _segments(w.msgs[record.anchor].text, w.addressees[record.anchor]):
        said = restate.task(part, actor, owner)
        if said and restate.starts_with_verb(said):
            return said.split(" ", 1)[0]
    return ""


_COMMITS = re.compile(
    rf"\b(?:i'?ll|i will|i can|i'?m going to|i am going to|i'?d|will do|on it|{restate.LET_ME})\b", re.IGNORECASE
)


def _task_part(w: _Window, record: _Record) -> tuple[str | None, bool]:
    """The part of the anchor message that states the task, and whether only that part may state its
    date: a request's text from its owner's @mention or name on (or their handle said as the name a clause
    is addressed to: "Bea, can you …"; or the owner's own part of a shared request), the rest of the message
    only with a date said as a deadline; for a self-commitment, the sentences that commit ("I'll …") first,
    then the rest; when it does not open on one, from the first that commits on, the sentences before it only
    with a date said as a deadline (what they date is the context: "the crates land on Monday. I'll book the
    van": no date)."""
    msg = w.msgs[record.anchor]
    if record.segment is not None:
        return record.segment, True
    owner = record.owner
    if owner is None:
        return None, False
    if owner.user_id == msg.author_id:
        said = restate.sentences(msg.text)
        committed = [part for part in said if _COMMITS.search(part)]
        if committed and _COMMITS.search(said[0]) is None:
            return " ".join(said[said.index(committed[0]) :]), True
        return (" ".join(committed) if committed and len(committed) < len(said) else None), False
    marks = [rf"()@{re.escape(owner.handle)}\b"] if owner.handle else []
    first = restate.first_name(owner.name) if owner.name else None
    if first:
        marks.append(rf"()\b{re.escape(first)}\b")
    if owner.handle:
        # the handle said as a name to whom a clause is addressed ("Bea, can you …"; a short name often is one)
        marks.append(rf"(?:^|[.!?:;,]\s*)()\b{re.escape(owner.handle)}(?=\s*[,:]|\s+(?:can|could|please|pls|would)\b)")
    for mark in marks:
        if found := re.search(mark, msg.text, re.IGNORECASE):
            return msg.text[found.start(1) :], True
    return None, False


# A report that something is done: a check mark, or a message opening on a participle of completion.
_REPORTS_DONE = re.compile(
    r"[\u2705\u2714]|^\W*(?:all\s+set\b(?!\s+up)|(?:all\s+)?(?:done|sent|merged|shipped|published|submitted|signed|deployed|fixed|finished"
    r"|completed|delivered|booked|posted|uploaded|released)\b)(?!\s+(?:by|before|on|for)\b)",
    re.IGNORECASE,
)


_SENTENCE_END = re.compile(r"[.!?\n]")
_JOINT = re.compile(r"^[\s,&]*(?:and\s+)?$")


def _own_part(w: _Window, record: _Record, text: str) -> str:
    """`text` without what it asks of other members: from an @mention of someone other than the owner to the
    next @mention or the end of its sentence, unless the author commits to it there ("@ana I'll send it
    Friday" stays) or the owner is addressed with them ("@ana @ben both by Friday"). "I'll sign today, then
    @dan please submit by the 13th": the 13th is Dan's."""
    owner = record.owner.user_id if record.owner else None
    others = [m for m in w.ctx.members if m.handle and m.user_id != owner and m.user_id not in w.ctx.bot_ids]
    if "@" not in text or not others:
        return text
    marks = sorted(
        (found.start(), found.end(), member.user_id)
        for member in [*others, *([record.owner] if record.owner and record.owner.handle else [])]
        for found in re.finditer(rf"@{re.escape(member.handle)}\b", text, re.IGNORECASE)
    )
    kept, at = [], 0
    for k, (start, end, user_id) in enumerate(marks):
        if user_id == owner or start < at:
            continue
        if k and marks[k - 1][2] == owner and _JOINT.match(text[marks[k - 1][1] : start]):
            continue  # addressed together with the owner
        stop = marks[k + 1][0] if k + 1 < len(marks) else len(text)
        if sentence_end := _SENTENCE_END.search(text, end, stop):
            stop = sentence_end.end()
        if _COMMITS.search(text[start:stop]):
            continue
        kept.append(text[at:start])
        at = stop
    kept.append(text[at:])
    return " ".join(part.strip() for part in kept if part.strip())


def _answer(w: _Window, record: _Record) -> int | None:
    """The message of the record's evidence that answers its first one when that asks ("can you …?", "want me to
    …?"): the first by someone else within the next two messages; of a request, only its owner's."""
    a = record.anchor
    asker = w.msgs[a].author_id
    if "?" not in w.msgs[a].text or record.owner is None:
        return None
    for i in record.evidence[1:]:
        if i > a + 2:
            break
        if w.msgs[i].author_id != asker:
            return i if record.owner.user_id in (asker, w.msgs[i].author_id) else None
    return None


def _deadline(w: _Window, record: _Record):
    return _dated(w, record)[0]


def _dated(w: _Window, record: _Record) -> tuple[date | None, int | None]:
    """The date the action is due: what its request or commitment states (in the part that states the
    task first), replaced by a date its owner or requester gives later in its evidence: in a short reply
    ("sure, Monday then", "Tuesday, apologies"), or in a message about the same task (MiniLM cosine) that moves
    it ("slips to the 12th") or says a date as a deadline ("by Thursday"); up to the report that it is
    done, whose dates are what happened. Once the anchor said its deadline, a later date said in passing
    ("on it tomorrow") or an earlier one is the owner's plan: only a move, a later deadline or a
    counter-question replaces it. Also which message said it."""
    found, said_at, firm = None, None, False
    people = {w.msgs[record.anchor].author_id, record.owner.user_id if record.owner else None}
    params = w.scored.engine.params
    answer = _answer(w, record)
    if answer is not None:
        people.add(w.msgs[answer].author_id)  # of an offer ("want me to draft it?"), who takes it up may date it
    # what a report of it done said before a later move of its date ("not yet, sorry. Monday") was not its end
    slips = {i for i in record.evidence[1:] if _moves_date(w, record, i)}
    last_move = max(slips, default=-1)
    for i in record.evidence:
        if record.done_at is not None and i >= record.done_at and i != record.anchor:
            break
        message = w.msgs[i]
        today, known = w.day(i), w.known(i)
        moved = False
        if i == record.anchor:
            part, strict = _task_part(w, record)
            part = _own_part(w, record, part) if part else part
            said = (deadlines.resolve(part, today, known=known) if part else None) or deadlines.resolve(
                _own_part(w, record, message.text), today, marked_only=strict, known=known
            )
        elif message.author_id not in people:
            continue
        elif _REPORTS_DONE.search(message.text) and "?" not in message.text:
            if i < last_move:
                continue
            break  # "Sent.", "slides published ✅": what happened; the done head does not always say so
        elif w.words(i) > params["ack_words"] and w.cosine(i, record.anchor) < params["done_cosine"] and i != answer:
            continue  # about something else
        elif moved := (deadlines.moves(message.text) or i in slips):
            said = deadlines.moved_to(message.text, today, known)
        else:
            # a short reply's date ("sure, Monday then"); a longer message's only when said as a deadline
            said = deadlines.resolve(message.text, today, marked_only=w.words(i) > params["ack_words"], known=known)
        if not said:
            continue
        own = _own_part(w, record, message.text) if i == record.anchor else message.text
        marked = deadlines.resolve(own, today, marked_only=True, known=known) is not None
        if firm and (said < found or not marked) and not (moved or "?" in message.text):
            continue  # a date said in passing, or an earlier one, after the task's deadline ("on it today"): a plan
        found, said_at, firm = said, i, i == record.anchor and marked
    return found, said_at


# ----------------------------------------------------------------------------------------- signals


def _signals(w: _Window, taken: set[int]) -> list[ExtractedSignal]:
    out: list[ExtractedSignal] = []
    for i, msg in enumerate(w.msgs):
        if not w.pending[i]:
            continue
        if w.scored.over("blocker", i):
            kind = "blocker"  # even in a record's message: what blocks it is more than the record says
        elif i in taken:
            continue
        elif w.scored.over("update", i) and (_FIGURE.search(msg.text) or deadlines.resolve(msg.text, w.day(i))):
            kind = "update"  # an update stating a figure or a date
        else:
            continue
        who = w.name(msg.author_id)
        if kind == "blocker":  # the sentence that says what blocks (when it says enough alone), and all of it
            said = w.scored.likeliest_sentence(kind, i)
            enough = said and len(restate.content_words(said)) >= 4
            core = restate.blocker(said, who, msg.text) if enough else restate.blocker(msg.text, who)
        else:
            core = restate.normal_form(msg.text, who)
        if len(core.split()) < 3:
            continue
        # What was said, restated; who said it is the signal's participants, its kind the signal type.
        summary = restate.dated(restate.fit(restate.sentence(core), [msg.text]), w.day(i))[:400]
        if summary.count("(") > summary.count(")"):  # the cut fell inside an aside: the signal ends before it
            summary = restate.sentence(summary[: summary.rindex("(")].rstrip(" ,;:"))
            if len(summary.split()) < 3:
                continue
        if summary:
            out.append(
                ExtractedSignal(
                    signal_type=kind,  # type: ignore[arg-type]
                    summary=summary,
                    participants=[msg.author_id],
                    source_msg_ids=[msg.id],
                    confidence=round(w.scored.p(kind, i), 2),
                )
            )
    return out


# ------------------------------------------------------------------------- entities and relationships


def _relationships(
    w: _Window, actions: list[_Record], carried: frozenset[str] | set[str]
) -> list[ExtractedRelationship]:
    """What the burst's own messages say of how its entities relate (never a carried message's again: an earlier
    run observed it)."""
    out: dict[tuple[str, str, str], ExtractedRelationship] = {}
    own = [w.pending[i] and m.id not in carried for i, m in enumerate(w.msgs)]

    def add(source: str, target: str, kind: str, msg_id: str) -> None:
        key = (source.casefold(), target.casefold(), kind)
        if source.casefold() != target.casefold() and key not in out:
            out[key] = ExtractedRelationship(
                source=source[:120], target=target[:120], relationship=kind, source_msg_ids=[msg_id], confidence=0.6
            )  # type: ignore[arg-type]

    for action in actions:
        if action.owner is None or not own[action.anchor] or not action.owner.name:
            continue
        for spotted in find_entities(w.msgs[action.anchor].text, w.ctx)[:6]:
            if spotted.type != "person":
                add(action.owner.name, spotted.name, "works_on", w.msgs[action.anchor].id)
    verbs = (
        (r"depends on|relies on|needs|uses|calls|reads from|talks to|runs on", "depends_on"),
        (r"blocks|is blocking|blocked by|waiting on", "blocks"),
        (r"owns|is responsible for|maintains", "owns"),
    )
    for i, msg in enumerate(w.msgs):
        if not own[i]:
            continue
        spotted = find_entities(msg.text, w.ctx)
        if len(spotted) < 2:
            continue
        for sentence in restate.sentences(msg.text):
            for verb, kind in verbs:
                match = re.search(rf"\b({verb})\b", sentence, re.IGNORECASE)
                if not match:
                    continue
                left = [s for s in spotted if s.name in sentence[: match.start()]]
                right = [s for s in spotted if s.name in sentence[match.end() :]]
                if left and right:
                    source, target = left[-1], right[0]
                    if match.group(1).lower() in ("blocked by", "waiting on"):
                        source, target = target, source
                    add(source.name, target.name, kind, msg.id)
    return list(out.values())


def _entities(w: _Window, carried: frozenset[str] | set[str]) -> list[ExtractedEntity]:
    """The entities the burst's own messages name: a carried message's were counted by the run that extracted it
    (an entity's mention count is one per run that named it)."""
    seen: dict[str, Spotted] = {}
    for i, msg in enumerate(w.msgs):
        if w.pending[i] and msg.id not in carried:
            for spotted in find_entities(msg.text, w.ctx):
                seen.setdefault(spotted.name.casefold(), spotted)
    return [
        ExtractedEntity(name=s.name[:120], type=s.type, aliases=[a[:120] for a in s.aliases]) for s in seen.values()
    ]


# ------------------------------------------------------------------------------------------ extract


def view(msgs: list[WindowMessage], ctx: ChannelContext) -> list[features.Msg]:
    """The feature view of window messages."""
    origin = msgs[0].ts if msgs else datetime.now()
    return [
        features.Msg(
            id=m.id,
            author_id=m.author_id,
            text=m.text,
            minutes=(m.ts - origin).total_seconds() / 60,
            mentions_other=any(u != m.author_id and u not in ctx.bot_ids for u in m.mentions),
        )
        for m in msgs
    ]


def _uncarried(w: _Window, indices: list[int], anchor: int, carried: frozenset[str] | set[str]) -> list[int]:
    """The messages at `indices` a record opened on the message at `anchor` may cite: a record opened on a message
    not carried over from an earlier run cites none of the carried ones (`extract`'s `carried`)."""
    if carried and w.msgs[anchor].id not in carried:
        return [i for i in indices if w.msgs[i].id not in carried]
    return indices


def _continuation(w: _Window, record: _Record, at: int, **fields: Any) -> ExtractedAction | None:
    """An action an earlier burst stored, again: resting on its anchor and message `at` of this burst (what moved
    its date, what reported it done), with `fields` (its new deadline or status) for the store to continue the
    stored action with (`knowledge.records.record_action`, by the message already extracted)."""
    text = _said_task(w, record)[0]
    if not text:
        return None
    return ExtractedAction(
        description=restate.dated(text, w.day(record.anchor))[:400],
        owner_id=record.owner.user_id if record.owner else None,
        source_msg_ids=[w.msgs[record.anchor].id, w.msgs[at].id],
        confidence=w.scored.confidence("action", w.scored.p("action_ev", record.anchor)),
        **fields,
    )


def _cited(w: _Window, indices: list[int]) -> tuple[list[str], list[str]]:
    """The ids of the messages at `indices` (each once, in order) a record cites, and the topic terms of
    their thread (the messages, what they quote, and the earlier ones on the same thing)."""
    msg_ids = list(dict.fromkeys(w.msgs[i].id for i in indices))
    return msg_ids, topic.terms(topic.context_messages(w.msgs, msg_ids), w.ctx, msg_ids)


def extract(
    window: list[WindowMessage],
    ctx: ChannelContext,
    pending_ids: set[str] | None = None,
    engine: model.Engine | None = None,
    carried: frozenset[str] | set[str] = frozenset(),
) -> ExtractResult:
    """Tier 2 on the offline engine over `window` (oldest first). Never raises on odd text. `carried`: pending
    messages an earlier run extracted already (`pipeline.offline.bursts`); a record opened on a later message
    does not cite them (the store would take it for a continuation of that run's record)."""
    msgs = [
        m for m in window if m.author_id not in ctx.bot_ids and not any(u in ctx.bot_ids for u in m.mentions)
    ]  # talk to Jeeves is a command or a query, never evidence
    msgs = [
        WindowMessage(
            id=m.id, author_id=m.author_id, ts=m.ts, text=(m.text or "")[: features.TEXT_LIMIT], mentions=m.mentions
        )
        for m in msgs
    ]
    if not msgs:
        return ExtractResult()
    engine = engine or model.load()
    w = _Window(
        msgs=msgs,
        ctx=ctx,
        scored=engine.score(view(msgs, ctx)),
        pending=[pending_ids is None or m.id in pending_ids for m in msgs],
    )
    w.addressees = [addressees(m, ctx) for m in msgs]
    decisions: list[ExtractedDecision] = []
    found_decisions = _decisions(w)
    for record in found_decisions:
        # A decision an earlier burst stored (its anchor is not pending) comes again only when a pending message
        # joins it, resting on its anchor and that message: the store extends the decision it stored then.
        joining = [i for i in record.evidence if w.pending[i]] if not w.pending[record.anchor] else []
        if not w.pending[record.anchor] and not joining:
            continue
        summaries, sources, borrowed = _decision_texts(w, record)
        if joining:  # the messages join the decision(s) stored then: one continuation carries them
            summaries = summaries[:1]
        ids = ([record.proposal] if record.proposal is not None else []) + record.evidence
        if joining:
            ids = [record.anchor, *joining]
        ids = sorted({*ids, *borrowed}) if borrowed else ids
        ids = _uncarried(w, ids, record.anchor, carried)
        msg_ids, tags = _cited(w, ids)
        for summary in filter(None, summaries):
            decisions.append(
                ExtractedDecision(
                    summary=restate.dated(summary, w.day(record.anchor))[:400],
                    rationale=_rationale(w, ids, sources),
                    tags=tags,
                    decided_by=list(dict.fromkeys(w.msgs[i].author_id for i in record.evidence)),
                    source_msg_ids=msg_ids,
                    confidence=w.scored.confidence(
                        "decision", max(w.scored.p("decision_ev", i) for i in record.evidence)
                    ),
                    continues=bool(joining),
                )
            )
    found_actions = _actions(w)
    actions: list[ExtractedAction] = []
    for record in found_actions:
        if not w.pending[record.anchor]:
            # An action opened before this burst whose date a message of this burst moves ("slips to the 12th",
            # "Thursday instead, sorry") comes again, resting on its anchor and that message: the store continues
            # the action it stored then (`knowledge.records.record_action`, by the message already extracted)
            # with the new date, whichever burst said it. (Any later date, not only a move, was tried: train-CV
            # deadlines 209 of 260 right against 210 of 259, the owner's interim dates taken for the task's.)
            due, said_at = _dated(w, record)
            continued = None
            if due is not None and said_at is not None and w.pending[said_at] and deadlines.moves(w.msgs[said_at].text):
                continued = _continuation(w, record, said_at, deadline=due)
            elif record.done and record.done_at is not None and w.pending[record.done_at]:
                # Reported done in this burst ("audit finished ✅" a day after "I'll do the audit"): the store marks
                # the action it stored then done.
                continued = _continuation(w, record, record.done_at, status="done")
            if continued is not None:
                actions.append(continued)
            continue
        description, rests_on = _action_text(w, record)
        if not description:
            continue
        due = _deadline(w, record)
        description = restate.dated(description, w.day(record.anchor), due)
        rests_on = _uncarried(w, rests_on, record.anchor, carried)
        msg_ids, tags = _cited(w, rests_on)
        actions.append(
            ExtractedAction(
                description=description[:400],
                owner_id=record.owner.user_id if record.owner else None,
                deadline=due,
                source_msg_ids=msg_ids,
                confidence=w.scored.confidence("action", w.scored.p("action_ev", record.anchor)),
                status="done" if record.done else "open",
                tags=tags,
            )
        )
    taken = {i for r in found_decisions + found_actions for i in r.evidence}
    return ExtractResult(
        decisions=decisions,
        actions=actions,
        entities=_entities(w, carried),
        relationships=_relationships(w, found_actions, carried),
        signals=_signals(w, taken),
    )
