"""`jeeves bench NAME [args...]`: run the benchmark script bench/NAME.py with this Python, passing
the remaining arguments through; without NAME (or with an unknown one) list the benchmarks.
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

BENCH_DIR: Path = Path(settings.BASE_DIR) / "bench"


def benchmarks() -> dict[str, str]:
    """Name → first line of the script's docstring, for every bench/*.py that is not private."""
    found = {}
    for path in sorted(BENCH_DIR.glob("*.py")) if BENCH_DIR.is_dir() else []:
        if path.name.startswith("_"):
            continue
        try:
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        except (SyntaxError, UnicodeDecodeError):
            doc = ""
        found[path.stem] = doc.strip().splitlines()[0] if doc.strip() else ""
    return found


def listing(found: dict[str, str]) -> str:
    if not found:
        return f"No benchmarks in {BENCH_DIR}."
    width = max(len(name) for name in found)
    lines = [f"Benchmarks in {BENCH_DIR} (python manage.py jeeves bench NAME [args...]):"]
    lines += [f"  {name:<{width}}  {doc}".rstrip() for name, doc in found.items()]
    return "\n".join(lines)


class Command(BaseCommand):
    help = "Run a benchmark script from bench/ (arguments after NAME go to the script); list them without NAME."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("name", nargs="?", help="benchmark to run: bench/NAME.py (omit to list them)")
        # REMAINDER so options meant for the script (--n 100, --verbose) are not parsed here.
        parser.add_argument("bench_args", nargs=argparse.REMAINDER, help="passed to the script unchanged")

    def handle(self, *args: Any, **options: Any) -> None:
        found = benchmarks()
        name = options.get("name")
        if not name:
            self.stdout.write(listing(found))
            return
        if name not in found:
            self.stdout.write(listing(found))
            raise CommandError(f"unknown benchmark {name!r}", returncode=2)
        args = list(options.get("bench_args") or [])
        if args[:1] == ["--"]:
            args = args[1:]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # The script's output goes through self.stdout so call_command(stdout=...) captures it too.
        with subprocess.Popen(
            [sys.executable, str(BENCH_DIR / f"{name}.py"), *args],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        ) as proc:
            try:
                for line in proc.stdout:
                    self.stdout.write(line, ending="")
                    self.stdout.flush()
            except KeyboardInterrupt:  # Ctrl-C reached the script too; let it finish its own way
                proc.wait()
                raise
        if proc.returncode:
            raise CommandError(f"bench/{name}.py exited with status {proc.returncode}", returncode=proc.returncode)
