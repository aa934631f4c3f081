"""Staleness nudges (docs/architecture.md §8): one question per overdue open action, in Jeeves' voice.

The nudge is worded from the stored action (its synthesised description, owner and deadline),
never from a message, and posted by the bridge's `send_message` task on the respond queue.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import date, datetime

from django.utils import timezone

from ground.wording import number
from knowledge import proactive
from knowledge.channels import channel_zone
from knowledge.models import Action
from pipeline import claimcheck

logger = logging.getLogger(__name__)

QUESTION = "Shall I mark this as still in progress, or has it been resolved?"
CHOICES: tuple[tuple[str, str], ...] = (("open", "Still in progress"), ("done", "Done"), ("cancel", "Cancel"))
# A deadline phrase at the end of a description ("… by Friday"): the nudge names the date itself.
_TRAILING_DEADLINE = re.compile(r"\s+(?:by|before|until|due)\s+[^,;]+$", re.IGNORECASE)


@dataclass(frozen=True)
class Nudge:
    channel_id: str
    friendly_id: str
    text: str
    buttons: tuple[tuple[str, str], ...]


def _days_ago(days: int) -> str:
    if days <= 0:
        return "earlier today"
    if days == 1:
        return "yesterday"
    return f"{number(days)} days ago"


def _day_name(day: date, today: date) -> str:
    # Within the past week a weekday reads naturally ("by Friday"); beyond it, the date.
    if 0 <= (today - day).days < 7:
        return f"{day:%A}"
    return f"{day.day} {day:%B}" + ("" if day.year == today.year else f" {day.year}")


def _task_phrase(action: Action, owner: str | None) -> str:
    """The undertaking as a verb phrase ("complete the API review"), or '' when the description is no such phrase."""
    text = " ".join(action.description.split()).rstrip(" .…")
    # The offline engine writes "Tom to complete …" ("Someone to …" when nobody is named).
    names = "|".join(re.escape(n) for n in (owner, "someone") if n)
    match = re.match(rf"(?:{names})\s+(?:to|will|shall|is to)\s+(.+)$", text, re.IGNORECASE)
    if match:
        text = match.group(1)
    elif owner and text.split(" ", 1)[0].casefold() == owner.split(" ", 1)[0].casefold():
        return ""  # "Tom reviews …" is a statement, not a task to undertake
    # Otherwise an imperative ("Complete the API review", an LLM's habit) reads as the task itself.
    if action.deadline is not None:
        text = _TRAILING_DEADLINE.sub("", text)
    if not text:
        return ""
    first = text.split(" ", 1)[0]
    return text if first.isupper() and len(first) > 1 else text[0].lower() + text[1:]


def nudge_text(action: Action, now: datetime) -> str:
    """The question, as docs/architecture.md §8 words it: "If I may, Tom undertook to complete the API review
    by Friday. That was four days ago and I haven't noted any subsequent update. Shall I mark this as
    still in progress, or has it been resolved?" """
    zone = channel_zone(action.channel.timezone)
    today = now.astimezone(zone).date()
    owner = (action.owner_name or "").strip() or None
    task = _task_phrase(action, owner)
    fid = action.friendly_id
    if action.deadline is not None:
        due = action.deadline.astimezone(zone).date()
        when = f"by {_day_name(due, today)}"
        held_when = f"was to be seen to {when}"
        since = f"That was {_days_ago((today - due).days)} and I haven't noted any subsequent update."
    else:
        noted = action.created_at.astimezone(zone).date()
        when = _days_ago((today - noted).days)
        held_when = f"was noted {when}"
        since = "I haven't noted any subsequent update."
    if owner and task:
        first = f"If I may, {owner} undertook to {task} ({fid}) {when}."
    elif task and action.deadline is not None:
        first = f"If I may, it was agreed that someone would {task} ({fid}) {when}, though nobody was named to it."
    elif task:
        first = f"If I may, it was agreed {when} that someone would {task} ({fid}), though nobody was named to it."
    else:
        held = f"placed with {owner}" if owner else "with nobody named to it"
        first = f"If I may, {fid} ({held}) {held_when}: {action.description.rstrip(' .')}."
    return f"{first} {since} {QUESTION}"


def buttons_for(friendly_id: str) -> tuple[tuple[str, str], ...]:
    return tuple((f"stale:{friendly_id}:{choice}", label) for choice, label in CHOICES)


def due_nudges(now: datetime | None = None) -> list[Nudge]:
    """The nudges due now; the actions they ask about are marked checked, so a rerun within 24 hours finds none."""
    now = now or timezone.now()
    return [
        Nudge(a.channel_id, a.friendly_id, nudge_text(a, now), buttons_for(a.friendly_id))
        for a in proactive.claim_stale_actions(now)
    ]


def publish(nudge: Nudge, now: datetime | None = None) -> str:
    """Park the nudge's text under a claim-check key and ask the respond queue to post it (claimcheck.post);
    returns the key."""
    stamp = int((now or timezone.now()).timestamp())
    ref = f"stale:{nudge.friendly_id}:{stamp}"
    return claimcheck.post(nudge.channel_id, ref, nudge.text, proactive="nudge", buttons=nudge.buttons)


def run(now: datetime | None = None) -> int:
    """One staleness pass: ask about every action due; returns how many nudges went out."""
    now = now or timezone.now()
    nudges = due_nudges(now)
    for nudge in nudges:
        publish(nudge, now)
        logger.info("staleness nudge: channel=%s action=%s", nudge.channel_id, nudge.friendly_id)
    return len(nudges)
