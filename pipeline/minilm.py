"""The bundled all-MiniLM-L6-v2 run with torch alone: the same vectors as sentence-transformers, a third of its memory.

sentence-transformers builds the model through transformers, and importing the two (with what they pull in:
transformers' BERT modules, sympy, torch's compiler stack) took ~170 MB of private memory in every process
that embeds, on top of torch's own ~130 MB; each of four embedding workers held it twice (main process and
pool child). This module runs the same network with `torch.nn.functional` (six BERT layers, mean pooling over
the tokens, L2 normalisation: what the model's `modules.json` and `1_Pooling` declare), the tokenizer from
the model's `tokenizer.json` through `tokenizers`, the weights read with `safetensors` from a memory-mapped
file (the page cache's pages, shared by every process that loads them). Vectors match
`SentenceTransformer.encode(..., normalize_embeddings=True)` to ~1e-7 (tests/pipeline/test_embedder.py).
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
        # sentence-transformers truncates at the model's max_seq_length (its sentence_bert_config.json),
        # padding each batch to its longest text (the tokenizer.json's own fixed padding is not used).
        st_config = json.loads((path / "sentence_bert_config.json").read_text())
        max_length = min(int(st_config.get("max_seq_length", 512)), int(config["max_position_embeddings"]))
        self._tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length)
        self._tokenizer.enable_padding(pad_id=int(config.get("pad_token_id", 0)), pad_token="[PAD]")
        with safe_open(str(path / "model.safetensors"), framework="pt") as f:
            self._w: dict[str, Any] = {k.removeprefix("bert."): f.get_tensor(k) for k in f.keys()}

    def _forward(self, texts: list[str]) -> Any:
        torch, w = self._torch, self._w
        f = torch.nn.functional
        encodings = self._tokenizer.encode_batch(texts)
        ids = torch.tensor([e.ids for e in encodings])
        mask = torch.tensor([e.attention_mask for e in encodings])
        batch, length = ids.shape
        heads, hidden = self._heads, self._hidden
        size = (hidden,)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = f.layer_norm(x, size, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self._eps)
        attend = mask.bool()[:, None, None, :]  # padding is never attended to

        for i in range(self._layers):
            p = f"encoder.layer.{i}."

            def linear(t: Any, name: str, p: str = p) -> Any:
                return f.linear(t, w[f"{p}{name}.weight"], w[f"{p}{name}.bias"])

            def split(t: Any) -> Any:
                return t.view(batch, length, heads, hidden // heads).transpose(1, 2)

            q, k, v = (split(linear(x, f"attention.self.{n}")) for n in ("query", "key", "value"))
            context = f.scaled_dot_product_attention(q, k, v, attn_mask=attend)
            context = context.transpose(1, 2).reshape(batch, length, hidden)
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
        weights = mask.unsqueeze(-1).to(x.dtype)
        pooled = (x * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        return f.normalize(pooled, p=2, dim=1)

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """Normalised float32 vectors, one row per text, in order. Texts go through in batches of similar
        length (longest first, as sentence-transformers does), so little of a batch is padding."""
        out = np.empty((len(texts), self._hidden), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        with self._torch.inference_mode():
            for at in range(0, len(order), batch_size):
                chunk = order[at : at + batch_size]
                out[chunk] = self._forward([texts[i] for i in chunk]).numpy()
        return out
