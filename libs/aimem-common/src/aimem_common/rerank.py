"""The optional cross-encoder rerank of a search's top hits.

Off unless ``rerank.provider`` is set. ``http``: a rerank endpoint of the shape Cohere
introduced and vLLM, Jina and Infinity also serve —
``POST <base_url>/rerank {"model", "query", "documents": [str], "top_n"}`` →
``{"results": [{"index": int, "relevance_score": float}]}`` — so any cross-encoder
(``BAAI/bge-reranker-*``, ``ms-marco-MiniLM``) served locally can be used. No package here
ships a cross-encoder's weights, so there is no offline default.

``rerank_hits`` reorders the first ``rerank.top_n`` hits by the model's score and leaves
the rest as they were; a page the ``exact`` stream found with certainty (an identifier of
the question held by few pages) stays ahead of every reranked page, in its fused order.
A timeout or an error leaves the order unchanged and says why in ``explain``
(``streams_skipped["rerank"]``); after a failure the reranker is skipped for
``rerank.cooldown_s``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from aimem_common.config import RerankSettings
from aimem_common.errors import ConfigError

log = logging.getLogger(__name__)

SKIP_TIMEOUT = "reranker_timeout"
SKIP_ERROR = "reranker_error"
SKIP_COOLDOWN = "reranker_cooldown"


class Reranker(Protocol):
    """Score ``documents`` against ``query``: one float per document, higher = more relevant."""

    model: str

    async def score(self, query: str, documents: list[str]) -> list[float]: ...

    async def aclose(self) -> None: ...


class HttpReranker:
    """The ``/rerank`` endpoint through ``httpx`` (one client per process)."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 5.0):
        import httpx

        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._url = base_url.rstrip("/") + "/rerank"
        self._client = httpx.AsyncClient(timeout=timeout_s, headers=headers)

    async def score(self, query: str, documents: list[str]) -> list[float]:
        """Return the model's relevance of each document (``0.0`` for one it left out).

        Raises:
            httpx.HTTPError: the endpoint failed; ValueError: a malformed answer.
        """
        r = await self._client.post(self._url, json={"model": self.model, "query": query, "documents": documents,
                                                     "top_n": len(documents)})
        r.raise_for_status()
        out = [0.0] * len(documents)
        for item in r.json()["results"]:
            i = int(item["index"])
            if 0 <= i < len(out):
                out[i] = float(item["relevance_score"])
        return out

    async def aclose(self) -> None:
        await self._client.aclose()


def build_reranker(cfg: RerankSettings) -> Reranker | None:
    """The configured reranker, or None (off).

    Raises:
        ConfigError: ``http`` without ``base_url`` or ``model``.
    """
    if not cfg.provider:
        return None
    if not (cfg.base_url and cfg.model):
        raise ConfigError("rerank.provider = 'http' needs rerank.base_url and rerank.model")
    return HttpReranker(cfg.base_url, cfg.model, api_key=cfg.api_key, timeout_s=max(cfg.timeout_ms, 1) / 1000)


class RerankStage:
    """Apply a reranker to search results with a time bound and a failure cooldown (event loop)."""

    def __init__(self, reranker: Reranker | None, *, top_n: int, timeout_ms: int, cooldown_s: float,
                 clock: Callable[[], float] = time.monotonic):
        self.reranker = reranker
        self.top_n = max(1, top_n)
        self.timeout_s = max(timeout_ms, 1) / 1000
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._skip_until = 0.0

    @classmethod
    def from_settings(cls, cfg: RerankSettings) -> "RerankStage":
        """Build from ``settings.rerank`` (raises ``ConfigError`` as ``build_reranker``)."""
        return cls(build_reranker(cfg), top_n=cfg.top_n, timeout_ms=cfg.timeout_ms, cooldown_s=cfg.cooldown_s)

    @property
    def configured(self) -> bool:
        return self.reranker is not None

    async def apply(self, query: str, hits: list[dict[str, Any]], texts: dict[int, str], certain: set[int], *,
                    explain: bool) -> str | None:
        """Reorder ``hits`` in place (first ``top_n``); return a skip reason or None.

        ``texts``: ``{page_id: document text}`` of the hits to score, ``certain``: the page ids
        the exact stream found (kept first); both from ``memory_query``'s ``rerank`` entry.
        With ``explain`` each reranked hit's ``score_details["rerank"]`` =
        ``{"rank", "score", "fused_rank"}``.
        """
        if self.reranker is None or len(hits) < 2:
            return None
        if self._clock() < self._skip_until:
            return SKIP_COOLDOWN
        head = hits[:self.top_n]
        docs = [texts.get(h["page_id"], h.get("title", "")) for h in head]
        try:
            scores = await asyncio.wait_for(self.reranker.score(query, docs), self.timeout_s)
        except TimeoutError:
            return self._failed(SKIP_TIMEOUT, None)
        except Exception as exc:  # noqa: BLE001 - optional stage: any failure keeps the fused order
            return self._failed(SKIP_ERROR, exc)
        sure = [i for i, h in enumerate(head) if h["page_id"] in certain]
        rest = sorted((i for i, h in enumerate(head) if h["page_id"] not in certain), key=lambda i: (-scores[i], i))
        order = sure + rest
        reordered = [head[i] for i in order]
        if explain:
            for rank, i in enumerate(order, start=1):
                d = head[i].setdefault("score_details", {})
                d["rerank"] = {"rank": rank, "score": round(scores[i], 6), "fused_rank": i + 1}
        hits[:len(head)] = reordered
        return None

    def _failed(self, reason: str, exc: BaseException | None) -> str:
        self._skip_until = self._clock() + self.cooldown_s
        log.warning("rerank skipped (%s%s); fused order kept for %.0f s", reason, f": {exc}" if exc else "",
                    self.cooldown_s)
        return reason

    async def aclose(self) -> None:
        if self.reranker is not None:
            await self.reranker.aclose()

