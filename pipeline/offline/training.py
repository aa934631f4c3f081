"""`jeeves train`: fit every learned part of the offline engine on the train split, report on dev.

Each trainer is a module with `NAME` (its artefact) and `train(train, dev, seed) -> dict`; it fits
on `train` only (thresholds by cross-validation on train), measures on `dev`, saves its artefact with
those figures in the metadata, and returns them. The model card is written from the artefacts.
"""

from __future__ import annotations

import importlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.offline import artefacts, corpus

# Order matters only for reading the card; each trainer is independent.
TRAINERS: tuple[str, ...] = ("pipeline.offline.learn", "pipeline.offline.contradiction")


def trainer_modules() -> dict[str, Any]:
    modules = [importlib.import_module(path) for path in TRAINERS]
    return {m.NAME: m for m in modules}


def run(only: list[str] | None = None, seed: int = 0, train_dir: Path = corpus.TRAIN, dev_dir: Path = corpus.DEV):
    """Fit the chosen (default: all) trainers; returns {name: figures}. Rewrites the model card."""
    modules = trainer_modules()
    unknown = set(only or []) - modules.keys()
    if unknown:
        raise ValueError(f"unknown trainer(s): {', '.join(sorted(unknown))}; known: {', '.join(modules)}")
    train = corpus.load_dir(train_dir)
    dev = corpus.load_dir(dev_dir)
    if not train:
        raise ValueError(f"no conversations in {train_dir}")
    results = {}
    for name, module in modules.items():
        if only and name not in only:
            continue
        results[name] = module.train(train, dev, seed)
    write_card()
    return results


def common_meta(train: list[corpus.Conversation], seed: int) -> dict[str, Any]:
    """What every artefact records about how it was made."""
    return {
        "trained_on": f"evalsets/train ({len(train)} conversations, {sum(len(c.heard) for c in train)} messages)",
        "date": datetime.now(UTC).date().isoformat(),
        "seed": seed,
    }


def write_card() -> Path:
    """artefacts/MODEL_CARD.md from every artefact's metadata (data, date, train-CV and dev figures)."""
    lines = [
        "# Model card: the offline engine's learned parts",
        "",
        "Written by `python manage.py jeeves train` from each artefact's metadata; do not edit by hand.",
        "Fitted on `evalsets/train` only; thresholds chosen by cross-validation on train; `dev` is measured,",
        "never fitted. Each artefact is a `.npz` of arrays plus JSON metadata (no pickle).",
        "",
    ]
    for path in sorted(artefacts.ARTEFACT_DIR.glob("*.npz")):
        _, meta = artefacts.load(path.stem)
        lines += [f"## {path.stem}", ""]
        described = ("purpose", "trained_on", "date", "seed", "embedder")
        lines += [f"- {key}: {meta[key]}" for key in described if key in meta]
        for section in ("train_cv", "dev"):
            if section in meta:
                lines += ["", f"{'Train cross-validation' if section == 'train_cv' else 'Dev'}:", ""]
                lines += [f"- {k}: {v}" for k, v in meta[section].items()]
        lines.append("")
    card = artefacts.ARTEFACT_DIR / "MODEL_CARD.md"
    card.write_text("\n".join(lines), encoding="utf-8")
    return card
