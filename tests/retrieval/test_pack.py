"""The context pack: priority layers, a real token count, lowest priority out first, persona and question kept."""

from __future__ import annotations

from datetime import UTC, datetime

from retrieval.pack import PERSONA, build_pack, count_tokens, render
from retrieval.records import Record

AT = datetime(2026, 3, 4, tzinfo=UTC)


def rec(kind: str, i: int, words: int = 20) -> Record:
    return Record(
        type=kind,
        id=f"{kind}-{i}",
        friendly_id=f"{'DEC' if kind == 'decision' else 'ACT'}-{i:04d}" if kind in ("decision", "action") else None,
        channel_id="c@x",
        channel_name="billing",
        occurred_at=AT,
        confidence=0.8,
        text=" ".join(f"word{j}" for j in range(words)),
        status="active",
        source_ref={},
    )


def test_real_token_count():
    assert count_tokens("hello there") == 2
    assert count_tokens("word " * 100) >= 100


def test_layers_in_priority_order_and_everything_fits_a_large_budget():
    ranked = [rec("summary", 1), rec("action", 2), rec("signal", 3), rec("decision", 4)]
    pack = build_pack("what did we decide?", ranked, 6000)
    assert list(pack.layers) == ["Relevant Decisions", "Relevant Actions", "Related Context", "Summaries"]
    assert [r.id for r in pack.records] == ["decision-4", "action-2", "signal-3", "summary-1"]
    assert [r.id for r in pack.ranked] == ["summary-1", "action-2", "signal-3", "decision-4"]
    prompt = pack.prompt()
    assert prompt.index("## Relevant Decisions") < prompt.index("## Summaries") < prompt.index("## User's Question")
    assert pack.tokens <= 6000


def test_budget_drops_lowest_priority_first():
    decisions = [rec("decision", i, words=60) for i in range(1, 6)]
    ranked = [*decisions, rec("summary", 9, words=60)]
    base = count_tokens(PERSONA) + count_tokens("## User's Question\nq")
    one = count_tokens(render(decisions[0])) + count_tokens("## Relevant Decisions\n")
    budget = base + one + 3 * count_tokens(render(decisions[1])) - 1  # room for 3 decisions, not 4
    pack = build_pack("q", ranked, budget)
    assert [r.id for r in pack.records] == ["decision-1", "decision-2", "decision-3"]
    assert [r.id for r in pack.dropped] == ["decision-4", "decision-5", "summary-9"]
    assert pack.tokens <= budget


def test_persona_and_question_are_never_dropped():
    pack = build_pack("a question that is longer than the budget " * 20, [rec("decision", 1)], 10)
    assert pack.records == []
    assert pack.persona == PERSONA
    assert "a question that is longer" in pack.prompt()
