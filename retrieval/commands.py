"""Commands that read the knowledge: decisions, actions (mine), status, catch me up, a question.

Read-only: each returns the reply text in Jeeves' voice; the bridge's command table
(wire_bridge/dispatch.py) calls them on the `respond` queue and sends the text. Lists are read inside the
asker's RetrievalScope, like every question. Commands that write (done, supersede, context, digest) go
through `knowledge` services from the bridge.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from knowledge.channels import channel_zone
from knowledge.models import ChannelConfig
from retrieval.answer import voice
from retrieval.ask import ask
from retrieval.pack import local_date
from retrieval.scope import RetrievalScope, UnknownChannel

logger = logging.getLogger(__name__)

NOT_ACQUAINTED = "I'm afraid I have not yet been introduced to this conversation."
LIST_LIMIT = 10


def _rows(sql: str, params: dict[str, object]) -> list[tuple]:
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def answer_question(channel_id: str, user_id: str, question: str) -> str:
    return ask(channel_id, user_id, question).answer


def list_decisions(channel_id: str, user_id: str) -> str:
    try:
        scope = RetrievalScope.for_asker(channel_id, user_id)
    except UnknownChannel:
        return NOT_ACQUAINTED
    rows = _rows(
        f"""SELECT d.friendly_id, d.summary, d.decided_at, COALESCE(
                   (SELECT c.channel_name FROM channel_config c WHERE c.channel_id = d.channel_id), d.channel_id)
            FROM decisions d WHERE {scope.decisions("d")} AND d.status = 'active'
            ORDER BY d.decided_at DESC LIMIT %(n)s""",
        {**scope.params(), "n": LIST_LIMIT},
    )
    if not rows:
        return "I'm afraid I have no decisions on record here as yet."
    zone = channel_zone(scope.timezone)
    lines = ["The decisions currently in force, most recent first:"]
    for fid, summary, decided_at, channel_name in rows:
        where = f"{channel_name}, " if scope.personal else ""
        lines.append(f"- {fid} ({where}around {local_date(decided_at, zone)}): {summary}")
    return voice("\n".join(lines))


def list_actions(channel_id: str, user_id: str, mine: bool) -> str:
    try:
        scope = RetrievalScope.for_asker(channel_id, user_id)
    except UnknownChannel:
        return NOT_ACQUAINTED
    mine_sql = " AND a.owner_id = %(scope_user)s" if mine else ""
    rows = _rows(
        f"""SELECT a.friendly_id, a.description, a.owner_name, a.deadline
            FROM actions a WHERE {scope.actions("a")} AND a.status = 'open'{mine_sql}
            ORDER BY a.owner_name NULLS LAST, a.deadline NULLS LAST, a.created_at LIMIT %(n)s""",
        {**scope.params(), "n": LIST_LIMIT * 2},
    )
    if not rows:
        return "You have no open actions on record, I'm pleased to say." if mine else "There are no open actions."
    zone = channel_zone(scope.timezone)
    lines = ["Your open actions:" if mine else "The open actions, by owner:"]
    for fid, description, owner, deadline in rows:
        due = f", due {local_date(deadline, zone)}" if deadline else ", no deadline set"
        who = "" if mine else f"{owner or 'unassigned'}: "
        lines.append(f"- {fid} {who}{description.rstrip(' .')}{due}")  # "… the report, due …", not "report., due"
    return voice("\n".join(lines))


def channel_status(channel_id: str, user_id: str) -> str:
    channel = ChannelConfig.objects.filter(channel_id=channel_id).first()
    if channel is None:
        return NOT_ACQUAINTED
    counts = _rows(
        """SELECT (SELECT count(*) FROM decisions WHERE channel_id = %(c)s AND status = 'active'),
                  (SELECT count(*) FROM actions WHERE channel_id = %(c)s AND status = 'open'),
                  (SELECT count(*) FROM entities WHERE %(c)s = ANY(channel_ids) AND NOT deleted),
                  (SELECT max(period_end) FROM summaries WHERE scope_type = 'channel' AND scope_id = %(c)s)""",
        {"c": channel_id},
    )[0]
    decisions, actions, entities, last_summary = counts
    since = channel.state_changed_at or channel.joined_at
    state = {"active": "attending", "paused": "stepped out", "secure": "in secure mode"}[channel.state]
    zone = channel_zone(channel.timezone)
    covers = f"the last summary covers up to {local_date(last_summary, zone)}" if last_summary else "no summary yet"
    return voice(
        f"I have been {state} here since {local_date(since, zone)}. On record: {decisions} decisions in force, "
        f"{actions} open actions and {entities} people, services and topics; {covers}."
    )


# How catch me up says where an action it lists stands (an action found and finished in the period is news too).
_ACTION_STATE = {"open": "To do", "stale": "To do", "done": "Done", "cancelled": "Dropped"}


def catch_me_up(channel_id: str, user_id: str, command_msg_id: str = "") -> str:
    """Since the asker's last message here before the command `command_msg_id` (or the last 24 hours): new
    decisions and actions, and the latest summary of the period. The command itself has a receipt too; it
    is not where the period starts. An on-demand summary written by a model is the summarise tier's."""
    try:
        scope = RetrievalScope.for_asker(channel_id, user_id)
    except UnknownChannel:
        return NOT_ACQUAINTED
    now = timezone.now()
    last = _rows(
        """SELECT max(r.sent_at) FROM message_receipts r
           WHERE r.channel_id = %(c)s AND r.author_id = %(u)s AND r.wire_msg_id <> %(m)s
             AND r.sent_at < COALESCE(
                 (SELECT sent_at FROM message_receipts WHERE channel_id = %(c)s AND wire_msg_id = %(m)s), %(now)s)""",
        {"c": channel_id, "u": user_id, "m": command_msg_id, "now": now},
    )[0][0]
    since = last or now - timedelta(hours=24)
    params = {**scope.params(), "since": since, "n": LIST_LIMIT}
    decisions = _rows(
        f"""SELECT d.friendly_id, d.summary FROM decisions d WHERE {scope.decisions("d")}
            AND d.status = 'active' AND d.decided_at > %(since)s ORDER BY d.decided_at LIMIT %(n)s""",
        params,
    )
    actions = _rows(
        f"""SELECT a.friendly_id, a.description, a.owner_name, a.status FROM actions a WHERE {scope.actions("a")}
            AND a.created_at > %(since)s ORDER BY a.created_at LIMIT %(n)s""",
        params,
    )
    summary = _rows(
        f"""SELECT m.summary FROM summaries m WHERE {scope.summaries("m")} AND m.period_end > %(since)s
            ORDER BY m.period_end DESC LIMIT 1""",
        params,
    )
    zone = channel_zone(scope.timezone)
    if not (decisions or actions or summary):
        return f"I'm afraid nothing of note has been recorded since {local_date(since, zone)}."
    lines = [f"Since {local_date(since, zone)}, if I may:"]
    if summary:
        lines.append(summary[0][0])
    lines.extend(f"- Decided, {fid}: {text}" for fid, text in decisions)
    lines.extend(
        f"- {_ACTION_STATE.get(status, 'To do')}, {fid} ({owner or 'unassigned'}): {text}"
        for fid, text, owner, status in actions
    )
    return voice("\n".join(lines))
