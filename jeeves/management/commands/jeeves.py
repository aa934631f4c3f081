"""`python manage.py jeeves <subcommand>`: up, replay, ask, eval, audit, bench (see jeeves/cli/)."""

from __future__ import annotations

import importlib
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from jeeves.cli import SUBCOMMANDS


class Command(BaseCommand):
    help = "Jeeves: run the whole system, replay conversations, ask questions, evaluate, audit, benchmark."
    requires_system_checks: list[str] = []  # `up` starts the database the checks would need

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, parser_class=type(parser))
        for name in SUBCOMMANDS:
            module = self._module(name)
            if module is None:
                continue
            child = sub.add_parser(name, help=module.help, called_from_command_line=parser.called_from_command_line)
            module.add_arguments(child)

    def handle(self, *args: Any, **options: Any) -> None:
        module = self._module(options["subcommand"])
        module.run(options, self)

    @staticmethod
    def _module(name: str):
        module = f"jeeves.cli.{name.replace('-', '_')}"
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                return None  # subcommand not built yet
            raise
