"""Test inputs are new wording: no string literal in the tests is a sentence of an evalset conversation.

A behavioural test whose input is a dev (or train) sentence with the nouns swapped tests that sentence,
not the behaviour, and rewards rules written for it (issue 9). Literals of six words or more are
checked against every message of `evalsets/` (case and spacing folded); the gold labels and questions
are data the eval reads, not test inputs, and are not scanned.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIN_WORDS = 6


def _fold(text: str) -> str:
    return " ".join(re.findall(r"[^\W_]+(?:'[^\W_]+)*", text.casefold().replace("\u2019", "'")))


def _messages() -> list[str]:
    texts = []
    for path in sorted((ROOT / "evalsets").rglob("*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(raw, dict):
            texts += [_fold(m["text"]) for m in raw.get("messages", [])]
    return texts


def _literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and len(_fold(node.value).split()) >= MIN_WORDS
        ):
            found.append((node.lineno, node.value))
    return found


def test_no_test_input_is_an_evalset_sentence():
    corpus = "\n".join(_messages())
    assert corpus, "the evalsets are part of the repository"
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name == Path(__file__).name:
            continue
        for line, literal in _literals(path):
            if _fold(literal) in corpus:
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {literal[:70]!r}")
    assert not offenders, "test inputs copied from the evalsets:\n" + "\n".join(offenders)
