"""The offline engine's learned parts as committed artefacts: arrays and JSON metadata in one `.npz`.

No pickle anywhere (`allow_pickle=False`). Each artefact records the embedder and feature version it
was fitted with; loading one that is missing or was fitted for other features raises
`ArtefactError`, which start-up turns into a loud failure rather than a silently worse engine.
Rebuilt by `python manage.py jeeves train`; the model card beside them says what they were fitted on.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np

ARTEFACT_DIR = Path(__file__).resolve().parent / "artefacts"
FORMAT = 1


class ArtefactError(RuntimeError):
    """A learned artefact is missing, unreadable or stale (fitted for other features)."""


def path_for(name: str) -> Path:
    return ARTEFACT_DIR / f"{name}.npz"


def save(name: str, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Path:
    """Write `arrays` (float64 stored as float32; float16 kept) and `meta` to artefacts/NAME.npz."""
    ARTEFACT_DIR.mkdir(parents=True, exist_ok=True)
    payload = {k: (v.astype(np.float32) if v.dtype == np.float64 else v) for k, v in arrays.items()}
    payload["__meta__"] = np.frombuffer(json.dumps({"format": FORMAT, **meta}, sort_keys=True).encode(), np.uint8)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **payload)
    target = path_for(name)
    target.write_bytes(buffer.getvalue())
    return target


def load(name: str, expect: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and metadata of artefacts/NAME.npz; every key of `expect` must match its metadata."""
    target = path_for(name)
    if not target.is_file():
        raise ArtefactError(f"learned artefact {target.name} is missing: run `python manage.py jeeves train`")
    try:
        with np.load(target, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files if k != "__meta__"}
            meta = json.loads(bytes(data["__meta__"]).decode())
    except (OSError, ValueError, KeyError) as exc:
        raise ArtefactError(f"learned artefact {target.name} is unreadable ({type(exc).__name__})") from exc
    wanted = {"format": FORMAT, **(expect or {})}
    stale = {k: (meta.get(k), v) for k, v in wanted.items() if meta.get(k) != v}
    if stale:
        detail = ", ".join(f"{k}: has {have!r}, needs {need!r}" for k, (have, need) in stale.items())
        raise ArtefactError(f"learned artefact {target.name} is stale ({detail}): run `python manage.py jeeves train`")
    return arrays, meta
