"""Offline Tier 1: cue categories, high signal, gists that paraphrase; never crashes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.offline import classify
from pipeline.offline.classify import cue_categories, settles_question
from pipeline.offline.verbatim import longest_common_run
from tests.pipeline.test_offline_extract import ANA, BEN, BOT, CTX


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("agreed: we ship the new onboarding flow on Monday", "decision"),
        ("final call, the contract goes to the cheaper vendor", "decision"),
        ("I'll draft the announcement this afternoon", "action"),
        ("blocked on the staging credentials, can't test until someone grants access", "blocker"),
        ("we can't onboard the new hire to payroll without a state tax number", "blocker"),
        ("I can't get onto the build server, my SSO login is failing", "blocker"),
        ("rejected again: the store wants a new screenshot set", "blocker"),
        ("snag: the venue only seats 30 people", "blocker"),
        ("that'll break the nightly import for every customer on the old schema", "blocker"),
        ("does anyone know where the rota lives?", "question"),
        ("deployed to prod ✅", "update"),
        ("here's the doc https://docs.example/x", "reference"),
        ("morning all", "routine"),
    ],
)
def test_cue_categories(text: str, expected: str) -> None:
    assert expected in cue_categories(text, mentions_others=False)


@pytest.mark.parametrize(
    "text",
    ["a rollback would break the mobile clients instead", "any customers stuck on the old app version?"],
)
def test_hypotheticals_and_questions_about_being_stuck_are_not_blockers(text: str) -> None:
    assert "blocker" not in cue_categories(text, mentions_others=False)


def test_a_proposal_is_discussion_not_a_decision() -> None:
    found = cue_categories("what if we moved the sync onto the queue instead?", mentions_others=False)
    assert "decision" not in found


def test_classify_high_signal_and_gist_is_a_paraphrase() -> None:
    text = "ok let's go with the managed Postgres offering for the analytics-db, the team will migrate next sprint"
    result = classify(text, CTX, ANA.user_id, [])
    assert "decision" in result.categories
    assert result.is_high_signal
    assert result.gist.startswith("Ana ")
    assert longest_common_run(result.gist, [text]) < 5


def test_messages_to_the_bot_are_never_high_signal() -> None:
    result = classify("@jeeves pause", CTX, BEN.user_id, [BOT.user_id])
    assert result.categories == ["routine"]
    assert not result.is_high_signal


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(max_size=500), st.just(""), st.just("🎉🎉"), st.just("x" * 10000)))
def test_classify_never_crashes(text: str) -> None:
    result = classify(text, CTX, ANA.user_id, [BEN.user_id])
    assert result.categories
    assert longest_common_run(result.gist, [text]) < 10


@pytest.mark.parametrize(
    ("question", "answer", "settles"),
    [
        (
            "are we moving the wiki to the new space? it's about 900 pages",
            "yes, every page. the old space gets archived",
            True,
        ),
        ("Is the night shift in scope?", "Night shift held flat this quarter, no new hires without my approval", True),
        ("Grafana ok for this?", "Grafana's fine, hourly data is enough", True),
        ("should we rotate the keys now or at the window?", "at the window, if nothing else breaks", False),
        ("do we know why the build is slow?", "yes, the cache is cold after every deploy", False),
        ("how long does the review take?", "about a week, sometimes two", False),
    ],
)
def test_an_answer_settles_a_question_about_the_teams_course(question: str, answer: str, settles: bool) -> None:
    assert settles_question(answer, question) is settles
