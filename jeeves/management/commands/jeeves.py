"""`python manage.py jeeves <verb> ...`: the entry to Jeeves's operator commands.

Each verb is a Django management command of its own in this folder, `jeeves_<verb>` (`rotate-keys` is
`jeeves_rotate_keys`): `python manage.py help` lists them, `python manage.py jeeves_audit --json` is
`python manage.py jeeves audit --json`, and Django's shell completion knows their options. This command
routes a verb to its command through the table VERBS; `jeeves --help` lists the verbs and
`jeeves <verb> --help` shows the verb's own options.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from jeeves.management.commands import (
    jeeves_ask,
    jeeves_audit,
    jeeves_bench,
    jeeves_doctor,
    jeeves_eval,
    jeeves_purge,
    jeeves_reembed,
    jeeves_replay,
    jeeves_rotate_keys,
    jeeves_train,
    jeeves_up,
)

VERBS: dict[str, type[BaseCommand]] = {
    "up": jeeves_up.Command,
    "replay": jeeves_replay.Command,
    "ask": jeeves_ask.Command,
    "eval": jeeves_eval.Command,
    "audit": jeeves_audit.Command,
    "bench": jeeves_bench.Command,
    "train": jeeves_train.Command,
    "purge": jeeves_purge.Command,
    "rotate-keys": jeeves_rotate_keys.Command,
    "reembed": jeeves_reembed.Command,
    "doctor": jeeves_doctor.Command,
}


class Command(BaseCommand):
    help = "Jeeves: run the whole system, replay conversations, ask questions, evaluate, audit, benchmark."
    requires_system_checks: list[str] = []  # `up` starts the database the checks would need

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", metavar="verb", required=True, parser_class=type(parser))
        for name, command in VERBS.items():
            child = verbs.add_parser(
                name,
                help=command.help,
                description=command.help,
                called_from_command_line=parser.called_from_command_line,
            )
            command().add_arguments(child)

    def handle(self, *args: Any, **options: Any) -> None:
        verb = VERBS[options["verb"]]()
        verb.stdout, verb.stderr, verb.style = self.stdout, self.stderr, self.style
        verb.handle(*args, **options)
