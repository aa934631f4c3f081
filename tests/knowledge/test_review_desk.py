"""The review desk through the real admin views: every bulk action writes an audit entry (who, when, what,
before and after) shown on the record; entities merge (aliases combined, mentions and relationships
re-pointed); the dashboard shows counts, cost and an SVG chart to staff only."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from knowledge.models import (
    Action,
    Decision,
    Entity,
    EntityMention,
    EntityRelationship,
    LlmCall,
    MessageReceipt,
    ReviewAudit,
)
from tests.retrieval import factory

pytestmark = pytest.mark.django_db


@pytest.fixture
def reviewer(client):
    user = User.objects.create_superuser(f"lead-{uuid.uuid4().hex[:6]}", password="pw")
    client.force_login(user)
    client.user = user
    return client


def _act(client, model: str, action: str, pks: list, **extra):
    data = {"action": action, "_selected_action": [str(pk) for pk in pks], **extra}
    return client.post(f"/admin/knowledge/{model}/", data)


def test_a_bulk_supersede_is_audited_on_each_record(reviewer):
    ch = factory.channel()
    a, b, untouched = (factory.decision(ch, f"the rollout goes ahead in wave {n}") for n in (1, 2, 3))
    assert _act(reviewer, "decision", "supersede", [a.pk, b.pk]).status_code == 302

    for d in (a, b):
        d.refresh_from_db()
        assert d.status == "superseded" and d.reviewed_by == reviewer.user.username
        [entry] = ReviewAudit.objects.filter(decision=d)
        assert (entry.actor, entry.action, entry.record, entry.channel_id) == (
            reviewer.user.username,
            "supersede",
            d.friendly_id,
            ch.channel_id,
        )
        assert entry.before["status"] == "active" and entry.after["status"] == "superseded"
        assert entry.before["valid_until"] is None and entry.after["valid_until"]
        assert abs(entry.at - timezone.now()) < timedelta(minutes=5)
    assert not ReviewAudit.objects.filter(decision=untouched).exists()

    page = reviewer.get(f"/admin/knowledge/decision/{a.pk}/change/").content.decode()
    assert "Review history" in page and "supersede" in page and "active → superseded" in page
    assert reviewer.user.username in page


@pytest.mark.parametrize(("action", "status"), [("confirm", "active"), ("reverse", "reversed"), ("reject", "rejected")])
def test_every_decision_action_is_audited(reviewer, action, status):
    d = factory.decision(factory.channel(), "the release train leaves on thursdays")
    _act(reviewer, "decision", action, [d.pk])
    d.refresh_from_db()
    assert d.status == status
    assert ReviewAudit.objects.get(decision=d).action == action


@pytest.mark.parametrize(("action", "status"), [("mark_done", "done"), ("mark_cancelled", "cancelled")])
def test_action_status_changes_are_audited(reviewer, action, status):
    item = factory.action(factory.channel(), "write the migration runbook", owner=factory.user())
    _act(reviewer, "action", action, [item.pk])
    item.refresh_from_db()
    entry = ReviewAudit.objects.get(action_record=item)
    assert item.status == status and entry.before["status"] == "open" and entry.after["status"] == status


def test_reassign_owner_and_set_deadline_ask_first_then_audit(reviewer):
    ch = factory.channel()
    old, new = factory.user(), factory.user()
    items = [factory.action(ch, f"prepare the demo environment {n}", owner=old, owner_name="Ola") for n in (1, 2)]
    pks = [i.pk for i in items]

    form = _act(reviewer, "action", "reassign_owner", pks)
    assert form.status_code == 200 and b"Reassign owner" in form.content
    assert Action.objects.filter(owner_id=old).count() == 2  # nothing changed yet
    done = _act(reviewer, "action", "reassign_owner", pks, apply="1", owner_id=new, owner_name="Noor")
    assert done.status_code == 302
    assert Action.objects.filter(owner_id=new, owner_name="Noor").count() == 2
    entry = ReviewAudit.objects.filter(action_record=items[0]).get()
    assert entry.before == {"owner_id": old, "owner_name": "Ola"}
    assert entry.after == {"owner_id": new, "owner_name": "Noor"}

    _act(reviewer, "action", "set_deadline", pks[:1], apply="1", deadline="2026-04-01 17:00")
    items[0].refresh_from_db()
    assert items[0].deadline == datetime(2026, 4, 1, 17, 0, tzinfo=UTC)
    latest = ReviewAudit.objects.filter(action_record=items[0], action="set deadline").get()
    assert latest.before == {"deadline": None} and latest.after["deadline"].startswith("2026-04-01T17:00")

    page = reviewer.get(f"/admin/knowledge/action/{items[0].pk}/change/").content.decode()
    assert "reassign" in page and "set deadline" in page


def test_merging_entities_combines_aliases_and_repoints_relationships(reviewer):
    ch = factory.channel()
    keep = factory.entity(ch, "Payments API", aliases=["pay-api"], mention_count=5)
    dup = factory.entity(ch, "payments service", aliases=["paysvc"], mention_count=2)
    team = factory.entity(ch, "Platform team", kind="team")
    ledger = factory.entity(ch, "Ledger", kind="service")
    factory.relate(team, keep, "owns", [ch.channel_id])
    twin = factory.relate(team, dup, "owns", [ch.channel_id])  # the same link: strengthens keep's
    moved = factory.relate(dup, ledger, "depends_on", [ch.channel_id])
    loop = factory.relate(keep, dup, "depends_on", [ch.channel_id])  # would link keep to itself
    seen = timezone.now()
    EntityMention.objects.create(entity=dup, channel_id=ch.channel_id, run_key="r1", wire_msg_ids=["m1"], seen_at=seen)
    EntityMention.objects.create(entity=keep, channel_id=ch.channel_id, run_key="r2", wire_msg_ids=["m2"], seen_at=seen)

    assert _act(reviewer, "entity", "merge", [keep.pk, dup.pk]).status_code == 302
    assert not Entity.objects.filter(pk=dup.pk).exists()
    keep.refresh_from_db()
    assert keep.aliases == ["pay-api", "payments service", "paysvc"]
    assert keep.mention_count == 2 and EntityMention.objects.filter(entity=keep).count() == 2
    owns = EntityRelationship.objects.get(source=team, relationship="owns")
    assert owns.target_id == keep.pk and owns.observation_count == 2
    assert not EntityRelationship.objects.filter(pk__in=[twin.pk, loop.pk]).exists()
    assert EntityRelationship.objects.get(pk=moved.pk).source_id == keep.pk
    entry = ReviewAudit.objects.get(entity=keep)
    assert entry.action == "merge" and entry.before["merged"] == ["payments service"]
    assert entry.after["aliases"] == keep.aliases
    assert "payments service" in reviewer.get(f"/admin/knowledge/entity/{keep.pk}/change/").content.decode()


def test_entities_of_two_organisations_are_not_merged(reviewer):
    a = factory.entity(factory.channel(org="a.example"), "Billing")
    b = factory.entity(factory.channel(org="b.example"), "billing")
    _act(reviewer, "entity", "merge", [a.pk, b.pk])
    assert Entity.objects.filter(pk__in=[a.pk, b.pk]).count() == 2 and not ReviewAudit.objects.exists()


def test_the_dashboard_counts_costs_and_charts_for_staff_only(reviewer, client):
    ch = factory.channel()
    factory.decision(ch, "the status page moves to the new host")
    for n, tier in enumerate((2, 2, 1)):
        MessageReceipt.objects.create(channel_id=ch.channel_id, wire_msg_id=f"dash-{n}", tier=tier)
    LlmCall.objects.create(slot="classify", model="local", latency_ms=3, outcome="ok", channel_id=ch.channel_id)
    # Priced afterwards from litellm's cost map: a known model, tokens, no price recorded at call time.
    LlmCall.objects.create(
        slot="extract", model="gpt-4o-mini", prompt_tokens=1000, completion_tokens=200, latency_ms=900, outcome="ok"
    )
    LlmCall.objects.create(slot="extract", model="local", latency_ms=5, outcome="ok", fallback_used=True)

    page = reviewer.get("/admin/dashboard/")
    assert page.status_code == 200
    board = page.context["board"]
    assert board.received[-1] >= 3 and board.extracted[-1] >= 2
    assert board.records["decisions"] >= 1
    extract = next(u for u in board.usage if u.slot == "extract" and u.day == timezone.now().date())
    assert extract.calls >= 2 and extract.prompt_tokens >= 1000 and extract.priced and extract.cost > 0
    assert board.fallbacks.get("extract", 0) >= 1
    assert set(board.queue_depths) == {"classify", "extract", "embed", "respond", "summarise"}
    html = page.content.decode()
    assert html.count('class="jeeves-chart"') == 2 and "Messages per day" in html and "Model calls per day" in html

    client.logout()
    anonymous = client.get("/admin/dashboard/")
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]


def test_the_action_list_shows_deadlines_in_the_channel_s_time(reviewer):
    """A deadline at the end of a Tuesday in Chicago is Wednesday morning in UTC, the admin's time: the
    list shows the Tuesday the channel's people meant."""
    ch = factory.channel(name="depot-ops")
    ch.timezone = "America/Chicago"
    ch.save(update_fields=["timezone"])
    end_of_tuesday = datetime(2026, 4, 8, 4, 59, tzinfo=UTC)  # 23:59 on the 7th in Chicago (CDT)
    factory.action(ch, "Recount the spare tyres", owner="u-1", owner_name="Ines", deadline=end_of_tuesday)
    page = reviewer.get("/admin/knowledge/action/").content.decode()
    assert "Tue 7 Apr 2026, 23:59" in page and "8 Apr" not in page
    counted = factory.decision(ch, "Spare tyres are counted every Tuesday evening")
    Decision.objects.filter(pk=counted.pk).update(decided_at=end_of_tuesday)
    page = reviewer.get("/admin/knowledge/decision/").content.decode()
    assert "Tue 7 Apr 2026, 23:59" in page and "Wed 8 Apr" not in page  # (the date drill-down stays UTC's)


@pytest.mark.parametrize("model", ["decision", "action", "conversationsignal"])
def test_a_records_text_gets_the_width_of_its_list(reviewer, model):
    page = reviewer.get(f"/admin/knowledge/{model}/")
    assert page.status_code == 200
    assert "knowledge/admin.css" in page.content.decode()


def test_signals_list_newest_first(reviewer):
    ch = factory.channel()
    for days, text in (
        (3, "the freezer alarm was tested"),
        (1, "the spare keys are at reception"),
        (2, "the van is booked"),
    ):
        factory.signal(ch, text, days_ago=days)
    page = reviewer.get("/admin/knowledge/conversationsignal/").content.decode()
    spots = [page.index(t) for t in ("the spare keys", "the van is booked", "the freezer alarm")]
    assert spots == sorted(spots)


def test_confidence_reads_with_two_decimals_in_both_lists(reviewer):
    ch = factory.channel()
    decided = factory.decision(ch, "The loading bay closes at six on Fridays")
    Decision.objects.filter(pk=decided.pk).update(confidence=0.6)
    factory.action(ch, "Order the new pallet labels", owner="u-2", owner_name="Bo", confidence=0.9)
    assert '<td class="field-certainty">0.60</td>' in reviewer.get("/admin/knowledge/decision/").content.decode()
    assert '<td class="field-certainty">0.90</td>' in reviewer.get("/admin/knowledge/action/").content.decode()
