"""Subcommands of `python manage.py jeeves <name>`: one module per subcommand in this package.

A subcommand `a-b` lives in module `a_b`. Each module defines `help: str`, `add_arguments(parser)` and
`run(options: dict, command) -> None` (`command` is the Django BaseCommand, for `command.stdout` /
`command.stderr` / `CommandError`).
"""

SUBCOMMANDS: tuple[str, ...] = (
    "up", "replay", "ask", "eval", "audit", "bench", "train", "purge", "rotate-keys", "reembed", "doctor",
)  # fmt: skip
