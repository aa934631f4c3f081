"""`jeeves replay PATH`: feed evalset conversations through the real bridge endpoint of a running
web server (sidecar protocol v1), pace with the pipeline, wait for it to drain, print what was extracted.

Workers must be running (`jeeves up` does). The file's member with handle `jeeves` stands for the
app and is sent as JEEVES_WIRE_APP_ID, which the web server must share.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

_BUSY = ("queued", "pending_extract")
_QUEUES = ("classify", "extract", "embed")


def add_conversation_arguments(parser: Any) -> None:
    """PATH and --url, as `replay` and `eval` take them."""
    parser.add_argument("path", help="a conversation file in the evalset format, or a folder of them")
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the Jeeves web server (default: %(default)s)")


def conversation_files(path: Path) -> list[Path]:
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    found = []
    for file in files:
        data = json.loads(file.read_text(encoding="utf-8"))
        if isinstance(data, dict) and "messages" in data and "channel" in data:
            found.append(file)
    if not found:
        raise CommandError(f"no conversation file found at {path}")
    return found


class Command(BaseCommand):
    help = "Replay evalset conversation file(s) through the bridge at --url and print what Jeeves extracted."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        add_conversation_arguments(parser)
        parser.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
        parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the pipeline to drain")
        parser.add_argument("--reset", action="store_true", help="forget what Jeeves knows of the channel first")

    def handle(self, *args: Any, **options: Any) -> None:
        from django.conf import settings

        # Unset JEEVES_WIRE_SECRET / JEEVES_WIRE_APP_ID resolve to the same local values in the web
        # server of `jeeves up` (settings keeps them under .jeeves/), so the replay needs no configuration.
        cfg = settings.JEEVES
        replayer = Replayer(options["url"], cfg.wire_secret, cfg.wire_app_id, options["timeout"], quiet=options["json"])
        channels = []
        for file in conversation_files(Path(options["path"])):
            conv = json.loads(file.read_text(encoding="utf-8"))
            if options["reset"]:
                _reset(conv["channel"]["id"])
            since = timezone.now()
            stats = replayer.replay(conv)
            channels.append(collect(conv["channel"]["id"], conv["id"], stats, since))
        if options["json"]:
            self.stdout.write(json.dumps({"channels": channels}, ensure_ascii=False, default=str))
        else:
            for channel in channels:
                self.stdout.write(render(channel))


def _reset(channel_id: str) -> None:
    from ground.redis import forget_channel_keys
    from knowledge import forgetting

    # Every table, and every Redis key naming the channel (window, text, members, extraction locks,
    # and the bridge's once-only markers: a second replay within their TTL would otherwise skip its
    # `@jeeves pause` as a redelivery and extract what it must ignore).
    forgetting.purge_channel(channel_id)
    forget_channel_keys(channel_id)


class Replayer:
    def __init__(self, url: str, secret: str, app_id: str, timeout: float, *, quiet: bool) -> None:
        import httpx

        self.client = httpx.Client(
            base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {secret}"}, timeout=30.0
        )
        self.app_id = app_id
        self.timeout = timeout
        self.quiet = quiet

    # ------------------------------------------------------------------ protocol

    def _qid(self, conv: dict, user: str) -> dict[str, str]:
        org = conv["channel"]["org"]
        if user == _bot_uuid(conv):
            ident, _, domain = self.app_id.partition("@")
            return {"id": ident, "domain": domain}
        return {"id": user, "domain": org}

    def _post(self, event: dict) -> str:
        response = self.client.post("/wire/events", json=event)
        if response.status_code >= 400:
            try:  # the bridge's one-line reason names the field and the fault, never a value
                reason = response.json().get("error", "")
            except ValueError:
                reason = ""
            raise CommandError(
                f"the bridge answered {response.status_code} to a {event['type']} event"
                + (f": {reason}" if reason else "")
            )
        return str(response.json().get("status", ""))

    def replay(self, conv: dict) -> dict[str, int]:
        from django.conf import settings

        channel_id = conv["channel"]["id"]
        ident, _, domain = channel_id.partition("@")
        conv_qid = {"id": ident, "domain": domain}
        self._post(
            {
                "eventId": str(uuid.uuid4()),
                "type": "app_added",
                "conversation": {"id": conv_qid, "name": conv["channel"].get("name"), "teamId": None, "type": "GROUP"},
                "members": [
                    {
                        "userId": self._qid(conv, m["id"]),
                        "role": "MEMBER",
                        "name": m.get("name"),
                        "handle": m.get("handle"),
                    }
                    for m in conv["channel"]["members"]
                ],
                "timezone": conv["channel"].get("timezone"),
            }
        )
        half_window = max(1, settings.JEEVES.window_size // 2)
        outcomes: dict[str, int] = {}
        messages = conv["messages"]
        progress = _progress(len(messages), conv["id"], disable=self.quiet or not sys.stderr.isatty())
        bot = _bot_uuid(conv)
        for message in messages:
            if bot is not None and any(m["user"] == bot for m in message.get("mentions", [])):
                # Said to Jeeves (a pause, secure mode, a question): in the live conversation the pipeline had
                # handled what came before, minutes or days earlier. Posted at once, a pause or secure mode
                # would drop the earlier messages still queued (docs/guarantees.md §3) and a question would
                # be answered from knowledge not yet extracted.
                self._wait(lambda: _busy(channel_id) == 0, "the channel's pipeline to catch up")
            status = self._post(
                {
                    "eventId": str(uuid.uuid4()),
                    "type": "text_message",
                    "conversationId": conv_qid,
                    "sender": self._qid(conv, message["author"]),
                    "messageId": message["id"],
                    "timestamp": message["ts"],
                    "text": message["text"],
                    "mentions": [
                        {"userId": self._qid(conv, m["user"]), "offset": m["offset"], "length": m["length"]}
                        for m in message.get("mentions", [])
                    ],
                    "quotedMessageId": None,
                    "expiresAfterMillis": None,
                }
            )
            outcomes[status] = outcomes.get(status, 0) + 1
            if progress is not None:
                progress.update(1)
            # Pace: when half a window waits for the pipeline, let it catch up so nothing is evicted.
            if _busy(channel_id) >= half_window:
                self._wait(lambda: _busy(channel_id) == 0, "the channel's extraction watermark")
        if progress is not None:
            progress.close()
        self._wait(lambda: _busy(channel_id) == 0 and _queues_empty(), "the queues to drain", quiet_s=2.0)
        return outcomes

    def _wait(self, done: Any, what: str, quiet_s: float = 0.0) -> None:
        deadline = time.monotonic() + self.timeout
        calm_since: float | None = None
        while time.monotonic() < deadline:
            if done():
                calm_since = calm_since or time.monotonic()
                if time.monotonic() - calm_since >= quiet_s:
                    return
            else:
                calm_since = None
            time.sleep(0.25)
        raise CommandError(f"gave up after {self.timeout:.0f}s waiting for {what}: are the workers running?")


def _bot_uuid(conv: dict) -> str | None:
    return next((m["id"] for m in conv["channel"]["members"] if (m.get("handle") or "").lower() == "jeeves"), None)


def _progress(total: int, label: str, *, disable: bool) -> Any:
    if disable:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=label, unit="msg", file=sys.stderr)


def _busy(channel_id: str) -> int:
    from knowledge.models import MessageReceipt

    return MessageReceipt.objects.filter(channel_id=channel_id, outcome__in=_BUSY).count()


def _queues_empty() -> bool:
    from ground.queues import queue_lists
    from ground.redis import get_redis

    client = get_redis()
    return all(client.llen(name) == 0 for q in _QUEUES for name in queue_lists(q))


# --------------------------------------------------------------------------- what was extracted


def collect(
    channel_id: str, conversation: str, outcomes: dict[str, int], since: datetime | None = None
) -> dict[str, Any]:
    """The channel's knowledge as the issue's JSON object (ids, synthesised text, source refs), Tier 1's
    categories per message, and the model calls made for the channel (since `since`: the replay's start)."""
    from knowledge.models import (
        Action,
        ChannelConfig,
        ConversationSignal,
        Decision,
        Entity,
        EntityRelationship,
        MessageReceipt,
    )

    receipts = MessageReceipt.objects.filter(channel_id=channel_id)
    from pipeline.offline.deadlines import local_date

    config = ChannelConfig.objects.filter(channel_id=channel_id).first()
    zone = config.timezone if config else "UTC"
    return {
        "channel_id": channel_id,
        "conversation": conversation,
        "decisions": [
            {
                "id": d.friendly_id,
                "summary": d.summary,
                "decided_by": list(d.decided_by),
                "decided_at": d.decided_at.isoformat(),
                "status": d.status,
                "confidence": d.confidence,
                "source_ref": d.source_ref,
            }
            for d in Decision.objects.filter(channel_id=channel_id).order_by("friendly_id")
        ],
        "actions": [
            {
                "id": a.friendly_id,
                "description": a.description,
                "owner_id": a.owner_id,
                "deadline": a.deadline.isoformat() if a.deadline else None,
                "due": local_date(a.deadline, zone).isoformat() if a.deadline else None,  # the channel's day
                "status": a.status,
                "confidence": a.confidence,
                "source_ref": a.source_ref,
            }
            for a in Action.objects.filter(channel_id=channel_id).order_by("friendly_id")
        ],
        "entities": [
            {"name": e.name, "type": e.entity_type, "aliases": list(e.aliases)}
            for e in Entity.objects.filter(channel_ids__contains=[channel_id], deleted=False).order_by("name")
        ],
        "relationships": [
            {"source": r.source.name, "target": r.target.name, "relationship": r.relationship}
            for r in EntityRelationship.objects.filter(channel_ids__contains=[channel_id])
            .select_related("source", "target")
            .order_by("source__name", "relationship", "target__name")
        ],
        "signals": [
            {"signal_type": s.signal_type, "summary": s.summary, "source_ref": s.source_ref}
            for s in ConversationSignal.objects.filter(channel_id=channel_id).order_by("occurred_at")
        ],
        "messages": {
            "received": receipts.count(),
            "dropped": outcomes.get("dropped", 0) + receipts.filter(outcome=MessageReceipt.Outcome.DROPPED).count(),
            "expired": receipts.filter(outcome=MessageReceipt.Outcome.EXPIRED).count(),
        },
        **conflicts(channel_id),
        # Labels only (never text): what Tier 1 made of each message it classified.
        "categories": dict(receipts.filter(tier__gte=1).values_list("wire_msg_id", "categories")),
        "llm_calls": llm_usage(channel_id, since),
    }


def conflicts(channel_id: str) -> dict[str, list[list[str]]]:
    """The contradiction duty's outcome as decision ids: `contradictions`, the pairs flagged to be asked (held,
    raised or answered; not those withdrawn unasked), and `supersessions`, the replacements applied unasked."""
    from knowledge.models import ConflictStatus, ConflictVerdict, DecisionConflict

    pairs = (
        DecisionConflict.objects.filter(channel_id=channel_id)
        .exclude(verdict=ConflictVerdict.COMPATIBLE)
        .exclude(status=ConflictStatus.WITHDRAWN)
        .select_related("older", "newer")
        .order_by("older__friendly_id", "newer__friendly_id")
    )
    applied = [p for p in pairs if p.status == ConflictStatus.SUPERSEDED and not p.resolved_by]
    return {
        "contradictions": [[p.older.friendly_id, p.newer.friendly_id] for p in pairs if p not in applied],
        "supersessions": [[p.older.friendly_id, p.newer.friendly_id] for p in applied],
    }


def llm_usage(channel_id: str, since: datetime | None) -> dict[str, dict[str, int]]:
    """Per slot: calls, fallbacks and tokens recorded in `llm_calls` for the channel (since `since`)."""
    from django.db.models import Count, Q, Sum

    from knowledge.models import LlmCall

    calls = LlmCall.objects.filter(channel_id=channel_id)
    if since is not None:
        calls = calls.filter(created_at__gte=since)
    rows = calls.values("slot").annotate(
        calls=Count("id"),
        local=Count("id", filter=Q(model="local")),
        fallbacks=Count("id", filter=Q(fallback_used=True)),
        prompt_tokens=Sum("prompt_tokens", default=0),
        completion_tokens=Sum("completion_tokens", default=0),
    )
    return {row.pop("slot"): row for row in rows.order_by("slot")}


def render(channel: dict[str, Any]) -> str:
    lines = [f"\n{channel['conversation']}  ({channel['channel_id']})"]
    m = channel["messages"]
    lines.append(f"  messages: {m['received']} received, {m['dropped']} dropped, {m['expired']} expired")
    lines.append(f"  decisions ({len(channel['decisions'])}):")
    lines += [f"    {d['id']}  {d['summary']}  [{d['confidence']:.2f}]" for d in channel["decisions"]]
    lines.append(f"  actions ({len(channel['actions'])}):")
    for a in channel["actions"]:
        due = f", due {a['due']}" if a.get("due") else ""
        lines.append(f"    {a['id']}  {a['description']}  ({a['status']}{due})")
    lines.append(f"  entities: {len(channel['entities'])}, relationships: {len(channel['relationships'])}")
    lines.append(f"  signals: {len(channel['signals'])}")
    return "\n".join(lines) + "\n"
