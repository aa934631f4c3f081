"""The layers of docs/architecture.md §2 hold in the imports (pure: source files only, no services).

- `lint-imports` (import-linter, its contract in pyproject.toml) keeps jeeves > wire_bridge > retrieval >
  pipeline > knowledge > ground: no layer imports one above it, directly or through a chain, so there is
  no package cycle; and the check itself fails when a layer climbs back up.
- The files of the command path import no project module under another name (as once
  `from retrieval import commands as knowledge_commands`): a reader sees which package a call goes to.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("jeeves", "wire_bridge", "retrieval", "pipeline", "knowledge", "ground")  # top to bottom
COMMAND_PATH = (
    "wire_bridge/commands.py",
    "wire_bridge/dispatch.py",
    "wire_bridge/replies.py",
    "wire_bridge/respond.py",
    "wire_bridge/tasks.py",
    "retrieval/commands.py",
    "knowledge/review.py",
)
LINT_IMPORTS = str(Path(sys.executable).with_name("lint-imports"))


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


def _all_but_python(directory: str, names: list[str]) -> set[str]:
    return {n for n in names if not n.endswith(".py") and not (Path(directory) / n).is_dir() or n == "__pycache__"}


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache"], cwd=root, capture_output=True, text=True, timeout=120, check=False
    )


def test_no_layer_imports_a_layer_above_it():
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_layer_climbing_back_up_breaks_the_contract(tmp_path):
    """The same check on a copy of the tree where the ground imports the project: lint-imports fails."""
    for package in PROJECT:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=_all_but_python)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    keys = tmp_path / "ground" / "keys.py"
    keys.write_text(keys.read_text() + "\n\ndef _climb():\n    from jeeves import celery  # noqa\n")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout and "ground.keys -> jeeves.celery" in result.stdout, result.stdout


def test_the_command_path_imports_project_modules_by_their_names():
    renamed = [
        f"{where}:{line}: {module} as {alias}"
        for package in PROJECT
        for where, line, module, alias in _imports(package)
        if where in COMMAND_PATH and alias and module.split(".")[0] in PROJECT and alias != module.rsplit(".", 1)[-1]
    ]
    assert all((ROOT / path).exists() for path in COMMAND_PATH)
    assert not renamed, "import project modules by their names:\n" + "\n".join(renamed)
