"""Prompt files of the LLM tiers, versioned: the first line of each file is `version: <name>-vN`.

The version is stored on every extracted record (`prompt_version`) with the model name.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Prompt:
    version: str
    text: str


@lru_cache(maxsize=8)
def load(name: str) -> Prompt:
    head, _, body = (_DIR / f"{name}.md").read_text(encoding="utf-8").partition("\n")
    key, _, version = head.partition(":")
    if key.strip() != "version" or not version.strip():
        raise ValueError(f"prompt {name} must start with 'version: ...'")
    return Prompt(version=version.strip(), text=body.strip())
