"""`jeeves ask --channel CH --user U [--json] "question"`: ask Jeeves from the command line.

What a member would type after @jeeves: a question is answered by `retrieval.ask.ask`; a command that only reads
(`status`, `catch me up`, `decisions`, `actions`, `actions mine`, `my week`, `help`) is answered by the bridge's
command table, as in the channel. Commands that write or change the channel's state are Wire's to send.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from wire_bridge.commands import Kind

# The commands `jeeves ask` answers as the bridge does.
READS = frozenset(
    {Kind.STATUS, Kind.CATCH_UP, Kind.DECISIONS, Kind.ACTIONS, Kind.ACTIONS_MINE, Kind.MY_WEEK, Kind.HELP}
)


class Command(BaseCommand):
    help = "Ask Jeeves a question (or a read command: status, catch me up, decisions, ...) as USER in CHANNEL."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--channel", required=True, help='channel id, "{conversationId}@{domain}"')
        parser.add_argument("--user", required=True, help='the asking user\'s qualified id, "{userId}@{domain}"')
        parser.add_argument("--json", action="store_true", help="print answer, cited records, tokens and timings")
        parser.add_argument("question", help="the question (or read command), in quotes")

    def handle(self, *args: Any, **options: Any) -> None:
        from retrieval.ask import ask
        from wire_bridge import commands, dispatch

        command = commands.parse(options["question"])
        if command.kind in READS:
            if options["json"]:
                raise CommandError("--json is for questions; a command's reply is its text")
            request = dispatch.Request(options["channel"], options["user"], "", command)
            self.stdout.write(dispatch.dispatch(request).text)
            return
        result = ask(options["channel"], options["user"], options["question"])
        if options["json"]:
            self.stdout.write(json.dumps(result.to_json(), default=str, ensure_ascii=False))
        else:
            self.stdout.write(result.answer)
