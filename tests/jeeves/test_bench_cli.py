"""`jeeves bench`: lists the scripts of bench/, runs one with this Python and passes its arguments through."""

from __future__ import annotations

import json
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from jeeves.management.commands import jeeves_bench as bench
from tests.conftest import ROOT

ECHO = '''"""Echo benchmark: prints its arguments.

Second docstring line, not listed.
"""
import json, sys
print(json.dumps({"argv": sys.argv[1:], "python": sys.executable}))
print("done", flush=True)
'''


@pytest.fixture
def bench_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "echo.py").write_text(ECHO)
    (tmp_path / "fails.py").write_text('"""Always fails."""\nimport sys\nprint("partial")\nsys.exit(3)\n')
    (tmp_path / "_helpers.py").write_text('"""Shared code, not a benchmark."""\n')
    monkeypatch.setattr(bench, "BENCH_DIR", tmp_path)
    return tmp_path


def jeeves_bench(*args: str) -> str:
    out = StringIO()
    call_command("jeeves", "bench", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_without_a_name_lists_the_benchmarks_with_their_first_docstring_line(bench_dir):
    lines = jeeves_bench().splitlines()
    assert lines[0].startswith(f"Benchmarks in {bench_dir}")
    assert [line.split()[0] for line in lines[1:]] == ["echo", "fails"]
    assert lines[1].split(None, 1)[1] == "Echo benchmark: prints its arguments."


def test_an_unknown_name_lists_them_and_fails(bench_dir):
    out = StringIO()
    with pytest.raises(CommandError, match="unknown benchmark 'nope'") as raised:
        call_command("jeeves", "bench", "nope", stdout=out)
    assert raised.value.returncode == 2
    assert "echo" in out.getvalue() and "fails" in out.getvalue()
    with pytest.raises(CommandError, match="unknown benchmark '_helpers'"):
        call_command("jeeves", "bench", "_helpers", stdout=StringIO())


def test_arguments_after_the_name_reach_the_script_unchanged(bench_dir):
    out = jeeves_bench("echo", "--n", "100", "-v", "--json", "positional", "--verbosity", "3")
    first, second = out.splitlines()
    seen = json.loads(first)
    assert seen["argv"] == ["--n", "100", "-v", "--json", "positional", "--verbosity", "3"]
    assert seen["python"] == sys.executable
    assert second == "done"
    # `--` separates explicitly and is not passed on.
    assert json.loads(jeeves_bench("echo", "--", "-h").splitlines()[0])["argv"] == ["-h"]


def test_a_failing_script_passes_its_status_on(bench_dir):
    out = StringIO()
    with pytest.raises(CommandError, match="exited with status 3") as raised:
        call_command("jeeves", "bench", "fails", stdout=out)
    assert raised.value.returncode == 3 and out.getvalue() == "partial\n"


def test_the_real_bench_folder_is_listed_from_the_command_line():
    result = subprocess.run(
        [sys.executable, "manage.py", "jeeves", "bench"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0] for line in result.stdout.splitlines()[1:]}
    assert listed == {p.stem for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_")}


def test_no_benchmark_is_named_like_a_project_package():
    """`python bench/NAME.py` puts bench/ on sys.path: a bench/NAME.py named like a package makes `import NAME`
    depend on the path's order, and a reader on which one is meant (bench/retrieval.py is now retrieval_speed.py)."""
    from tests.test_layers import PROJECT

    assert not set(bench.benchmarks()) & set(PROJECT)
    assert not {p.stem for p in (ROOT / "bench").glob("*.py")} & set(PROJECT)


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "bench").glob("[!_]*.py")))
def test_every_bench_has_the_quick_smoke_run_ci_calls(script: str) -> None:
    """scripts/bench-smoke runs every bench with --quick after the tests: a bench without it fails CI."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--help"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "--quick" in out.stdout
