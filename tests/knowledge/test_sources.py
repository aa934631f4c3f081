"""knowledge/sources.py: a record's source_ref, its natural key, and when its latest message was said."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.utils import timezone

from knowledge import sources

T0 = datetime(2026, 3, 9, 9, 30, tzinfo=UTC)


def test_said_at_is_when_the_latest_source_was_sent():
    ref = sources.source_ref([("k2", T0 + timedelta(hours=2)), ("k1", T0)])
    assert ref["wire_msg_ids"] == ["k1", "k2"]
    assert sources.said_at(ref) == T0 + timedelta(hours=2)


def test_said_at_is_never_later_than_now_and_now_when_the_range_says_nothing_usable():
    before = timezone.now()
    tomorrow = sources.source_ref([("k3", timezone.now() + timedelta(days=1))])
    for ref in (tomorrow, {}, {"timestamp_range": {"end": None}}, {"timestamp_range": {"end": "half past nine"}}):
        assert before <= sources.said_at(ref) <= timezone.now()
    naive = {"timestamp_range": {"end": "2026-03-09T09:30:00"}}  # no zone: not comparable, so now
    assert before <= sources.said_at(naive) <= timezone.now()


def test_the_natural_key_ignores_the_order_and_repeats_of_the_ids():
    assert sources.source_key("decision", ["b", "a", "a"]) == sources.source_key("decision", ["a", "b"])
    assert sources.source_key("decision", ["a"], 1) != sources.source_key("decision", ["a"], 0)
    assert sources.source_key("action", ["a"]) != sources.source_key("decision", ["a"])
