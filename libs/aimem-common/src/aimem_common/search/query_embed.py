"""The read side's query embedder: the question's vector for ``memory_query``'s vector stream.

The query service and the mcp-gateway each build one ``QueryEmbedder`` in their lifespan
with the maintainer's factory (``aimem_common.embed.build_embedder``), so question and page
vectors share one ``{provider, model, dim}`` identity (DESIGN.md invariant 8). The local
model is loaded once, at startup, in a worker thread (~0.8 GB RSS per process with torch).

Embedding a question is bounded by ``embedding.query_timeout_ms``. A timeout or an error
never fails the search: it runs without the vector stream, and with ``explain`` the result
says why (``streams_skipped: {"vector": <reason>}`` beside ``streams_active``). After a
failure the embedder is skipped for ``embedding.query_cooldown_s``, so a provider that is
down does not add its timeout to every search.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aimem_common.config import Settings
from aimem_common.embed import Embedder, build_embedder
from aimem_common.search.question import QueryVector

if TYPE_CHECKING:
    from aimem_common.search.result import SearchResult

log = logging.getLogger(__name__)

# Reasons in ``streams_skipped["vector"]``.
SKIP_TIMEOUT = "embedder_timeout"
SKIP_ERROR = "embedder_error"
SKIP_COOLDOWN = "embedder_cooldown"
SKIP_EMPTY = "empty_query"


@dataclass(frozen=True, slots=True)
class QueryEmbedding:
    """One question's embedding outcome.

    ``vector`` is None when no embedder is configured (``skipped`` None too) or when the
    embedder was skipped (``skipped`` = reason code). ``ms``: time spent embedding.
    """

    vector: QueryVector | None
    skipped: str | None = None
    ms: float = 0.0


class QueryEmbedder:
    """Embed questions with a time bound and a failure cooldown (event loop; one per process)."""

    def __init__(self, embedder: Embedder | None, *, timeout_ms: int, cooldown_s: float,
                 clock: Callable[[], float] = time.monotonic):
        self.embedder = embedder
        self.timeout_s = max(timeout_ms, 1) / 1000
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._skip_until = 0.0

    @classmethod
    async def open(cls, settings: Settings) -> "QueryEmbedder":
        """Build the configured embedder (worker thread: loading a local model takes seconds).

        Raises:
            ConfigError: the same configuration errors as the maintainer's (missing
                ``base_url``/``model``/``dim``, the local extra not installed).
        """
        cfg = settings.embedding
        embedder = None
        if cfg.provider:
            embedder = await asyncio.to_thread(build_embedder, cfg, api_key_fallback=settings.llm.api_key,
                                               models_dir=settings.data_dir / "models")
            log.info("query embedder ready: %s", embedder.identity if embedder else None)
        return cls(embedder, timeout_ms=cfg.query_timeout_ms, cooldown_s=cfg.query_cooldown_s)

    @property
    def configured(self) -> bool:
        return self.embedder is not None

    async def embed(self, text: str) -> QueryEmbedding:
        """Return the question's ``QueryVector``, or a skip reason; never raises.

        Waits at most ``timeout_s`` (the provider call is cancelled; a local model's thread
        finishes on its own).
        """
        emb = self.embedder
        if emb is None:
            return QueryEmbedding(None)
        if not text.strip():
            return QueryEmbedding(None, SKIP_EMPTY)
        if self._clock() < self._skip_until:
            return QueryEmbedding(None, SKIP_COOLDOWN)
        t0 = time.perf_counter()
        try:
            vecs = await asyncio.wait_for(emb.embed([text]), self.timeout_s)
        except TimeoutError:
            return self._failed(SKIP_TIMEOUT, t0, None)
        except Exception as exc:  # noqa: BLE001 - an optional stream: any embedder failure degrades to FTS
            return self._failed(SKIP_ERROR, t0, exc)
        ident = emb.identity
        return QueryEmbedding(QueryVector(vecs[0], ident.provider, ident.model, ident.dim),
                              ms=(time.perf_counter() - t0) * 1000)

    def _failed(self, reason: str, t0: float, exc: BaseException | None) -> QueryEmbedding:
        self._skip_until = self._clock() + self.cooldown_s
        log.warning("query embedding skipped (%s%s); searching without the vector stream for %.0f s",
                    reason, f": {exc}" if exc else "", self.cooldown_s)
        return QueryEmbedding(None, reason, (time.perf_counter() - t0) * 1000)

    async def aclose(self) -> None:
        if self.embedder is not None:
            await self.embedder.aclose()


def annotate(result: "SearchResult", qe: QueryEmbedding, *, explain: bool) -> "SearchResult":
    """Add ``streams_skipped`` (and the embedding time) to an ``explain`` result; returns it.

    ``streams_active`` lists what contributed; a vector stream that was skipped appears as
    ``streams_skipped: {"vector": reason}`` so a caller can tell "embedder down" from "no
    current vectors".
    """
    if explain and result.explain is not None:
        result.explain["streams_skipped"] = {"vector": qe.skipped} if qe.skipped else {}
        if qe.vector is not None:
            result.explain["query_embed_ms"] = round(qe.ms, 2)
    return result
