"""`jeeves audit [--json] [--channel CH]`: check on the running system that extract-and-forget and
consent hold (docs/guarantees.md §1, §3), print per-channel counts, and exit non-zero when a promise is broken.

Reads Redis (key names, TTLs, list lengths) and Postgres through the ORM only. Window entries are
parsed for their arrival time and counted; no message text is ever printed.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db.models import Count, Q
from django.db.models.functions import Coalesce

from ground import keys
from ground.redis import get_redis
from knowledge.models import (
    Action,
    ChannelConfig,
    ChannelState,
    ConversationSignal,
    Decision,
    Entity,
    EntityRelationship,
    MessageReceipt,
    PipelineCounter,
    Summary,
)

CHECKS: dict[str, str] = {
    "redis.persistence": 'Redis writes nothing to disk (save "", appendonly no)',
    "redis.ttl": "every claim-check and window key expires, no later than configured",
    "redis.window": "no window holds more than JEEVES_WINDOW_SIZE entries or entries past max age",
    "consent.redis": "no paused/secure channel has a window or parked text",
    "source_ref": "source_ref holds only wire_msg_ids and a timestamp_range",
    "consent.receipts": "no receipt of a message sent inside a secure range",
    "restatement": "records restate: no 10-word run; median kept share <= 0.6, none >= 0.9 (messages of 8+ words)",
}
KEPT_MEDIAN_MAX = 0.6
KEPT_COPY = 0.9

SOURCE_REF_KEYS = {"wire_msg_ids", "timestamp_range"}
RANGE_KEYS = {"start", "end"}
# A Wire message id is a UUID (evalset ids are short tokens): anything with spaces or longer is not an id.
_MSG_ID = re.compile(r"^\S{1,128}$")
_SHOWN = 5  # ids listed per problem; the count says how many more


@dataclass(frozen=True)
class Finding:
    check: str
    detail: str
    channel: str | None = None


@dataclass
class ChannelCounts:
    state: str | None = None
    window: int = 0
    text_keys: int = 0
    receipts: dict[str, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    records: dict[str, int] = field(default_factory=dict)


@dataclass
class Report:
    channels: dict[str, ChannelCounts] = field(default_factory=lambda: defaultdict(ChannelCounts))
    problems: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    redis_config: dict[str, str | None] = field(default_factory=dict)
    restatement: dict[str, Any] = field(default_factory=dict)

    def fail(self, check: str, detail: str, channel: str | None = None) -> None:
        self.problems.append(Finding(check, detail, channel))

    def warn(self, check: str, detail: str, channel: str | None = None) -> None:
        self.warnings.append(Finding(check, detail, channel))

    def status(self, check: str) -> str:
        if any(p.check == check for p in self.problems):
            return "fail"
        return "warn" if any(w.check == check for w in self.warnings) else "ok"

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": not self.problems,
            "checks": {name: self.status(name) for name in CHECKS},
            "problems": [asdict(p) for p in self.problems],
            "warnings": [asdict(w) for w in self.warnings],
            "redis": self.redis_config,
            "restatement": self.restatement,
            "channels": {ch: asdict(c) for ch, c in sorted(self.channels.items())},
        }


class Command(BaseCommand):
    help = "Check that extract-and-forget and consent hold on the running system; exit 1 when one does not."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
        parser.add_argument("--channel", help='audit only this channel, "{conversationId}@{domain}"')

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = audit(options.get("channel"))
        except redis.ConnectionError as exc:
            raise CommandError(f"Redis is unreachable ({exc}): nothing was audited", returncode=2) from exc
        if options["json"]:
            self.stdout.write(json.dumps(report.to_json(), ensure_ascii=False))
        else:
            self.stdout.write(render(report))
        if report.problems:
            raise CommandError(f"audit failed: {len(report.problems)} problem(s)", returncode=1)


def audit(channel_id: str | None = None) -> Report:
    """Run every check; `channel_id` narrows all but the Redis configuration check to one channel."""
    channels = ChannelConfig.objects.order_by("channel_id")
    if channel_id is not None:
        channels = channels.filter(channel_id=channel_id)
        if not channels.exists():
            raise CommandError(f"no channel {channel_id!r} in channel_config")
    configs = {c.channel_id: c for c in channels}
    report = Report()
    for cid, config in configs.items():
        report.channels[cid].state = config.state
    client = get_redis()
    _check_persistence(client, report)
    _check_redis_keys(client, report, configs, channel_id)
    _check_source_refs(report, channel_id)
    _check_secure_receipts(report, configs.values())
    _count(report, channel_id)
    _check_restatement(report, channel_id)
    return report


def _check_restatement(report: Report, channel_id: str | None) -> None:
    """Figures of what stored records keep of their messages (measured when each was written)."""
    shares: list[float] = []
    copies = 0
    longest = 0
    for model in (Decision, Action, ConversationSignal):
        rows = model.objects.all() if channel_id is None else model.objects.filter(channel_id=channel_id)
        for cid, figures in rows.values_list("channel_id", "restatement"):
            if not figures:
                continue  # written before the figures were kept
            longest = max(longest, int(figures.get("longest_run", 0)))
            if figures.get("long_sources"):
                share = float(figures.get("kept_share", 0.0))
                shares.append(share)
                if share >= KEPT_COPY:
                    copies += 1
                    report.warn("restatement", f"a {model._meta.verbose_name} keeps {share:.0%} of its message", cid)
    received = sum(sum(c.receipts.values()) for c in report.channels.values())
    signals = sum(c.records.get("signals", 0) for c in report.channels.values())
    median = round(statistics.median(shares), 3) if shares else None
    report.restatement = {
        "records_measured": len(shares),
        "kept_share_median": median,
        "kept_ge_0_9": copies,
        "longest_run": longest,
        "signals_per_100_messages": round(100 * signals / received, 1) if received else None,
    }
    if longest >= 10:
        report.fail("restatement", f"a stored record repeats {longest} consecutive words of a message")
    if median is not None and median > KEPT_MEDIAN_MAX:
        report.warn("restatement", f"median kept share {median:.2f} is over {KEPT_MEDIAN_MAX}")


# --------------------------------------------------------------------------- Redis


def _check_persistence(client: redis.Redis, report: Report) -> None:
    try:
        save = client.config_get("save").get("save")
        appendonly = client.config_get("appendonly").get("appendonly")
    except redis.ResponseError as exc:  # managed Redis often renames or disables CONFIG
        report.warn("redis.persistence", f"CONFIG GET refused ({exc}); persistence could not be checked")
        return
    report.redis_config = {"save": save, "appendonly": appendonly}
    if save:
        report.fail("redis.persistence", f'RDB snapshots are on (save "{save}"): the window can reach disk')
    if appendonly != "no":
        report.fail("redis.persistence", f"AOF is on (appendonly {appendonly}): the window can reach disk")


def _scan(client: redis.Redis, pattern: str) -> list[str]:
    return sorted(client.scan_iter(match=pattern, count=1000))


def _family_keys(client: redis.Redis, family: keys.Family, channel_id: str | None) -> list[str]:
    """The family's keys, or the channel's: its one key when that is all the family holds of it."""
    if channel_id is None:
        return _scan(client, family.pattern())
    if family.parts == ("channel_id",):
        return [k for k in [family.key(channel_id)] if client.exists(k)]
    return _scan(client, family.pattern(channel_id))


def _check_redis_keys(
    client: redis.Redis, report: Report, configs: dict[str, ChannelConfig], channel_id: str | None
) -> None:
    """Every key family that may hold text (ground/keys.py: TEXT_FAMILIES) through its check; then consent."""
    holding: set[str] = set()
    for family in keys.TEXT_FAMILIES:
        check = TEXT_CHECKS[family.name]
        holding |= check(client, report, family, _family_keys(client, family, channel_id), configs)

    # Consent: a channel that is paused or secure holds no text at all.
    for cid in sorted(holding):
        config = configs.get(cid)
        counts = report.channels[cid]
        if config is None:
            report.warn("consent.redis", "text in Redis for a channel with no channel_config row", cid)
            continue
        if config.state in (ChannelState.PAUSED, ChannelState.SECURE):
            if counts.window:
                report.fail("consent.redis", f"{config.state} channel has a window of {counts.window} entries", cid)
            if counts.text_keys:
                report.fail("consent.redis", f"{config.state} channel has {counts.text_keys} parked text key(s)", cid)
        elif config.left_at is not None and (counts.window or counts.text_keys):
            report.warn("consent.redis", "Jeeves left this channel but text of it is still in Redis", cid)


def _check_claim_checks(
    client: redis.Redis, report: Report, family: keys.Family, found: list[str], configs: dict[str, ChannelConfig]
) -> set[str]:
    """Claim-check keys: a TTL, no longer than the family's (JEEVES_QUEUE_TTL_S). Returns the channels holding some."""
    limit = family.ttl_s()
    pipe = client.pipeline(transaction=False)
    for key in found:
        pipe.ttl(key)
    no_ttl: dict[str, list[str]] = defaultdict(list)
    too_long: dict[str, list[str]] = defaultdict(list)
    parked: Counter[str] = Counter()
    for key, ttl in zip(found, pipe.execute(), strict=True):
        if ttl == -2:  # expired between SCAN and TTL
            continue
        cid = family.channel_of(key, configs)
        parked[cid] += 1
        if ttl == -1:
            no_ttl[cid].append(key)
        elif ttl > limit:
            too_long[cid].append(key)
    for cid, names in no_ttl.items():
        report.fail("redis.ttl", f"{len(names)} claim-check key(s) with no expiry: {_some(names)}", cid)
    for cid, names in too_long.items():
        report.fail(
            "redis.ttl",
            f"{len(names)} claim-check key(s) expire later than {family.ttl_setting}: {_some(names)}",
            cid,
        )
    for cid, n in parked.items():
        report.channels[cid].text_keys = n
    return set(parked)


def _check_windows(
    client: redis.Redis, report: Report, family: keys.Family, found: list[str], configs: dict[str, ChannelConfig]
) -> set[str]:
    """Windows: a TTL no longer than the family's (JEEVES_WINDOW_MAX_AGE_S), no more than window_size entries,
    no stale entries. Returns the channels with a window key."""
    cfg = settings.JEEVES
    limit = family.ttl_s()
    cutoff = time.time() - cfg.window_max_age_s
    for key in found:
        cid = family.channel_of(key)
        pipe = client.pipeline(transaction=False)
        pipe.type(key)
        pipe.ttl(key)
        pipe.lrange(key, 0, -1)
        kind, ttl, entries = pipe.execute(raise_on_error=False)
        if kind != "list":
            if kind != "none":
                report.fail("redis.window", f"{key} is a {kind}, not a list", cid)
            continue
        size = len(entries)
        stale = sum(1 for raw in entries if _received_at(raw) < cutoff)
        del entries  # text: counted, never kept or shown
        report.channels[cid].window = size
        if ttl == -1:
            report.fail("redis.ttl", f"window {key} has no expiry", cid)
        elif ttl > limit:
            report.fail("redis.ttl", f"window {key} expires in {ttl}s, later than {family.ttl_setting}", cid)
        if size > cfg.window_size:
            report.fail(
                "redis.window", f"window holds {size} entries, more than JEEVES_WINDOW_SIZE={cfg.window_size}", cid
            )
        if stale:
            # window.read() ignores these but does not delete them: text outlives the age bound in RAM.
            report.warn("redis.window", f"{stale} window entries older than JEEVES_WINDOW_MAX_AGE_S still held", cid)
    return {family.channel_of(key) for key in found}


# The check of each key family that may hold text, by family name: a family ground/keys.py marks as text
# and that has no check here fails the audit's tests (tests/ground/test_keys.py).
TEXT_CHECKS = {keys.CLAIM_CHECK.name: _check_claim_checks, keys.WINDOW.name: _check_windows}


def _received_at(raw: str) -> float:
    try:
        return float(json.loads(raw).get("received_at", 0.0))
    except (ValueError, TypeError, AttributeError):
        return 0.0  # unparseable: treat as stale, it should not be there


def _some(items: list[str]) -> str:
    shown = ", ".join(items[:_SHOWN])
    return shown + (f" (+{len(items) - _SHOWN} more)" if len(items) > _SHOWN else "")


# --------------------------------------------------------------------------- Postgres


def source_ref_problems(ref: Any) -> list[str]:
    """What is wrong with one source_ref (empty when it points to ids and a time range only)."""
    if not isinstance(ref, dict):
        return [f"is a {type(ref).__name__}, not an object"]
    problems = []
    extra = sorted(set(ref) - SOURCE_REF_KEYS)
    if extra:
        problems.append(f"holds key(s) that could carry content: {', '.join(k[:40] for k in extra)}")
    ids = ref.get("wire_msg_ids")
    if not isinstance(ids, list) or not ids:
        problems.append("wire_msg_ids is missing or empty")
    elif not all(isinstance(i, str) and _MSG_ID.match(i) for i in ids):
        problems.append("wire_msg_ids holds something that is not a message id")
    span = ref.get("timestamp_range")
    if not isinstance(span, dict) or set(span) != RANGE_KEYS:
        problems.append("timestamp_range is missing or not {start, end}")
    elif not all(v is None or _is_iso(v) for v in span.values()):
        problems.append("timestamp_range holds something that is not a timestamp")
    return problems


def _is_iso(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def _source_rows(channel_id: str | None) -> Iterator[tuple[str, str, str, Any]]:
    """(kind, channel, label, source_ref) of every record that must point back to messages."""
    for kind, model, label in (
        ("decision", Decision, "friendly_id"),
        ("action", Action, "friendly_id"),
        ("signal", ConversationSignal, "id"),
    ):
        rows = model.objects.all() if channel_id is None else model.objects.filter(channel_id=channel_id)
        for cid, name, ref in rows.values_list("channel_id", label, "source_ref").iterator(chunk_size=2000):
            yield kind, cid, str(name), ref
    rels = EntityRelationship.objects.filter(source_ref__isnull=False)
    if channel_id is not None:
        rels = rels.filter(channel_ids__contains=[channel_id])
    for ids, rid, ref in rels.values_list("channel_ids", "id", "source_ref").iterator(chunk_size=2000):
        yield "relationship", ",".join(ids) or "-", str(rid), ref


def _check_source_refs(report: Report, channel_id: str | None) -> None:
    bad: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for kind, cid, name, ref in _source_rows(channel_id):
        if ref is None and kind == "relationship":
            continue
        for problem in source_ref_problems(ref):
            bad[(cid, kind, problem)].append(name)
    for (cid, kind, problem), names in sorted(bad.items()):
        report.fail("source_ref", f"{len(names)} {kind}(s) whose source_ref {problem}: {_some(names)}", cid)


def _check_secure_receipts(report: Report, configs: Iterable[ChannelConfig]) -> None:
    for config in configs:
        ranges = Q()
        for entry in config.secure_ranges or []:
            start = entry.get("start") if isinstance(entry, dict) else None
            end = entry.get("end") if isinstance(entry, dict) else None
            if not _is_iso(start) or not (end is None or _is_iso(end)):
                report.fail("consent.receipts", f"malformed secure_ranges entry {entry!r}", config.channel_id)
                continue
            # [start, end): the message that ends secure mode is sent before `end` and is a command, unrecorded.
            span = Q(at__gte=datetime.fromisoformat(start))
            if end is not None:
                span &= Q(at__lt=datetime.fromisoformat(end))
            ranges |= span
        if not ranges:
            continue
        inside = list(
            MessageReceipt.objects.filter(channel_id=config.channel_id)
            .annotate(at=Coalesce("sent_at", "received_at"))
            .filter(ranges)
            .order_by("at")
            .values_list("wire_msg_id", flat=True)
        )
        if inside:
            report.fail(
                "consent.receipts",
                f"{len(inside)} receipt(s) of messages sent while secure: {_some(inside)}",
                config.channel_id,
            )


def _count(report: Report, channel_id: str | None) -> None:
    def scoped(qs, field_name: str = "channel_id"):
        return qs if channel_id is None else qs.filter(**{field_name: channel_id})

    for row in scoped(MessageReceipt.objects.values("channel_id", "outcome").annotate(n=Count("id"))).order_by():
        report.channels[row["channel_id"]].receipts[row["outcome"]] = row["n"]
    for cid, name, value in scoped(PipelineCounter.objects.all()).values_list("channel_id", "name", "value"):
        report.channels[cid].counters[name] = value
    for kind, model in (("decisions", Decision), ("actions", Action), ("signals", ConversationSignal)):
        for row in scoped(model.objects.values("channel_id").annotate(n=Count("pk"))).order_by():
            report.channels[row["channel_id"]].records[kind] = row["n"]
    summaries = scoped(Summary.objects.filter(scope_type="channel"), "scope_id")
    for row in summaries.values("scope_id").annotate(n=Count("pk")).order_by():
        report.channels[row["scope_id"]].records["summaries"] = row["n"]
    # Entities and relationships are shared across an organisation: count those each channel mentioned.
    for cid in list(report.channels):
        entities = Entity.objects.filter(channel_ids__contains=[cid], deleted=False).count()
        rels = EntityRelationship.objects.filter(channel_ids__contains=[cid]).count()
        for kind, n in (("entities", entities), ("relationships", rels)):
            if n:
                report.channels[cid].records[kind] = n


# --------------------------------------------------------------------------- output

RECORD_KINDS = ("decisions", "actions", "signals", "entities", "relationships", "summaries")


def render(report: Report) -> str:
    lines = [f"Jeeves audit: {len(report.channels)} channel(s)", ""]
    for name, what in CHECKS.items():
        lines.append(f"  {report.status(name).upper():<5} {name:<18} {what}")
    for title, findings in (("Problems", report.problems), ("Warnings", report.warnings)):
        if findings:
            lines += ["", f"{title} ({len(findings)}):"]
            lines += [f"  [{f.check}] {f.channel or '-'}: {f.detail}" for f in findings]
    if report.restatement:
        r = report.restatement
        lines += [
            "",
            f"Restatement: {r['records_measured']} records measured; median kept share {r['kept_share_median']};"
            f" {r['kept_ge_0_9']} keep >= 90 %; longest shared run {r['longest_run']} words;"
            f" signals per 100 messages received: {r['signals_per_100_messages']}",
        ]
    lines += ["", *_table(report), ""]
    if report.problems:
        lines.append(f"FAILED: {len(report.problems)} problem(s).")
    else:
        lines.append(
            "OK: every promise checked holds." + (f" {len(report.warnings)} warning(s)." if report.warnings else "")
        )
    return "\n".join(lines)


def _table(report: Report) -> list[str]:
    channels = sorted(report.channels.items())
    if not channels:
        return ["(no channels)"]
    outcomes = [o for o in MessageReceipt.Outcome.values if any(o in c.receipts for _, c in channels)]
    counters = sorted({name for _, c in channels for name in c.counters})
    kinds = [k for k in RECORD_KINDS if any(k in c.records for _, c in channels)]
    header = ["channel", "state", "window", "text", "receipts", *outcomes, *counters, *kinds]
    rows = [
        [
            cid,
            c.state or "?",
            str(c.window),
            str(c.text_keys),
            str(sum(c.receipts.values())),
            *(str(c.receipts.get(o, 0)) for o in outcomes),
            *(str(c.counters.get(n, 0)) for n in counters),
            *(str(c.records.get(k, 0)) for k in kinds),
        ]
        for cid, c in channels
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        )

    return [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]
