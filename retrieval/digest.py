"""The personal digest: `@jeeves my week`, and a Monday 08:00 note in a 1:1 for who opts in (`digest on`).

The asker's open actions (overdue first, then by deadline) and the decisions of the past week that
name them. Read inside the asker's RetrievalScope, exactly as a question is answered there: in a 1:1
that is the organisation and the asker's own records (every channel they took part in); in a group
channel, that channel only. Nothing widens it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from knowledge import proactive
from knowledge.models import ChannelConfig
from retrieval.answer import voice
from retrieval.pack import local_date
from retrieval.scope import RetrievalScope, UnknownChannel

logger = logging.getLogger(__name__)

ACTION_LIMIT = 15
DECISION_LIMIT = 10
PAST = timedelta(days=7)
NOT_ACQUAINTED = "I'm afraid I have not yet been introduced to this conversation."


@dataclass(frozen=True)
class Digest:
    text: str
    actions: list[str] = field(default_factory=list)  # record ids, in the order listed
    decisions: list[str] = field(default_factory=list)


def _rows(sql: str, params: dict[str, object]) -> list[tuple]:
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def _zone(channel_id: str):
    from knowledge.channels import channel_zone

    name = ChannelConfig.objects.filter(channel_id=channel_id).values_list("timezone", flat=True).first()
    return channel_zone(name)


def build(scope: RetrievalScope, now: datetime | None = None) -> Digest:
    """The digest of `scope`'s asker at `now`."""
    now = now or timezone.now()
    zone = _zone(scope.channel_id)
    since = now - PAST
    params = {**scope.params(), "now": now, "since": since}
    actions = _rows(
        f"""SELECT a.id::text, a.friendly_id, a.description, a.deadline, COALESCE(c.channel_name, a.channel_id)
            FROM actions a LEFT JOIN channel_config c ON c.channel_id = a.channel_id
            WHERE {scope.actions("a")} AND a.owner_id = %(scope_user)s AND a.status = 'open'
            ORDER BY a.deadline < %(now)s DESC NULLS LAST, a.deadline NULLS LAST, a.created_at
            LIMIT %(n)s""",
        {**params, "n": ACTION_LIMIT},
    )
    decisions = _rows(
        f"""SELECT d.id::text, d.friendly_id, d.summary, d.decided_at, COALESCE(c.channel_name, d.channel_id)
            FROM decisions d LEFT JOIN channel_config c ON c.channel_id = d.channel_id
            WHERE {scope.decisions("d")} AND d.decided_by @> ARRAY[%(scope_user)s]::text[]
              AND d.status = 'active' AND d.decided_at >= %(since)s AND d.decided_at <= %(now)s
            ORDER BY d.decided_at DESC LIMIT %(n)s""",
        {**params, "n": DECISION_LIMIT},
    )

    def day(moment: datetime) -> str:
        return local_date(moment, zone, now)

    def line(fid: str, text: str, channel: str, when: str | None) -> str:
        # In a 1:1 each line names its channel; in a group channel every line is that channel's.
        said = [part for part in (channel if scope.personal else None, when) if part]
        return f"- {fid}{' (' + ', '.join(said) + ')' if said else ''}: {text}"

    lines = [f"Your week, if I may, as of {day(now)}:"]
    for title, rows, when in (
        ("Overdue:", [r for r in actions if r[3] is not None and r[3] < now], "was due"),
        ("Coming up:", [r for r in actions if r[3] is not None and r[3] >= now], "due"),
        ("Without a deadline:", [r for r in actions if r[3] is None], None),
    ):
        if rows:
            lines.append(title)
            lines += [line(fid, text, ch, when and f"{when} {day(due)}") for _, fid, text, due, ch in rows]
    if decisions:
        lines.append("Decisions of the past week that name you:")
        lines += [line(fid, text, ch, day(at)) for _, fid, text, at, ch in decisions]
    if not (actions or decisions):
        lines = [
            "I have nothing on record for you this week, I'm pleased to say: no open actions, and no decisions "
            f"naming you since {day(since)}."
        ]
    return Digest(voice("\n".join(lines)), [r[0] for r in actions], [r[0] for r in decisions])


def my_week(channel_id: str, user_id: str) -> str:
    """The reply to `@jeeves my week`."""
    try:
        scope = RetrievalScope.for_asker(channel_id, user_id)
    except UnknownChannel:
        return NOT_ACQUAINTED
    return build(scope).text


def send_due(now: datetime | None = None) -> int:
    """Beat, hourly: the Monday 08:00 (1:1-local) digest of every subscriber, once per Monday; returns how
    many went out. A subscription whose conversation is no longer a 1:1 is skipped: its scope would be a
    group channel's, and a personal note does not belong there."""
    from pipeline import claimcheck

    now = now or timezone.now()
    sent = 0
    for subscription, local_day in proactive.claim_due_digests(now):
        try:
            scope = RetrievalScope.for_asker(subscription.channel_id, subscription.user_id)
        except UnknownChannel:
            continue
        if not scope.personal:
            logger.info("digest skipped, not a 1:1 any more: channel=%s", subscription.channel_id)
            continue
        ref = f"digest:{local_day.isoformat()}"
        claimcheck.post(subscription.channel_id, ref, build(scope, now).text, proactive="digest")
        sent += 1
    logger.info("digests sent: %d", sent)
    return sent
