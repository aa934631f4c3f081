"""Plain English every layer's replies share: a small number in words, a counted noun, a list joined by "and".

Pure functions; nothing here imports a layer (ground/__init__.py)."""

from __future__ import annotations

from collections.abc import Sequence

_NUMBERS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def number(n: int) -> str:
    """ "three"; figures from 11 on ("14")."""
    return _NUMBERS[n] if 0 <= n < len(_NUMBERS) else str(n)


def counted(n: int, one: str, many: str | None = None) -> str:
    """ "one decision", "three decisions", "no people" (`many` for an irregular plural)."""
    return f"{number(n)} {one if n == 1 else (many or one + 's')}"


def joined(items: Sequence[str], sep: str = ", ") -> str:
    """ "a, b and c"; with `sep` "; ", "a; b; and c" (items that hold commas of their own)."""
    if len(items) <= 1:
        return "".join(items)
    last = " and " if sep == ", " else f"{sep}and "
    return sep.join(items[:-1]) + last + items[-1]
