"""The bundled all-MiniLM-L6-v2 run with torch alone: the same vectors as sentence-transformers, a third of its memory.

sentence-transformers builds the model through transformers, and importing the two (with what they pull in:
transformers' BERT modules, sympy, torch's compiler stack) took ~170 MB of private memory in every process
that embeds, on top of torch's own ~130 MB; each of four embedding workers held it twice (main process and
pool child). This module runs the same network with `torch.nn.functional` (six BERT layers, mean pooling over
the tokens, L2 normalisation: what the model's `modules.json` and `1_Pooling` declare), the tokenizer from
the model's `tokenizer.json` through `tokenizers`, the weights read with `safetensors` from a memory-mapped
file (the page cache's pages, shared by every process that loads them). Vectors match
`SentenceTransformer.encode(..., normalize_embeddings=True)` to ~1e-7 (tests/pipeline/test_embedder.py).
Texts are not padded (`_forward`): a batch of chat messages costs about a third of what sentence-transformers'
padded batch does (bench/embed.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


class MiniLM:
    def __init__(self, path: Path | str) -> None:
        import torch
        from safetensors import safe_open
        from tokenizers import Tokenizer

        path = Path(path)
        config = json.loads((path / "config.json").read_text())
        pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
        modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((path / "modules.json").read_text())]
        if (
            config.get("model_type") != "bert"
            or config.get("hidden_act") != "gelu"
            or config.get("position_embedding_type", "absolute") != "absolute"
            or not pooling.get("pooling_mode_mean_tokens")
            or any(v for k, v in pooling.items() if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens")
            or modules != ["Transformer", "Pooling", "Normalize"]
        ):
            raise ValueError(f"{path} is not a mean-pooled, normalised BERT model")
        self._torch = torch
        self._heads = int(config["num_attention_heads"])
        self._layers = int(config["num_hidden_layers"])
        self._eps = float(config["layer_norm_eps"])
        self._hidden = int(config["hidden_size"])
        # sentence-transformers truncates at the model's max_seq_length (its sentence_bert_config.json) and pads
        # each batch to its longest text; here texts are not padded at all (`_forward` packs their tokens), and
        # the tokenizer.json's own fixed padding is turned off.
        st_config = json.loads((path / "sentence_bert_config.json").read_text())
        max_length = min(int(st_config.get("max_seq_length", 512)), int(config["max_position_embeddings"]))
        self._tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length)
        self._tokenizer.no_padding()
        with safe_open(str(path / "model.safetensors"), framework="pt") as f:
            self._w: dict[str, Any] = {k.removeprefix("bert."): f.get_tensor(k) for k in f.keys()}

    def _forward(self, texts: list[str]) -> Any:
        """The batch's tokens packed into one [tokens, hidden] matrix, texts of the same length next to each other:
        every per-token step (the embeddings, the projections, the feed-forward layers, the layer norms: nearly
        all of the work) runs on the real tokens only, none on padding (padding was most of a padded batch of
        chat messages: ~63 % for dev's, where a batch of 64 has a median of 16 tokens and a longest of 61), and
        attention runs once per length, on a [texts, heads, length, length] block with no padding and no mask."""
        torch, w = self._torch, self._w
        f = torch.nn.functional
        encodings = self._tokenizer.encode_batch(texts)
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        lengths = [len(encodings[i].ids) for i in order]
        ids = torch.tensor([t for i in order for t in encodings[i].ids])
        pos = torch.tensor([j for n in lengths for j in range(n)])
        # Runs of texts with the same length: (first row, texts, length).
        groups: list[tuple[int, int, int]] = []
        row = 0
        for n in lengths:
            if groups and groups[-1][2] == n:
                groups[-1] = (groups[-1][0], groups[-1][1] + 1, n)
            else:
                groups.append((row, 1, n))
            row += n
        heads, hidden = self._heads, self._hidden
        size = (hidden,)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][pos]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = f.layer_norm(x, size, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self._eps)

        for i in range(self._layers):
            p = f"encoder.layer.{i}."

            def linear(t: Any, name: str, p: str = p) -> Any:
                return f.linear(t, w[f"{p}{name}.weight"], w[f"{p}{name}.bias"])

            q, k, v = (linear(x, f"attention.self.{n}") for n in ("query", "key", "value"))
            context = torch.cat(
                [
                    f.scaled_dot_product_attention(
                        *(
                            t[at : at + count * n].view(count, n, heads, hidden // heads).transpose(1, 2)
                            for t in (q, k, v)
                        )
                    )
                    .transpose(1, 2)
                    .reshape(count * n, hidden)
                    for at, count, n in groups
                ]
            )
            x = f.layer_norm(
                x + linear(context, "attention.output.dense"),
                size,
                w[f"{p}attention.output.LayerNorm.weight"],
                w[f"{p}attention.output.LayerNorm.bias"],
                self._eps,
            )
            x = f.layer_norm(
                x + linear(f.gelu(linear(x, "intermediate.dense")), "output.dense"),
                size,
                w[f"{p}output.LayerNorm.weight"],
                w[f"{p}output.LayerNorm.bias"],
                self._eps,
            )
        pooled = torch.cat([x[at : at + count * n].view(count, n, hidden).mean(1) for at, count, n in groups])
        out = torch.empty_like(pooled)
        out[torch.tensor(order)] = pooled
        return f.normalize(out, p=2, dim=1)

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """Normalised float32 vectors, one row per text, in order. Texts go through in batches of similar
        length (longest first, as sentence-transformers does), so a batch has few distinct token lengths
        (one attention call each)."""
        out = np.empty((len(texts), self._hidden), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        with self._torch.inference_mode():
            for at in range(0, len(order), batch_size):
                chunk = order[at : at + batch_size]
                out[chunk] = self._forward([texts[i] for i in chunk]).numpy()
        return out
