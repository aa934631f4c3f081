"""The layers of docs/architecture.md §2 hold in the imports (pure: source files only, no services).

- `knowledge` (the domain and its services) imports none of `pipeline`, `retrieval`, `wire_bridge`.
- `pipeline` and `retrieval` never import `wire_bridge`: they reach the bridge only by task name.
- The files of the command path import no project module under another name (as once
  `from retrieval import commands as knowledge_commands`): a reader sees which package a call goes to.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("jeeves", "knowledge", "pipeline", "retrieval", "wire_bridge")
COMMAND_PATH = (
    "wire_bridge/commands.py",
    "wire_bridge/dispatch.py",
    "wire_bridge/replies.py",
    "wire_bridge/respond.py",
    "wire_bridge/tasks.py",
    "retrieval/commands.py",
    "knowledge/review.py",
)
FORBIDDEN = {
    "knowledge": {"pipeline", "retrieval", "wire_bridge"},
    "pipeline": {"wire_bridge"},
    "retrieval": {"wire_bridge"},
}


def _imports(package: str) -> list[tuple[str, int, str, str | None]]:
    """(file, line, imported module, alias) for every import in the package's source (migrations too)."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        where = path.relative_to(ROOT).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.extend((where, node.lineno, alias.name, alias.asname) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.extend((where, node.lineno, f"{node.module}.{alias.name}", alias.asname) for alias in node.names)
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_layer_imports_no_layer_above_it(package):
    crossing = [
        f"{where}:{line}: {module}"
        for where, line, module, _ in _imports(package)
        if module.split(".")[0] in FORBIDDEN[package]
    ]
    assert not crossing, f"{package} must not import {sorted(FORBIDDEN[package])}:\n" + "\n".join(crossing)


def test_the_command_path_imports_project_modules_by_their_names():
    renamed = [
        f"{where}:{line}: {module} as {alias}"
        for package in PROJECT
        for where, line, module, alias in _imports(package)
        if where in COMMAND_PATH and alias and module.split(".")[0] in PROJECT and alias != module.rsplit(".", 1)[-1]
    ]
    assert all((ROOT / path).exists() for path in COMMAND_PATH)
    assert not renamed, "import project modules by their names:\n" + "\n".join(renamed)
