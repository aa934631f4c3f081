"""The offline engine's bursts: which pending messages it extracts together, and how a burst's records join the
records of the bursts before it.

A burst closes at the third message after its first high-signal one, or at `BATCH` messages: the bursts the
engine was fitted and chosen under (`pipeline.offline.replay`, `jeeves train`). The stack's extraction run takes
whatever the debounce gathered (one message at a chat's pace, ten or more when messages come fast), and one
extraction over many pending messages let a record gather evidence from every later message of the run (a
self-commitment took its owner's next updates and their dates, a request the next member's commitment), where
the simulator's bursts had ended it. So a run extracts its pending messages burst by burst (`extract`), the
earlier bursts' records continued by the later ones as the store continues them; the burst a run leaves open is
continued by the next run's first messages (`split`'s `carried`, kept in `jeeves:extract:burst:{ch}` by
`pipeline.debounce`), its messages read again so a reply in the next run dates, completes or takes up the request
before it. What the engine stores no longer depends on how fast the messages came (dev in process, runs of 1, 10,
15 or random sizes: the simulator's owners and deadlines, docs/measurements.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pipeline.context import ChannelContext
from pipeline.offline import model
from pipeline.offline.extract import LOOKAHEAD
from pipeline.offline.extract import extract as extract_window
from pipeline.schemas import ExtractedAction, ExtractedDecision, ExtractResult
from pipeline.window import WindowMessage

BATCH = 10
AFTER_HIGH_SIGNAL = 3


@dataclass
class Burst:
    """Messages the engine extracts together: `carried`, the part an earlier run left open (extracted then, read
    again now), and `new`, this run's."""

    carried: list[str]
    new: list[str]


def split(
    pending: Sequence[str], high: Iterable[str], carried: Sequence[str] = (), countdown: int | None = None
) -> tuple[list[Burst], tuple[list[str], int | None]]:
    """`pending` (ids, oldest first) cut into bursts: each closes at the `AFTER_HIGH_SIGNAL`-th message after its
    first high-signal one (in `high`), or at `BATCH` messages; the first continues the burst an earlier run left
    open (`carried`, its `countdown`). Also the burst this run leaves open (its ids and countdown; none when the
    last burst closed), for the next run to continue."""
    high = set(high)
    out: list[Burst] = []
    current = Burst(list(carried), [])
    for msg_id in pending:
        current.new.append(msg_id)
        if msg_id in high and countdown is None:
            countdown = AFTER_HIGH_SIGNAL
        elif countdown is not None:
            countdown -= 1
        if len(current.carried) + len(current.new) >= BATCH or countdown == 0:
            out.append(current)
            current, countdown = Burst([], []), None
    if current.new:
        out.append(current)
        return out, ([*current.carried, *current.new], countdown)
    return out, ([], None)


def through(win: list[WindowMessage], burst: set[str]) -> list[WindowMessage]:
    """The window up to the burst's last message and at most `LOOKAHEAD` messages after it, when they have
    arrived: what the engine reads for that burst."""
    last = max((k for k, m in enumerate(win) if m.id in burst), default=-1)
    return win[: last + 1 + LOOKAHEAD] if last >= 0 else []


def extract(
    win: list[WindowMessage],
    ctx: ChannelContext,
    bursts: list[Burst],
    engine: model.Engine | None = None,
) -> ExtractResult:
    """The bursts (`split`) extracted one by one over the window `win`; a later burst's continuation of an earlier
    burst's record joins it (`store_action`, `store_decision`), one of a record stored by an earlier run is kept
    for the store to continue. A burst that continues one an earlier run left open reads its messages again: a
    record resting on them continues what that run stored (a reply in this run gives the date or completes the
    action, as it would have had both runs been one burst); one resting on them alone is that run's, stored."""
    found = ExtractResult()
    present = {m.id for m in win}
    extracted: set[str] = set()
    for burst in bursts:
        carried = {i for i in burst.carried if i in present}
        ids = carried | set(burst.new)
        extracted |= carried
        result = extract_window(through(win, ids), ctx, ids, engine=engine, **({"carried": carried} if carried else {}))
        for decision in result.decisions:
            if carried & set(decision.source_msg_ids) and not decision.continues:
                decision = decision.model_copy(update={"continues": True})  # the earlier run stored it
            store_decision(found.decisions, decision, extracted, keep=True)
        for action in result.actions:
            store_action(found.actions, action, extracted)
        found.entities += result.entities
        found.relationships += result.relationships
        found.signals += result.signals
        extracted |= set(burst.new)
    return found


def _continued(stored: list, msg_ids: list[str], extracted: set[str]):
    """The first stored record resting on one of `msg_ids` an earlier burst extracted (in `extracted`; not a
    pending message, nor one read after the burst, which the next burst extracts), or None."""
    earlier = {i for i in msg_ids if i in extracted}
    return next((r for r in stored if earlier & set(r.source_msg_ids)), None) if earlier else None


def store_decision(
    stored: list[ExtractedDecision], decision: ExtractedDecision, extracted: set[str], *, keep: bool = False
) -> None:
    """As `knowledge.records.continue_decision` stores it: a continuation joins its messages to the first stored
    decision resting on one of its earlier messages; with none it is dropped (`keep`: kept as it is, a
    continuation of what an earlier run stored); any other decision is new."""
    if not decision.continues:
        stored.append(decision)
        return
    existing = _continued(stored, decision.source_msg_ids, extracted)
    if existing is not None:
        existing.source_msg_ids = list(dict.fromkeys([*existing.source_msg_ids, *decision.source_msg_ids]))
    elif keep:
        stored.append(decision)


def store_action(stored: list[ExtractedAction], action: ExtractedAction, extracted: set[str]) -> None:
    """As `knowledge.records.record_action` stores it: an action resting on messages an earlier burst
    extracted continues the first stored action resting on one of them, the one of the same owner first (its
    messages joined, its deadline replaced when the new one states one, done once reported done, its owner
    when it had none or when the action is read again from the one message it alone was opened on); else it is
    new."""
    earlier = {i for i in action.source_msg_ids if i in extracted}
    resting = [r for r in stored if earlier & set(r.source_msg_ids)]
    if not resting:
        stored.append(action)
        return
    # Of the actions resting on those messages (a request shared out makes several), the owner's own.
    existing = next((r for r in resting if action.owner_id and r.owner_id == action.owner_id), resting[0])
    again = len(resting) == 1 and existing.source_msg_ids[:1] == action.source_msg_ids[:1]
    existing.source_msg_ids = list(dict.fromkeys([*existing.source_msg_ids, *action.source_msg_ids]))
    if action.status == "done":
        existing.status = "done"
    if action.deadline is not None:
        existing.deadline = action.deadline
    if action.owner_id and (not existing.owner_id or again):
        existing.owner_id = action.owner_id  # read again from the message it alone was opened on, and what followed
