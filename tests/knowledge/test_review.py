"""knowledge/review.py on real Postgres: an action done, still open or cancelled; a decision superseded; the
desk's bulk change with its audit entries. The admin views over them are tests/knowledge/test_review_desk.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from knowledge import records, review, sources
from knowledge.models import Action, ActionStatus, ChannelConfig, Decision, DecisionStatus, ReviewAudit
from tests.knowledge.conftest import T0

OTHER = "c2@wire.example"


def _action(channel: ChannelConfig, key: str, status: str = ActionStatus.OPEN) -> Action:
    return records.record_action(
        channel,
        records.ActionDraft(
            description="Odile to book the venue for the offsite.",
            owner_id="u7@wire.example",
            owner_name="Odile",
            deadline=None,
            status=status,
            confidence=0.8,
        ),
        source=sources.source_ref([(f"{key}-m", T0)]),
        sources_text=[],
        key=key,
    ).record


def _decision(channel: ChannelConfig, key: str, summary: str, days: int = 0) -> Decision:
    return records.record_decision(
        channel,
        records.DecisionDraft(
            summary=summary,
            rationale=None,
            decided_by=["u7@wire.example"],
            decided_at=T0 + timedelta(days=days),
            confidence=0.9,
        ),
        source=sources.source_ref([(f"{key}-m", T0 + timedelta(days=days))]),
        sources_text=[],
        key=key,
    ).record


def test_done_is_dated_now_once_and_only_in_the_actions_channel(channel):
    action = _action(channel, "act:v:0")
    before = timezone.now()
    done = review.mark_action_done(channel.channel_id, action.friendly_id, by="u9@wire.example")
    assert done.status == ActionStatus.DONE and before <= done.completed_at <= timezone.now()
    again = review.mark_action_done(channel.channel_id, action.friendly_id, by="u9@wire.example")
    assert again.completed_at == done.completed_at

    ChannelConfig.objects.create(channel_id=OTHER, organisation_id="wire.example")
    with pytest.raises(review.ReviewError, match="unknown action"):
        review.mark_action_done(OTHER, action.friendly_id, by="u9@wire.example")
    with pytest.raises(review.ReviewError, match="unknown action"):
        review.cancel_action(channel.channel_id, "ACT-9999", by="u9@wire.example")


def test_still_in_progress_reopens_a_stale_action_and_moves_its_next_nudge(channel, settings):
    action = _action(channel, "act:w:0")
    Action.objects.filter(pk=action.pk).update(status=ActionStatus.STALE, staleness_at=T0)
    kept = review.keep_action_open(channel.channel_id, action.friendly_id, by="u7@wire.example")
    stored = Action.objects.get(pk=action.pk)
    assert stored.status == ActionStatus.OPEN == kept.status
    assert stored.staleness_at - stored.last_status_check == timedelta(days=settings.JEEVES.staleness_days)

    review.mark_action_done(channel.channel_id, action.friendly_id, by="u7@wire.example")
    with pytest.raises(review.ReviewError, match="already done"):
        review.keep_action_open(channel.channel_id, action.friendly_id, by="u7@wire.example")


def test_a_cancelled_action_stays_cancelled_and_a_done_one_cannot_be_cancelled(channel):
    open_one, done_one = _action(channel, "act:x:0"), _action(channel, "act:y:0", status=ActionStatus.DONE)
    for _ in range(2):
        cancelled = review.cancel_action(channel.channel_id, open_one.friendly_id, by="u7@wire.example")
        assert cancelled.status == ActionStatus.CANCELLED
    with pytest.raises(review.ReviewError, match="already cancelled"):
        review.keep_action_open(channel.channel_id, open_one.friendly_id, by="u7@wire.example")
    with pytest.raises(review.ReviewError, match="already done"):
        review.cancel_action(channel.channel_id, done_one.friendly_id, by="u7@wire.example")
    assert Action.objects.get(pk=done_one.pk).status == ActionStatus.DONE


def test_a_superseded_decision_points_at_its_replacement_and_keeps_its_history(channel):
    old = _decision(channel, "dec:p:0", "Quarterly planning moves to the first Tuesday of the quarter.")
    new = _decision(channel, "dec:q:0", "Quarterly planning happens in the last week of the quarter.", days=3)
    result = review.supersede_decision(channel.channel_id, old.friendly_id, new.friendly_id, by="u9@wire.example")
    stored = Decision.objects.get(pk=old.pk)
    assert result.old.pk == old.pk and result.new.pk == new.pk
    assert stored.status == DecisionStatus.SUPERSEDED and stored.superseded_by_id == new.pk
    assert stored.valid_until == new.decided_at and stored.reviewed_by == "u9@wire.example"
    assert stored.summary == old.summary  # the record stays, as history
    assert Decision.objects.get(pk=new.pk).status == DecisionStatus.ACTIVE

    with pytest.raises(review.ReviewError, match="cannot supersede itself"):
        review.supersede_decision(channel.channel_id, new.friendly_id, new.friendly_id, by="u9@wire.example")
    with pytest.raises(review.ReviewError, match="not active"):
        review.supersede_decision(channel.channel_id, new.friendly_id, old.friendly_id, by="u9@wire.example")
    with pytest.raises(review.ReviewError, match="unknown decision"):
        review.supersede_decision(channel.channel_id, new.friendly_id, "DEC-9999", by="u9@wire.example")


def test_a_bulk_change_writes_one_audit_entry_per_record_with_the_fields_before_and_after(channel):
    first = _decision(channel, "dec:r:0", "Support rotas are published every Friday by noon.")
    second = _decision(channel, "dec:s:0", "The staging cluster is rebuilt from scratch every month.")
    changed = review.bulk_review(
        Decision.objects.filter(channel=channel), actor="desk-admin", action="reject", status=DecisionStatus.REJECTED
    )
    assert changed == 2
    entries = ReviewAudit.objects.filter(channel=channel).order_by("record")
    assert [(e.record, e.action, e.actor) for e in entries] == [
        (first.friendly_id, "reject", "desk-admin"),
        (second.friendly_id, "reject", "desk-admin"),
    ]
    assert all(e.before == {"status": "active"} and e.after == {"status": "rejected"} for e in entries)
    assert set(Decision.objects.values_list("status", flat=True)) == {DecisionStatus.REJECTED}
