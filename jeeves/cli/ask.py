"""`jeeves ask --channel CH --user U [--json] "question"`: ask Jeeves from the command line."""

from __future__ import annotations

import json
from typing import Any

help = "Ask Jeeves a question as USER in CHANNEL; prints the answer (or one JSON object with --json)."


def add_arguments(parser: Any) -> None:
    parser.add_argument("--channel", required=True, help='channel id, "{conversationId}@{domain}"')
    parser.add_argument("--user", required=True, help='the asking user\'s qualified id, "{userId}@{domain}"')
    parser.add_argument("--json", action="store_true", help="print answer, cited records, tokens and timings")
    parser.add_argument("question", help="the question, in quotes")


def run(options: dict[str, Any], command: Any) -> None:
    from retrieval.ask import ask

    result = ask(options["channel"], options["user"], options["question"])
    if options["json"]:
        command.stdout.write(json.dumps(result.to_json(), default=str, ensure_ascii=False))
    else:
        command.stdout.write(result.answer)
