"""Scope never leaks (property-based): random organisations, channels, 1:1s, channels Jeeves has left,
users and records; every question and every list command (`decisions`, `actions`, `catch me up`) from
every channel and 1:1 returns only records that asker may see there. And whatever order Wire's events
arrive in, with Redis emptied between them, a conversation is a 1:1 only when Wire said so.

The world is built once per module; hypothesis draws the asker, the channel and the question.
"""

from __future__ import annotations

import dataclasses
import random
import re
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
import pytest
from django.db import connection
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ground.redis import get_redis
from knowledge.models import (
    Action,
    ChannelConfig,
    ConversationSignal,
    Decision,
    Embedding,
    Entity,
    EntityRelationship,
    Summary,
)
from retrieval import commands
from retrieval.answer import NO_RECORD
from retrieval.ask import ask, plan_context, retrieve
from retrieval.config import RetrievalConfig
from retrieval.plan import offline_plan
from retrieval.scope import RetrievalScope, UnknownChannel
from tests.fakes.wire import sidecar_app_added
from tests.retrieval import factory
from tests.retrieval.factory import NOW, ref
from tests.wire_bridge.conftest import APP_ID, wire_config
from wire_bridge import ingest, sidecar

WORDS = [
    "billing", "retry", "payments", "release", "ios", "android", "budget", "hiring", "offer", "cdn", "deploy",
    "freeze", "migration", "dashboard", "churn", "sponsorship", "contractor", "rollout", "postmortem", "vendor",
]  # fmt: skip
DIMS = 384


@dataclass
class World:
    orgs: list[str]
    users: dict[str, list[str]]  # org -> users
    channels: list[ChannelConfig]
    personal_owner: dict[str, str]  # 1:1 channel id -> its human
    left: set[str] = field(default_factory=set)  # channels Jeeves has left (awaiting their purge)
    friendly: dict[str, tuple[str, str]] = field(default_factory=dict)  # DEC-0007 -> ("decision", id)
    truth: dict[tuple[str, str], dict] = field(default_factory=dict)  # (type, id) -> facts for the scope check
    vectors: list[list[float]] = field(default_factory=list)

    def __repr__(self) -> str:  # hypothesis prints arguments of a failing example
        return f"World({len(self.channels)} channels, {len(self.truth)} records)"


def _visible(world: World, scope: RetrievalScope, key: tuple[str, str]) -> bool:
    t = world.truth[key]
    if t["org"] != scope.organisation_id or scope.channel_id in world.left:
        return False
    if t.get("channel") in world.left or world.left & t.get("cites", set()):
        return False  # a channel Jeeves has left is outside every scope, 1:1 included
    if not scope.personal:
        if key[0] == "entity":
            return scope.channel_id in t["channel_ids"]
        return t["channel"] == scope.channel_id
    user = scope.user_id
    if key[0] == "decision":
        return user in t["decided_by"]
    if key[0] == "action":
        return t["owner"] == user
    if key[0] == "signal":
        return user in t["participants"]
    if key[0] == "summary":
        return t["scope_type"] == "person" and t["scope_id"] == user
    if key[0] == "entity":
        return any(
            user in s["participants"] and key[1] in s["related"] and s["channel"] not in world.left
            for k, s in world.truth.items()
            if k[0] == "signal" and s["org"] == scope.organisation_id
        )
    raise AssertionError(key)


def _text(rng: random.Random) -> str:
    return "The team settled " + " ".join(rng.sample(WORDS, 3)) + " for the quarter"


def build_world(n_channels: int, per_channel: int, seed: int = 7) -> World:
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    orgs = ["wire.example", "northwind.example", "kestrel.example"]
    users = {o: [f"{uuid.UUID(int=rng.getrandbits(128))}@{o}" for _ in range(15)] for o in orgs}
    centres = nrng.normal(size=(8, DIMS))
    world = World(orgs=orgs, users=users, channels=[], personal_owner={})
    channels, decisions, actions, signals, entities, rels, summaries, embeddings = [], [], [], [], [], [], [], []
    for i in range(n_channels):
        org = orgs[i % len(orgs)]
        personal = i % 5 == 4
        ch = ChannelConfig(
            channel_id=f"{uuid.UUID(int=rng.getrandbits(128))}@{org}",
            channel_name=f"leak-{i}",
            organisation_id=org,
            conversation_type="ONE_TO_ONE" if personal else rng.choice(["GROUP", "UNKNOWN"]),
            left_at=NOW - timedelta(days=1) if i % 7 == 3 else None,
        )
        channels.append(ch)
        if ch.left_at is not None:
            world.left.add(ch.channel_id)
        if personal:
            world.personal_owner[ch.channel_id] = rng.choice(users[org])
    world.channels = channels

    def vec() -> list[float]:
        v = centres[rng.randrange(len(centres))] + nrng.normal(scale=0.3, size=DIMS)
        v = v / np.linalg.norm(v)
        world.vectors.append(v.tolist())
        return v.tolist()

    org_entities: dict[str, list[Entity]] = {o: [] for o in orgs}
    for o in orgs:
        for name in WORDS:
            ent = Entity(
                id=uuid.uuid4(),
                channel=rng.choice([c for c in channels if c.organisation_id == o]),
                organisation_id=o,
                entity_type="concept",
                name=name,
                normalised_name=name,
                channel_ids=[c.channel_id for c in rng.sample(channels, 12) if c.organisation_id == o],
            )
            entities.append(ent)
            org_entities[o].append(ent)
            world.truth[("entity", str(ent.id))] = {"org": o, "channel_ids": ent.channel_ids}
        for _ in range(25):
            a, b = rng.sample(org_entities[o], 2)
            chans = [c for c in rng.sample(channels, 10) if c.organisation_id == o]
            rels.append(
                EntityRelationship(
                    source=a,
                    target=b,
                    relationship=rng.choice(["blocks", "depends_on", "owns"]),
                    organisation_id=o,
                    channel_ids=[c.channel_id for c in chans],
                )  # fmt: skip
            )
    n = 0
    for ch in channels:
        org, people = ch.organisation_id, users[ch.organisation_id]
        for _ in range(per_channel):
            n += 1
            # Some within the last day, so `catch me up` (the last 24 hours) lists decisions too.
            at = NOW - timedelta(hours=rng.randrange(1, 90 * 24))
            by = rng.sample(people, rng.randrange(0, 3))
            d = Decision(
                id=uuid.uuid4(), channel=ch, organisation_id=org, friendly_id=f"DEC-{n:04d}", summary=_text(rng),
                decided_by=by, decided_at=at, source_ref=ref(f"m{n}", at=at), source_key=f"d{n}",
                tags=rng.sample(WORDS, 1),
            )  # fmt: skip
            owner = rng.choice([*people, None])
            a = Action(
                id=uuid.uuid4(), channel=ch, organisation_id=org, friendly_id=f"ACT-{n:04d}", description=_text(rng),
                owner_id=owner, owner_name=owner and f"Person {owner[:4]}", status=rng.choice(["open", "done"]),
                source_ref=ref(f"a{n}", at=at), source_key=f"a{n}",
            )  # fmt: skip
            parts = rng.sample(people, rng.randrange(1, 3))
            related = [e.id for e in rng.sample(org_entities[org], 2)]
            s = ConversationSignal(
                id=uuid.uuid4(), channel=ch, organisation_id=org, signal_type="discussion", summary=_text(rng),
                participants=parts, related_entities=related, occurred_at=at, source_ref=ref(f"s{n}", at=at),
                source_key=f"s{n}",
            )  # fmt: skip
            decisions.append(d)
            actions.append(a)
            signals.append(s)
            world.truth[("decision", str(d.id))] = {"org": org, "channel": ch.channel_id, "decided_by": by}
            world.friendly[d.friendly_id] = ("decision", str(d.id))
            world.friendly[a.friendly_id] = ("action", str(a.id))
            world.truth[("action", str(a.id))] = {"org": org, "channel": ch.channel_id, "owner": owner}
            world.truth[("signal", str(s.id))] = {
                "org": org, "channel": ch.channel_id, "participants": parts, "related": {str(x) for x in related},
            }  # fmt: skip
            for record, kind, author in (
                (d, "decision", by[0] if by else None),
                (a, "action", owner),
                (s, "signal", parts[0]),
            ):
                # The embedding's author is a random org member half the time: the record's own scope must hold.
                author = author if rng.random() < 0.5 else rng.choice(people)
                embeddings.append(
                    Embedding(
                        source_type=kind,
                        source_id=record.id,
                        channel_id=ch.channel_id,
                        organisation_id=org,
                        author_id=author,
                        created_at=at,
                        embedding=vec(),
                    )  # fmt: skip
                )
        for kind, scope_id in (("channel", ch.channel_id), ("person", rng.choice(people))):
            # A person summary retells decisions of any of the organisation's channels.
            cited = rng.sample([x for x in decisions if x.organisation_id == org], 2) if kind == "person" else []
            m = Summary(
                id=uuid.uuid4(), scope_type=kind, scope_id=scope_id, organisation_id=org,
                period_start=NOW - timedelta(days=rng.randrange(5, 60), seconds=len(summaries)),
                period_end=NOW - timedelta(days=2),
                granularity="daily", summary=_text(rng), key_decisions=[x.id for x in cited],
            )  # fmt: skip
            summaries.append(m)
            world.truth[("summary", str(m.id))] = {
                "org": org, "channel": ch.channel_id if kind == "channel" else None, "scope_type": kind,
                "scope_id": scope_id, "cites": {x.channel_id for x in cited},
            }  # fmt: skip
    ChannelConfig.objects.bulk_create(channels)
    Entity.objects.bulk_create(entities)
    EntityRelationship.objects.bulk_create(rels)
    for model, rows in ((Decision, decisions), (Action, actions), (ConversationSignal, signals), (Summary, summaries)):
        model.objects.bulk_create(rows, batch_size=1000)
    Embedding.objects.bulk_create(embeddings, batch_size=1000)
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    return world


def _wipe(world: World) -> None:
    ids = [c.channel_id for c in world.channels]
    Embedding.objects.filter(channel_id__in=ids).delete()
    Summary.objects.filter(organisation_id__in=world.orgs).delete()
    EntityRelationship.objects.filter(organisation_id__in=world.orgs).delete()
    Entity.objects.filter(organisation_id__in=world.orgs).delete()
    ChannelConfig.objects.filter(channel_id__in=ids).delete()  # cascades to decisions, actions, signals


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        built = build_world(n_channels=240, per_channel=4)
        yield built
        _wipe(built)


QUESTIONS = st.one_of(
    st.builds(lambda a, b: f"What did we decide about {a} and {b}?", st.sampled_from(WORDS), st.sampled_from(WORDS)),
    st.builds(lambda a: f"Who owns the {a} work and is it done?", st.sampled_from(WORDS)),
    st.builds(lambda a: f"What is blocking the {a}?", st.sampled_from(WORDS)),
    st.builds(lambda a: f"What are my open actions on {a}?", st.sampled_from(WORDS)),
    st.builds(lambda n: f"What does DEC-{n:04d} say?", st.integers(1, 1000)),
    st.builds(lambda a: f"What happened with {a} last week?", st.sampled_from(WORDS)),
)

CFG = RetrievalConfig(
    path_weights={"structured": 1, "semantic": 1, "fulltext": 0.8, "graph": 0.6, "summary": 0.5},
    recency_half_life_days=30,
    context_tokens=6000,
    complexity_threshold=0.7,
    contradiction_threshold=0.78,
    min_similarity=-1.0,  # let every semantic neighbour through: the filter under test is the scope
)


def _asker(world: World, data: st.DataObject) -> RetrievalScope:
    ch = data.draw(st.sampled_from([c for c in world.channels if c.channel_id not in world.left]))
    if ch.is_personal:
        user = world.personal_owner[ch.channel_id]
    else:
        # Askers include members of other orgs: the scope is the channel, not who asks.
        user = data.draw(st.sampled_from([u for us in world.users.values() for u in us]))
    return RetrievalScope.for_asker(ch.channel_id, user)


def _check(world: World, scope: RetrievalScope, keys) -> None:
    leaked = [k for k in keys if not _visible(world, scope, k)]
    assert not leaked, f"out of scope for {scope}: {leaked}"


@pytest.mark.django_db
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), question=QUESTIONS)
def test_every_path_returns_only_in_scope_records(world, data, question):
    scope = _asker(world, data)
    vector = data.draw(st.sampled_from(world.vectors))
    # Both semantic branches: the exact scan of the scope's rows, and the iterative HNSW scan (threshold 0).
    cfg = (
        CFG
        if data.draw(st.booleans(), label="exact semantic scan")
        else dataclasses.replace(CFG, exact_scan_max_rows=0)
    )
    found = retrieve(question, scope, cfg, query_vector=vector, plan=offline_plan(question, plan_context(scope, NOW)))
    for path, keys in found.path_hits.items():
        _check(world, scope, [k for k in keys if k in found.records] if path == "semantic" else keys)
        assert path != "semantic" or keys, "semantic path found nothing: iterative scan did not reach k"
    _check(world, scope, found.records)
    _check(world, scope, [f.key for f in found.fused])


@pytest.mark.django_db
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), question=QUESTIONS)
def test_answers_cite_only_in_scope_records(world, data, question):
    scope = _asker(world, data)
    result = ask(scope.channel_id, scope.user_id, question)
    for record in result.records:
        matches = [k for k in world.truth if k[1] == record.id] or [
            ("decision" if record.id.startswith("DEC") else "action", _by_friendly(record))
        ]
        _check(world, scope, matches)
    if not result.records:
        assert result.answer == NO_RECORD


LISTED = re.compile(r"\b(?:DEC|ACT)-\d{4}\b")


@pytest.mark.django_db
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), command=st.sampled_from(["decisions", "actions", "actions mine", "catch me up"]))
def test_list_commands_show_only_in_scope_records(world, data, command):
    scope = _asker(world, data)
    cid, user = scope.channel_id, scope.user_id
    reply = {
        "decisions": lambda: commands.list_decisions(cid, user),
        "actions": lambda: commands.list_actions(cid, user, mine=False),
        "actions mine": lambda: commands.list_actions(cid, user, mine=True),
        "catch me up": lambda: commands.catch_me_up(cid, user),
    }[command]()
    _check(world, scope, [world.friendly[f] for f in LISTED.findall(reply)])


@pytest.mark.django_db
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), question=QUESTIONS)
def test_a_channel_jeeves_has_left_answers_from_no_record(world, data, question):
    ch = data.draw(st.sampled_from([c for c in world.channels if c.channel_id in world.left]))
    user = world.personal_owner.get(ch.channel_id) or data.draw(st.sampled_from(world.users[ch.organisation_id]))
    with pytest.raises(UnknownChannel):
        RetrievalScope.for_asker(ch.channel_id, user)
    assert ask(ch.channel_id, user, question).records == []
    for reply in (
        commands.list_decisions(ch.channel_id, user),
        commands.list_actions(ch.channel_id, user, mine=False),
        commands.catch_me_up(ch.channel_id, user),
    ):
        assert not LISTED.findall(reply)


def _by_friendly(record) -> str:
    model = Decision if record.id.startswith("DEC") else Action
    return str(model.objects.get(channel_id=record.channel_id, friendly_id=record.id).id)


@pytest.fixture(scope="module")
def big_world(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        built = build_world(n_channels=1000, per_channel=8, seed=11)
        yield built
        _wipe(built)


@pytest.mark.slow
@pytest.mark.django_db
@settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), question=QUESTIONS)
def test_every_path_returns_only_in_scope_records_big(big_world, data, question):
    test_every_path_returns_only_in_scope_records.hypothesis.inner_test(big_world, data, question)


# --------------------------------------------------------------------------- the 1:1 is Wire's word

WIRE_EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("app_added"), st.sampled_from(["GROUP", "ONE_TO_ONE", None, "SELF"]), st.integers(1, 3)),
        st.tuples(st.just("user_joined"), st.integers(1, 2)),
        st.tuples(st.just("user_left"), st.integers(1, 2)),
        st.tuples(st.just("redis_restart")),
        st.tuples(st.just("removed")),
        st.tuples(st.just("conversation_deleted")),
    ),
    min_size=1,
    max_size=8,
)


def _redis_restart() -> None:
    """Redis runs without persistence: a restart forgets every key (the member cache included)."""
    client = get_redis()
    keys = [k for k in client.scan_iter(match="jeeves:*", count=500) if k != "jeeves:test-session-lock"]
    if keys:
        client.delete(*keys)


def _qid(qualified: str) -> dict[str, str]:
    ident, _, domain = qualified.partition("@")
    return {"id": ident, "domain": domain}


@pytest.mark.django_db
@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(events=WIRE_EVENTS)
def test_only_wire_makes_a_one_to_one_whatever_the_event_order(events):
    """Any order of app_added / user_joined (even before app_added) / user_left / removal, with Redis
    emptied between them: the conversation is a 1:1 exactly when Wire's last app_added said
    ONE_TO_ONE and nobody joined since; a channel Jeeves has left is in no scope; and a group never
    lists a decision the asker made in another channel."""
    org = "wire.example"
    conv = f"{uuid.uuid4()}@{org}"
    people = [f"{uuid.uuid4()}@{org}" for _ in range(8)]
    asker = people[0]
    elsewhere = factory.decision(factory.channel(org), "The team settled the elsewhere budget", by=[asker])
    present: list[str] = []
    expected = {"exists": False, "left": False, "type": None}
    # Wire sends a bot nothing about a conversation it is not in, and a deleted conversation never comes back:
    # a user_joined before app_added, or an app_added after conversation_deleted, is a reordering, and the end
    # state is the in-order one (joins kept for app_added, in Redis; a deleted conversation stays gone).
    deleted = False
    early_join = False
    with override_settings(JEEVES=wire_config()):
        for op in events:
            match op:
                case ("app_added", kind, n):
                    present = people[:n]
                    payload = sidecar_app_added(conv, [{"userId": u, "role": "MEMBER"} for u in [*present, APP_ID]])
                    if kind is None:
                        del payload["conversation"]["type"]
                    else:
                        payload["conversation"]["type"] = kind
                    if not deleted:
                        one = kind == "ONE_TO_ONE" and not early_join
                        expected.update(exists=True, left=False, type="ONE_TO_ONE" if one else "group")
                        early_join = False
                case ("user_joined", n):
                    joining = people[len(present) : len(present) + n]
                    present += joining
                    payload = {
                        "type": "user_joined",
                        "conversationId": _qid(conv),
                        "members": [{"userId": _qid(u), "role": "MEMBER"} for u in joining],
                    }
                    if expected["exists"] and joining:
                        expected["type"] = "group"
                    elif not expected["exists"] and joining:
                        early_join = True
                case ("user_left", n):
                    leaving, present = present[1 : 1 + n], present[:1] + present[1 + n :]
                    payload = {"type": "user_left", "conversationId": _qid(conv), "members": [_qid(u) for u in leaving]}
                case ("redis_restart",):
                    _redis_restart()
                    early_join = False
                    continue
                case ("removed",):
                    payload = {"type": "user_left", "conversationId": _qid(conv), "members": [_qid(APP_ID)]}
                    expected["left"] = expected["exists"]
                case ("conversation_deleted",):
                    payload = {"type": "conversation_deleted", "conversationId": _qid(conv)}
                    expected["left"] = expected["exists"]
                    deleted = True
            ingest.handle(sidecar.parse(payload))

    if not expected["exists"] or expected["left"]:
        with pytest.raises(UnknownChannel):
            RetrievalScope.for_asker(conv, asker)
        assert commands.list_decisions(conv, asker) == commands.NOT_ACQUAINTED
        return
    personal = expected["type"] == "ONE_TO_ONE"
    assert RetrievalScope.for_asker(conv, asker).personal is personal
    listed = commands.list_decisions(conv, asker)
    assert (elsewhere.friendly_id in listed) is personal, listed


@pytest.mark.django_db
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_personal_digest_holds_exactly_the_askers_records_in_scope(world, data):
    """`my week` (and the Monday note) lists only what the asker may see there, and all of their own of it."""
    from retrieval import digest

    scope = _asker(world, data)
    found = digest.build(scope, NOW)
    _check(world, scope, [("action", i) for i in found.actions] + [("decision", i) for i in found.decisions])
    visible = [k[1] for k in world.truth if k[0] == "action" and _visible(world, scope, k)]
    mine = Action.objects.filter(pk__in=visible, owner_id=scope.user_id, status="open")
    expected = {str(pk) for pk in mine.values_list("pk", flat=True)}
    assert set(found.actions) <= expected and len(found.actions) == min(len(expected), digest.ACTION_LIMIT)
    assert all(scope.user_id in world.truth[("decision", i)]["decided_by"] for i in found.decisions)
