"""`jeeves ask --channel CH --user U [--json] "question"`: ask Jeeves from the command line."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Ask Jeeves a question as USER in CHANNEL; prints the answer (or one JSON object with --json)."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--channel", required=True, help='channel id, "{conversationId}@{domain}"')
        parser.add_argument("--user", required=True, help='the asking user\'s qualified id, "{userId}@{domain}"')
        parser.add_argument("--json", action="store_true", help="print answer, cited records, tokens and timings")
        parser.add_argument("question", help="the question, in quotes")

    def handle(self, *args: Any, **options: Any) -> None:
        from retrieval.ask import ask

        result = ask(options["channel"], options["user"], options["question"])
        if options["json"]:
            self.stdout.write(json.dumps(result.to_json(), default=str, ensure_ascii=False))
        else:
            self.stdout.write(result.answer)
