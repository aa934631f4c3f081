"""`jeeves purge --channel CH | --user U [--yes]`: forget a channel, or a person, in every table.

A channel: everything Jeeves holds of it (what a beat task does JEEVES_RETENTION_AFTER_LEAVE_DAYS after
Jeeves leaves one). A person (a personal data request): everything they authored, own or decided.
Prints the rows per table; without --yes it shows them first and asks.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction


def _purge(options: dict[str, Any]) -> Counter:
    from knowledge import forgetting

    if options["channel"]:
        return forgetting.purge_channel(options["channel"])
    return forgetting.purge_user(options["user"])


def _table(counts: Counter) -> str:
    if not counts:
        return "  nothing on record"
    width = max(len(t) for t in counts)
    return "\n".join(f"  {table:<{width}}  {n}" for table, n in sorted(counts.items()))


class Command(BaseCommand):
    help = "Delete a channel's knowledge, or everything a person authored, owns or decided; prints rows per table."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--channel", help='channel id, "{conversationId}@{domain}"')
        target.add_argument("--user", help='a person\'s qualified id, "{userId}@{domain}"')
        parser.add_argument("--yes", action="store_true", help="delete without asking")

    def handle(self, *args: Any, **options: Any) -> None:
        what = f"channel {options['channel']}" if options["channel"] else f"person {options['user']}"
        if not options["yes"]:
            with transaction.atomic():
                preview = _purge(options)
                transaction.set_rollback(True)
            self.stdout.write(f"Purging {what} would delete or change (rows per table):\n{_table(preview)}")
            if not preview:
                return
            if not sys.stdin.isatty():
                raise CommandError("nothing deleted: run again with --yes to delete")
            if input("Type 'yes' to delete: ").strip().lower() != "yes":
                raise CommandError("nothing deleted")
        counts = _purge(options)
        _forget_in_memory(options)
        self.stdout.write(f"Purged {what} (rows deleted or changed, per table):\n{_table(counts)}")


def _forget_in_memory(options: dict[str, Any]) -> None:
    """Redis holds no history, but the window, claim checks and member cache may name them for minutes."""
    from ground.redis import forget_channel_keys
    from pipeline import members, window

    if options["channel"]:
        forget_channel_keys(options["channel"])
    else:
        members.remove_everywhere(options["user"])
        window.remove_author(options["user"])
