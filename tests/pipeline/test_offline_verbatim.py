"""The no-verbatim guard and the restatement cutter."""

from __future__ import annotations

from pipeline.offline.restate import guard
from pipeline.offline.verbatim import longest_common_run

SOURCE = "ok let's go with queue-based retries, exponential backoff, max 5 attempts over 72h. shout now"


def test_counts_the_longest_shared_run_ignoring_case_and_punctuation() -> None:
    assert longest_common_run("Let's GO with queue based retries!", [SOURCE]) == 6
    assert longest_common_run("nothing in common here", [SOURCE]) == 0
    assert longest_common_run("", [SOURCE]) == 0
    assert longest_common_run("anything", []) == 0


def test_a_copied_sentence_is_ten_words_or_more() -> None:
    copied = "go with queue-based retries, exponential backoff, max 5 attempts over 72h"
    assert longest_common_run(copied, ["unrelated", SOURCE]) == 12


def test_guard_cuts_a_copy_below_ten_words_and_keeps_short_text() -> None:
    copied = "The team will go with queue-based retries, exponential backoff, max 5 attempts over 72h."
    cut = guard(copied, [SOURCE])
    assert longest_common_run(cut, [SOURCE]) <= 9
    assert "retries" in cut
    short = "Alice confirmed the retry plan."
    assert guard(short, [SOURCE]) == short
