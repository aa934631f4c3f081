"""knowledge/forgetting.py on real Postgres and Redis: a deleted message, a purged channel or person,
records past retention, admin deletes. After each kind, no row of any table names what was forgotten."""

from __future__ import annotations

import io
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from psycopg import sql

from knowledge import (
    contradictions,
    counters,
    embeddings,
    entities,
    forgetting,
    llm_calls,
    proactive,
    receipts,
    records,
    review,
    sources,
)
from knowledge.models import (
    Action,
    ChannelConfig,
    ConversationSignal,
    Decision,
    Embedding,
    Entity,
    EntityMention,
    EntityRelationship,
    MessageReceipt,
    ReviewAudit,
    RomanBot,
    Summary,
)
from retrieval.scope import RetrievalScope, UnknownChannel

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 9, 20, tzinfo=UTC)
ORG = "wire.example"
DIMS = 384
# Tables that describe the schema, not anybody's data.
SCHEMA_TABLES = {"django_migrations", "django_content_type", "auth_permission"}


def traces(value: str) -> list[str]:
    """Every `table.column` of the database (all tables, not a list of known ones) holding `value`."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'"
            " AND data_type IN ('text', 'character varying', 'ARRAY', 'jsonb', 'json', 'uuid')"
        )
        columns = [c for c in cur.fetchall() if c[0] not in SCHEMA_TABLES]
        found = []
        for table, column in columns:
            cur.execute(
                sql.SQL("SELECT 1 FROM {} WHERE strpos({}::text, %s) > 0 LIMIT 1").format(
                    sql.Identifier(table), sql.Identifier(column)
                ),
                [value],
            )
            if cur.fetchone():
                found.append(f"{table}.{column}")
    return sorted(found)


def _vector(seed: int) -> list[float]:
    return [((seed * 7 + i) % 13) / 13.0 - 0.5 for i in range(DIMS)]


def _ids(n: int) -> list[str]:
    return [str(uuid.uuid4()) for _ in range(n)]


class Populated:
    """A channel with a row in every table Jeeves writes, a person everywhere in it, and a second
    channel of the same organisation sharing an entity (which must survive the first's purge)."""

    def __init__(self) -> None:
        self.cid = f"{uuid.uuid4()}@{ORG}"
        self.other = f"{uuid.uuid4()}@{ORG}"
        self.person = f"{uuid.uuid4()}@{ORG}"
        self.colleague = f"{uuid.uuid4()}@{ORG}"
        self.msgs = _ids(4)  # m0 by the person, m1..m3 by the colleague
        self.other_msgs = _ids(2)
        ch = ChannelConfig.objects.create(
            channel_id=self.cid,
            organisation_id=ORG,
            channel_name="forget-me",
            stakeholders=[self.person],
            state_changed_by=self.person,
        )
        other = ChannelConfig.objects.create(channel_id=self.other, organisation_id=ORG, channel_name="keep-me")
        self.channel, self.other_channel = ch, other
        for i, m in enumerate(self.msgs):
            author = self.person if i == 0 else self.colleague
            receipts.record_receipt(self.cid, m, author_id=author, sent_at=T0 + timedelta(minutes=i))
        for m in self.other_msgs:
            receipts.record_receipt(self.other, m, author_id=self.colleague, sent_at=T0)
        m0, m1, m2, m3 = self.msgs
        self.decision = self._decision(ch, [m0, m1], "The team chose the slower release train.", [self.person], 1)
        self.kept_decision = self._decision(other, self.other_msgs[:1], "Billing moves to the new ledger.", [], 2)
        # The colleague's later decision conflicts with the person's; the person asked for the Monday digest.
        self.later = self._decision(ch, [m1], "The team chose the faster release train.", [self.colleague], 8)
        verdict = contradictions.Verdict("contradicts", "The trains differ.", 0.8)
        contradictions.record_verdict(self.decision, self.later, verdict, cosine=0.9, judge_model="local")
        proactive.set_digest(ch, self.person, True)
        self.action = records.record_action(
            ch,
            records.ActionDraft(
                description="Someone will write up the release checklist.",
                owner_id=self.person,
                owner_name="Pat",
                deadline=None,
                status="open",
                confidence=0.9,
            ),
            source=sources.source_ref([(m2, T0)]),
            sources_text=[],
            key=f"act:{m2}:0",
            created_at=T0,
        ).record
        self.signal = records.record_signal(
            ch,
            records.SignalDraft(
                signal_type="blocker",
                summary="A blocker was reported on the release train.",
                occurred_at=T0,
                participants=[self.colleague, self.person],
            ),
            source=sources.source_ref([(m3, T0)]),
            sources_text=[],
            key=f"sig:{m3}:0",
        ).record
        for record, kind, seed in ((self.action, "action", 3), (self.signal, "signal", 4)):
            embeddings.record_embedding(
                kind, record.pk, _vector(seed), channel_id=self.cid, organisation_id=ORG, author_id=self.person,
                created_at=T0,
            )  # fmt: skip
        self.local_entity = entities.upsert_entity(
            ch, name="Release Train", entity_type="project", seen_at=T0, run_key=f"run:{m1}", mention_ids=[m1],
        ).record  # fmt: skip
        embeddings.record_embedding(  # as Tier 3 would
            "entity", self.local_entity.pk, _vector(5), channel_id=self.cid, organisation_id=ORG, author_id=None,
            created_at=T0,
        )  # fmt: skip
        self.shared_entity = entities.upsert_entity(
            ch, name="Ledger", entity_type="service", seen_at=T0, run_key=f"run:{m1}", mention_ids=[m1]
        ).record
        entities.upsert_entity(
            other, name="Ledger", entity_type="service", seen_at=T0, run_key="run:other", mention_ids=self.other_msgs
        )
        self.relationship = entities.upsert_relationship(
            ch, source=self.local_entity, target=self.shared_entity, relationship="depends_on", observed_at=T0,
            ref=sources.source_ref([(m1, T0)]), context="The release train waits on the ledger.",
        ).record  # fmt: skip
        self.daily = proactive.record_summary(
            proactive.SummaryFields(
                channel=ch, granularity="daily", period_start=T0.replace(hour=0), period_end=T0.replace(hour=0)
                + timedelta(days=1), summary="forget-me, Monday: one decision.", sentiment="productive",
                message_count=4, model_version="local", key_decisions=[self.decision.pk],
                key_actions=[self.action.pk], participants=[self.person, self.colleague],
            )
        )  # fmt: skip
        self.personal = Summary.objects.create(
            scope_type="person", scope_id=self.person, organisation_id=ORG, period_start=T0, period_end=T0,
            granularity="daily", summary="Your day: one decision.", key_decisions=[self.decision.pk],
        )  # fmt: skip
        embeddings.record_embedding(
            "summary", self.daily.pk, _vector(6), channel_id=self.cid, organisation_id=ORG, author_id=None,
            created_at=T0,
        )  # fmt: skip
        embeddings.record_message_embedding(self.cid, m0, _vector(7), organisation_id=ORG, author_id=self.person,
                                          created_at=T0)  # fmt: skip
        counters.bump_counter(self.cid, "expired")
        llm_calls.record_llm_call(slot="extract", model="local", outcome="ok", latency_ms=3, channel_id=self.cid)
        forgetting.tombstone(self.cid, "an-earlier-deleted-message")
        RomanBot.objects.create(bot_id=str(uuid.uuid4()), channel_id=self.cid, token_ciphertext="x")
        # The review desk: an entry on the channel's decision, and one in the other channel that handed the
        # person's action to the colleague (the person's id in its before).
        review.audit(self.decision, actor="lead", action="confirm", before={"status": "active"}, after={})
        self.handed_over = records.record_action(
            other, records.ActionDraft(
                description="Someone will tidy the ledger backlog.", owner_id=self.colleague, owner_name="Col",
                deadline=None, status="open", confidence=0.9,
            ), source=sources.source_ref([(self.other_msgs[0], T0)]),
            sources_text=[], key=f"act:{self.other_msgs[0]}:0", created_at=T0,
        ).record  # fmt: skip
        review.audit(
            self.handed_over, actor="lead", action="reassign",
            before={"owner_id": self.person, "owner_name": "Pat"},
            after={"owner_id": self.colleague, "owner_name": "Col"},
        )  # fmt: skip
        admin = User.objects.create_superuser(f"admin-{uuid.uuid4().hex[:8]}", password="pw")
        LogEntry.objects.create(
            user=admin, content_type=ContentType.objects.get_for_model(ChannelConfig), object_id=self.cid,
            object_repr="forget-me", action_flag=ADDITION,
        )  # fmt: skip

    def _decision(self, ch, ids, summary, by, seed):
        out = records.record_decision(
            ch, records.DecisionDraft(summary=summary, rationale=None, decided_by=by, decided_at=T0, confidence=0.9),
            source=sources.source_ref([(i, T0) for i in ids]), sources_text=[], key=f"dec:{ids[0]}:0",
        )  # fmt: skip
        embeddings.record_embedding(  # as Tier 3 would
            "decision", out.record.pk, _vector(seed), channel_id=ch.channel_id, organisation_id=ORG,
            author_id=(by or [None])[0], created_at=T0,
        )  # fmt: skip
        return out.record


@pytest.fixture
def world() -> Populated:
    return Populated()


def _purge(*args: str) -> str:
    out = io.StringIO()
    call_command("jeeves", "purge", *args, stdout=out)
    return out.getvalue()


def test_a_purged_channel_leaves_no_row_in_any_table(world):
    before = {t.split(".")[0] for t in traces(world.cid)}
    # The world reaches every table that can name a channel, so the check below cannot pass vacuously.
    assert before >= {
        "channel_config", "decisions", "actions", "conversation_signals", "entities", "entity_mentions",
        "entity_relationships", "embeddings", "summaries", "message_receipts", "pipeline_counters",
        "friendly_id_sequences", "llm_calls", "message_tombstones", "roman_bots", "django_admin_log",
        "decision_conflicts", "digest_subscriptions", "review_audit",
    }  # fmt: skip

    printed = _purge("--channel", world.cid, "--yes")

    assert "decisions" in printed and "embeddings" in printed
    assert traces(world.cid) == []
    for m in world.msgs:
        assert traces(m) == []
    # Its person summary retold a decision of the purged channel: gone too. The other channel keeps its own.
    assert not Summary.objects.filter(pk=world.personal.pk).exists()
    assert Decision.objects.filter(pk=world.kept_decision.pk).exists()
    ledger = Entity.objects.get(pk=world.shared_entity.pk)
    assert ledger.channel_ids == [world.other] and ledger.channel_id == world.other
    assert not Entity.objects.filter(pk=world.local_entity.pk).exists()
    assert Embedding.objects.filter(source_type="decision", source_id=world.kept_decision.pk).exists()
    assert not Embedding.objects.filter(source_type="entity", source_id=world.local_entity.pk).exists()


def test_purge_without_yes_shows_the_counts_and_deletes_nothing(world):
    with pytest.raises(CommandError, match="--yes"):
        _purge("--channel", world.cid)
    assert Decision.objects.filter(pk=world.decision.pk).exists()
    assert "channel_config.channel_id" in traces(world.cid)


def test_a_purged_person_leaves_no_row_naming_them(world):
    assert len(traces(world.person)) >= 8
    printed = _purge("--user", world.person, "--yes")
    assert "decisions" in printed
    assert traces(world.person) == []
    # What they authored (m0), decided, owned or took part in is gone; the colleague's own record stays.
    assert not Decision.objects.filter(pk=world.decision.pk).exists()
    assert not Action.objects.filter(pk=world.action.pk).exists()
    assert not ConversationSignal.objects.filter(pk=world.signal.pk).exists()
    assert traces(world.msgs[0]) in ([], ["message_tombstones.wire_msg_id"])
    assert Decision.objects.filter(pk=world.kept_decision.pk).exists()
    assert ChannelConfig.objects.get(channel_id=world.cid).stakeholders == []
    assert MessageReceipt.objects.filter(author_id=world.colleague).count() == 5
    # The review desk's entry that handed their action on stays, their id scrubbed from it.
    [entry] = ReviewAudit.objects.filter(action_record=world.handed_over)
    assert entry.before == {"owner_id": None, "owner_name": None} and entry.after["owner_id"] == world.colleague


def test_a_deleted_message_is_withdrawn_everywhere_but_its_tombstone(world):
    m1 = world.msgs[1]
    forgotten = forgetting.forget_message(world.cid, m1)

    assert traces(m1) == ["message_tombstones.wire_msg_id"]
    # The decision rested on m0 and m1: withdrawn whole (its words cannot be split by message), vector too.
    assert not Decision.objects.filter(pk=world.decision.pk).exists()
    assert not Embedding.objects.filter(source_id=world.decision.pk).exists()
    assert Action.objects.filter(pk=world.action.pk).exists()
    # The relationship's only observation and the entities' only mentions were m1.
    assert not EntityRelationship.objects.filter(pk=world.relationship.pk).exists()
    assert not Entity.objects.filter(pk=world.local_entity.pk).exists()
    ledger = Entity.objects.get(pk=world.shared_entity.pk)
    assert (ledger.mention_count, ledger.channel_ids) == (1, [world.other])
    # The summaries that retold the decision: withdrawn, the channel's returned to be written again.
    assert not Summary.objects.filter(pk__in=[world.daily.pk, world.personal.pk]).exists()
    assert [(p.granularity, p.period_start) for p in forgotten.summaries] == [("daily", world.daily.period_start)]
    assert forgetting.tombstoned(world.cid, [m1, world.msgs[2]]) == {m1}


def test_a_mention_count_follows_its_evidence():
    ch = ChannelConfig.objects.create(channel_id=f"{uuid.uuid4()}@{ORG}", organisation_id=ORG)
    a, b = _ids(2)
    for run, ids in (("r1", [a]), ("r2", [b]), ("r2", [b])):  # the second r2 is a redelivery
        entity = entities.upsert_entity(ch, name="Payments", entity_type="service", seen_at=T0, run_key=run,
                                        mention_ids=ids).record  # fmt: skip
    assert Entity.objects.get(pk=entity.pk).mention_count == 2
    forgetting.forget_message(ch.channel_id, a)
    assert Entity.objects.get(pk=entity.pk).mention_count == 1
    assert list(EntityMention.objects.filter(entity=entity).values_list("wire_msg_ids", flat=True)) == [[b]]
    forgetting.forget_message(ch.channel_id, b)
    assert not Entity.objects.filter(pk=entity.pk).exists()


def test_a_left_channel_is_unreachable_then_purged_after_its_grace(world):
    left = T0 + timedelta(days=30)
    ChannelConfig.objects.filter(channel_id=world.cid).update(left_at=left)
    grace = timedelta(days=7)
    with pytest.raises(UnknownChannel):
        RetrievalScope.for_asker(world.cid, world.person)
    assert forgetting.purge_left_channels(grace, now=left + timedelta(days=6)) == {}
    assert Decision.objects.filter(pk=world.decision.pk).exists()
    purged = forgetting.purge_left_channels(grace, now=left + timedelta(days=7, minutes=1))
    assert list(purged) == [world.cid]
    assert traces(world.cid) == []


def test_retention_ages_out_old_records_and_their_vectors(world):
    fresh = world._decision(world.other_channel, _ids(1), "Support hours stay as they are.", [], 9)
    Decision.objects.filter(pk=fresh.pk).update(decided_at=T0 + timedelta(days=100))
    assert forgetting.age_out(None) == {}  # JEEVES_RETENTION_DAYS unset: kept
    counts = forgetting.age_out(T0 + timedelta(days=50))
    assert counts["decisions"] == 3 and counts["embeddings"] >= 5
    assert list(Decision.objects.values_list("pk", flat=True)) == [fresh.pk]
    assert not MessageReceipt.objects.filter(channel_id=world.cid).exists()
    # No vector is left for a record that is gone.
    for kind, model in (
        ("decision", Decision),
        ("action", Action),
        ("signal", ConversationSignal),
        ("summary", Summary),
    ):
        ids = set(Embedding.objects.filter(source_type=kind).values_list("source_id", flat=True))
        assert ids <= set(model.objects.values_list("pk", flat=True))


def test_an_expired_tombstone_goes_nightly():
    cid = f"{uuid.uuid4()}@{ORG}"
    forgetting.tombstone(cid, "old", now=T0 - timedelta(days=forgetting.TOMBSTONE_DAYS + 1))
    forgetting.tombstone(cid, "new")
    assert forgetting.age_out(None)["message_tombstones"] == 1
    assert forgetting.tombstoned(cid, ["old", "new"]) == {"new"}


def test_admin_deletes_take_their_vectors_and_a_channel_everything(world, client):
    client.force_login(User.objects.filter(is_superuser=True).first())
    response = client.post(f"/admin/knowledge/decision/{world.decision.pk}/delete/", {"post": "yes"}, follow=False)
    assert response.status_code == 302
    assert not Embedding.objects.filter(source_id=world.decision.pk).exists()
    response = client.post(
        "/admin/knowledge/conversationsignal/",
        {"action": "delete_selected", "_selected_action": [str(world.signal.pk)], "post": "yes"},
    )
    assert response.status_code == 302
    assert not Embedding.objects.filter(source_id=world.signal.pk).exists()
    response = client.post(f"/admin/knowledge/channelconfig/{world.cid}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert traces(world.cid) == []


def test_no_vector_outlives_its_record_whichever_way_it_is_deleted(world):
    with connection.cursor() as cur:  # not even raw SQL behind the ORM's back
        cur.execute("DELETE FROM actions WHERE id = %s", [world.action.pk])
    assert not Embedding.objects.filter(source_id=world.action.pk).exists()
    Entity.objects.filter(pk=world.local_entity.pk).delete()
    assert not Embedding.objects.filter(source_id=world.local_entity.pk).exists()
    # A vector for a record deleted first is not written at all.
    assert not embeddings.record_embedding(
        "action", world.action.pk, _vector(1), channel_id=world.cid, organisation_id=ORG, author_id=None, created_at=T0
    )
