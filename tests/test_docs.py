"""The docs the code points to are in the repository, and say what is there (pure: files only, no services).

- No file names a design document that lives outside the repository: the old design card, the original
  plan or the protocol notes are cited only as their `docs/` successors.
- Every `docs/<name>.md` a file cites exists, and so does every `§N` cited with it (a `## N.` heading).
- Links between the docs (and from the README) reach an existing file and heading.
- Every repository path the docs name exists; `path::test` names a test defined in that file.
- docs/architecture.md's message path is a numbered walk of at most ten files; each step's file exists and
  defines every `function()` the step names; its Redis key table lists every `jeeves:` key family the code uses,
  each row naming the owner `ground/keys.py` gives it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SKIP_DIRS = {".git", ".venv", ".jeeves", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis", "node_modules"}
MAX_BYTES = 2_000_000

# Built from pieces so that this file does not match itself.
OUTSIDE = [
    re.compile("DESIGN" + r"\.md", re.IGNORECASE),
    re.compile("seed" + r"[-_ ]?plan", re.IGNORECASE),
    re.compile("wire" + r"-protocols\.md", re.IGNORECASE),
]
CITATION = re.compile(r"docs/([\w-]+\.md)`?((?:\s*[,-]?\s*§\d+)*)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
TICKED = re.compile(r"`([^`\n]+)`")


def _text_files() -> list[Path]:
    found = []
    for here, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not Path(here, d).is_symlink()]
        for name in files:
            path = Path(here, name)
            if name in SKIP_DIRS or path.is_symlink() or path.stat().st_size > MAX_BYTES:
                continue
            try:
                found.append((path, path.read_text(encoding="utf-8")))
            except (UnicodeDecodeError, OSError):
                continue  # binary artefacts
    return found


FILES = _text_files()


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _sections(doc: Path) -> set[int]:
    return {int(n) for n in re.findall(r"^## (\d+)\. ", doc.read_text(encoding="utf-8"), flags=re.M)}


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", doc.read_text(encoding="utf-8"), flags=re.M)}


def test_no_file_cites_a_design_document_outside_the_repository():
    offending = []
    for path, text in FILES:
        in_docs = path.parent == DOCS
        for pattern in OUTSIDE:
            for match in pattern.finditer(text):
                successor = DOCS / match.group(0).lower()  # only the protocol notes have one
                prefixed = text[max(0, match.start() - 5) : match.start()] == "docs/"
                if not successor.exists() or not (prefixed or in_docs):
                    line = text.count("\n", 0, match.start()) + 1
                    offending.append(f"{_rel(path)}:{line}: {match.group(0)}")
    assert not offending, "cite docs/<file>.md instead:\n" + "\n".join(offending)


def test_every_cited_doc_and_section_exists():
    missing = []
    cited = 0
    for path, text in FILES:
        for match in CITATION.finditer(text):
            cited += 1
            doc = DOCS / match.group(1)
            where = f"{_rel(path)}:{text.count(chr(10), 0, match.start()) + 1}"
            if not doc.exists():
                missing.append(f"{where}: docs/{match.group(1)}")
                continue
            for number in re.findall(r"§(\d+)", match.group(2)):
                if int(number) not in _sections(doc):
                    missing.append(f"{where}: docs/{match.group(1)} §{number}")
    assert cited >= 30, f"only {cited} citations of docs/ found: is the pattern still right?"
    assert not missing, "cited but not there:\n" + "\n".join(missing)


def test_links_to_the_docs_reach_a_file_and_a_heading():
    broken = []
    for source in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for target in LINK.findall(source.read_text(encoding="utf-8")):
            if "://" in target or target.startswith(("#", "mailto:")):
                continue
            file, _, anchor = target.partition("#")
            doc = (source.parent / file).resolve()
            if not doc.exists():
                broken.append(f"{_rel(source)}: {target}")
            elif anchor and doc.suffix == ".md" and anchor not in _anchors(doc):
                broken.append(f"{_rel(source)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def _repo_paths(text: str) -> list[str]:
    """Backticked tokens that are repository paths (first segment a top-level directory), in order."""
    top = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")}
    paths = []
    for token in TICKED.findall(text):
        token = token.strip()
        if token.startswith("::"):
            paths.append(token)
            continue
        head = token.split("::")[0]
        if " " in head or not re.fullmatch(r"[\w./-]+", head) or "/" not in head:
            continue
        if head.split("/")[0] in top:
            paths.append(token)
    return paths


def test_every_path_and_test_the_docs_name_exists():
    missing = []
    for doc in sorted(DOCS.glob("*.md")):
        last_file: Path | None = None
        for token in _repo_paths(doc.read_text(encoding="utf-8")):
            path, _, test = token.partition("::") if not token.startswith("::") else ("", "", token[2:])
            if path:
                last_file = ROOT / path
                if not last_file.exists():
                    missing.append(f"{_rel(doc)}: {path}")
                    continue
            if test:
                name = test.split("[")[0]
                if last_file is None or not re.search(
                    rf"^\s*(?:async )?def {re.escape(name)}\(", last_file.read_text(), re.M
                ):
                    missing.append(f"{_rel(doc)}: {token} (no such test in {last_file and _rel(last_file)})")
    assert not missing, "\n".join(missing)


def _message_path() -> list[tuple[int, str]]:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    section = re.search(r"^## 2\. .*?$(.*?)^## ", text, flags=re.M | re.S)
    assert section, "docs/architecture.md has no §2 (the message path)"
    steps = re.findall(r"^(\d+)\. (.*?)(?=^\d+\. |^\S|\Z)", section.group(1), flags=re.M | re.S)
    return [(int(n), body) for n, body in steps]


def test_the_message_path_is_a_walk_through_files_that_exist_and_define_what_it_names():
    steps = _message_path()
    assert [n for n, _ in steps] == list(range(1, len(steps) + 1)), "steps must be numbered 1, 2, 3, …"
    files = []
    problems = []
    for number, body in steps:
        first = re.match(r"`([\w./-]+\.py)`", body.strip())
        if first is None:
            problems.append(f"step {number} does not start with its file")
            continue
        step_file = ROOT / first.group(1)
        files.append(first.group(1))
        for token in TICKED.findall(body):
            if re.fullmatch(r"[\w./-]+/[\w./-]+", token) and not (ROOT / token).exists():
                problems.append(f"step {number}: {token} does not exist")
        if not step_file.exists():
            continue
        source = step_file.read_text(encoding="utf-8")
        for name in re.findall(r"`(\w+)\(\)`", body):
            if not re.search(rf"^\s*def {name}\(", source, re.M):
                problems.append(f"step {number}: {name}() is not defined in {first.group(1)}")
    assert 1 <= len(set(files)) <= 10, f"the walk names {len(set(files))} files: {files}"
    assert len(files) == len(set(files)), f"one step per file: {files}"
    assert not problems, "\n".join(problems)


def test_the_redis_key_table_lists_every_key_family_in_the_code():
    code = "\n".join(
        text for path, text in FILES if path.suffix == ".py" and _rel(path).split("/")[0] not in {"tests", "bench"}
    )
    families = set(re.findall(r"[\"'](jeeves:[a-z][\w-]*(?::[a-z][\w-]*)?)", code))
    assert families, "no jeeves: key found in the code"
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    table = re.search(r"^## 4\. .*?$(.*?)^## ", text, flags=re.M | re.S)
    assert table, "docs/architecture.md has no §4 (Redis keys)"
    missing = sorted(f for f in families if f"`{f}" not in table.group(1))
    assert not missing, f"key families not in docs/architecture.md §4: {missing}"


def test_the_redis_key_table_follows_jeeves_keys():
    """Each family of ground/keys.py has its row, naming the module that owns it."""
    from ground import keys

    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    table = re.search(r"^## 4\. .*?$(.*?)^## ", text, flags=re.M | re.S).group(1)
    assert "`ground/keys.py`" in table
    rows = [line for line in table.splitlines() if line.startswith("| `jeeves:")]
    wrong = []
    for family in keys.FAMILIES:
        row = next((r for r in rows if r.startswith(f"| `{family.prefix}")), None)
        if row is None or f"`{family.owner}`" not in row:
            wrong.append(f"{family.name}: {family.prefix} owned by {family.owner}")
    assert not wrong, "rows missing or naming another owner:\n" + "\n".join(wrong)
