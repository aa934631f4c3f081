"""The context pack: persona and question (never dropped), then decisions, actions, related context and
summaries, filled to JEEVES_CONTEXT_TOKENS by a real tokenizer count; within a layer the lowest-ranked go first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from functools import lru_cache

from retrieval.records import Record

PERSONA = """You are Jeeves, a discreet and exact butler who keeps the records of a team's channel.
Answer only from the records below; if they do not answer the question, say "I'm afraid I have no record of that \
particular matter."
Voice: never use exclamation marks; say "I'm afraid", never "sorry"; say "Shall I", never "Do you want me to"; \
use "One notes that" for a gentle objection.
Cite the channel and the approximate date of every record you rely on, and its id (DEC-…, ACT-…).
Never quote: restate in your own words. If two records disagree, say "One notes that this appears to differ \
from…" and name both.
When a decision was superseded, give the current state first and then what changed."""

LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("Relevant Decisions", frozenset({"decision"})),
    ("Relevant Actions", frozenset({"action"})),
    ("Related Context", frozenset({"signal", "entity"})),
    ("Summaries", frozenset({"summary"})),
)


@lru_cache(maxsize=1)
def _token_counter() -> Callable[..., int]:
    from litellm import token_counter  # heavy import: only when a pack is built

    return token_counter


def count_tokens(text: str, model: str = "local") -> int:
    # litellm picks the model's tokenizer, or its default (cl100k) for a name it does not know.
    return int(_token_counter()(model=model, text=text))


def ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def approx_date(moment: datetime | None, now: datetime | None = None) -> str:
    """A date as a person says it: "the 13th of March", with the year only when it is not this year's."""
    if moment is None:
        return "an unrecorded date"
    year = (now or datetime.now(moment.tzinfo)).year
    spoken = f"the {ordinal(moment.day)} of {moment:%B}"
    return spoken if moment.year == year else f"{spoken} {moment.year}"


def local_date(moment: datetime | None, zone: tzinfo, now: datetime | None = None) -> str:
    """`approx_date` of the day `moment` falls on in `zone` (a channel's timezone): a deadline at the end of a
    Friday in New York is that Friday, not the Saturday it already is in UTC."""
    if moment is None:
        return approx_date(None)
    return approx_date(moment.astimezone(zone), (now or datetime.now(zone)).astimezone(zone))


def render(record: Record, zone: tzinfo = UTC) -> str:
    """One record as the model reads it, its dates in `zone` (the asking channel's timezone)."""
    where = f"{record.channel_name}, around {local_date(record.occurred_at, zone)}"
    if record.type == "decision":
        line = f"[{record.cite_id}] ({where}; status {record.status}) {record.text}"
        if record.detail.get("rationale"):
            line += f" Reason: {record.detail['rationale']}"
        if record.detail.get("superseded_by"):
            line += f" Superseded by {record.detail['superseded_by']}."
        return line
    if record.type == "action":
        owner = record.detail.get("owner_name") or "nobody named"
        due = record.detail.get("deadline")
        due_text = f", due {local_date(due, zone)}" if due else ""
        return f"[{record.cite_id}] ({where}; owner {owner}{due_text}; status {record.status}) {record.text}"
    if record.type == "summary":
        return f"[summary] ({where}; {record.status}) {record.text}"
    if record.type == "entity":
        relations = record.detail.get("relations") or ""
        return f"[entity] {record.text} ({record.status}){': ' + relations if relations else ''}"
    return f"[note] ({where}; {record.status}) {record.text}"


@dataclass
class ContextPack:
    question: str
    persona: str = PERSONA
    layers: dict[str, list[Record]] = field(default_factory=dict)
    dropped: list[Record] = field(default_factory=list)
    ranked: list[Record] = field(default_factory=list)  # what was kept, in fused rank order
    tokens: int = 0
    zone: tzinfo = UTC  # the asking channel's timezone: the dates the model reads are its days

    @property
    def records(self) -> list[Record]:
        return [r for _title, recs in self.layers.items() for r in recs]

    def prompt(self) -> str:
        sections = []
        for title, records in self.layers.items():
            if records:
                sections.append(f"## {title}\n" + "\n".join(render(r, self.zone) for r in records))
        sections.append(f"## User's Question\n{self.question}")
        return "\n\n".join(sections)


def build_pack(
    question: str,
    ranked: Sequence[Record],
    budget: int,
    counter: Callable[[str], int] = count_tokens,
    zone: tzinfo = UTC,
) -> ContextPack:
    """Fill the layers in priority order until the budget is reached; the rest (lowest priority) is left out.
    `zone`: the asking channel's timezone, for the dates the records are rendered with."""
    pack = ContextPack(question=question, zone=zone)
    used = counter(pack.persona) + counter(f"## User's Question\n{question}")
    full = False
    for title, kinds in LAYERS:
        chosen: list[Record] = []
        header = counter(f"## {title}\n")
        for record in (r for r in ranked if r.type in kinds):
            cost = counter(render(record, zone)) + (0 if chosen else header)
            # Once one record does not fit, everything of lower priority stays out too.
            if not full and used + cost <= budget:
                chosen.append(record)
                used += cost
            else:
                full = True
                pack.dropped.append(record)
        pack.layers[title] = chosen
    kept = {r.key for r in pack.records}
    pack.ranked = [r for r in ranked if r.key in kept]
    pack.tokens = used
    return pack
