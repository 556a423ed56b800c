"""The optional cross-encoder rerank of a search's top hits.

Off unless ``rerank.provider`` is set. ``http``: a rerank endpoint of the shape Cohere
introduced and vLLM, Jina and Infinity also serve —
``POST <base_url>/rerank {"model", "query", "documents": [str], "top_n"}`` →
``{"results": [{"index": int, "relevance_score": float}]}`` — so any cross-encoder
(``BAAI/bge-reranker-*``, ``ms-marco-MiniLM``) served locally can be used. No package here
ships a cross-encoder's weights, so there is no offline default.

``llm``: the maintainer's ``[llm]`` provider chain ranks the candidates (``LlmReranker``:
a ``rerank`` maintainer RPC over NATS, so the LLM SDKs stay in the maintainer). Bounded:
one call per query, at most ``LLM_MAX_CANDIDATES`` (30) documents of at most
``LLM_DOC_CHARS`` characters each, at most ``LLM_MAX_IN_FLIGHT`` (4) calls in flight per
process (one more is skipped at once, ``reranker_busy``, no cooldown); any failure or
timeout keeps the local order, as for ``http``.

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
from typing import TYPE_CHECKING, Any, Protocol

from aimem_common.config import RerankSettings
from aimem_common.errors import ConfigError

if TYPE_CHECKING:
    from aimem_common.search.hits import Hit

log = logging.getLogger(__name__)

SKIP_TIMEOUT = "reranker_timeout"
SKIP_ERROR = "reranker_error"
SKIP_COOLDOWN = "reranker_cooldown"
SKIP_BUSY = "reranker_busy"
LLM_MAX_CANDIDATES = 30
LLM_DOC_CHARS = 300
LLM_MAX_IN_FLIGHT = 4


class RerankBusy(Exception):
    """Every in-flight slot of the LLM reranker is taken: this query keeps its order."""


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


class LlmReranker:
    """``reranker = "llm"``: one ``rerank`` maintainer RPC per query (``attach`` the NATS
    client once the bus is up; before that, or with no maintainer, scoring fails and the
    stage keeps the local order)."""

    model = "llm"

    def __init__(self, *, max_in_flight: int = LLM_MAX_IN_FLIGHT, timeout_s: float = 10.0):
        self._nc: Any = None
        self._slots = asyncio.Semaphore(max_in_flight)
        self.timeout_s = timeout_s

    def attach(self, nc: Any) -> None:
        self._nc = nc

    async def score(self, query: str, documents: list[str]) -> list[float]:
        """Scores from the maintainer's ranking (unranked documents score 0, keeping their order).

        Raises:
            RerankBusy: ``max_in_flight`` calls already running (no wait).
            AimemError / RuntimeError: no bus, no maintainer, no LLM, a failed call.
        """
        from aimem_common import maint_rpc

        if self._nc is None:
            raise RuntimeError("llm reranker: bus not attached")
        if self._slots.locked():
            raise RerankBusy()
        docs = [d[:LLM_DOC_CHARS] for d in documents[:LLM_MAX_CANDIDATES]]
        async with self._slots:
            out = await maint_rpc.call(self._nc, "rerank", workspace="default", project=None, actor="rerank",
                                       args={"query": query[:1000], "documents": docs, "budget_s": self.timeout_s},
                                       timeout_s=self.timeout_s)
        scores = [float(x) for x in out["scores"]][:len(documents)]
        return scores + [0.0] * (len(documents) - len(scores))

    async def aclose(self) -> None:
        return None


def build_reranker(cfg: RerankSettings) -> Reranker | None:
    """The configured reranker, or None (off).

    Raises:
        ConfigError: ``http`` without ``base_url`` or ``model``.
    """
    if not cfg.provider:
        return None
    if cfg.provider == "llm":
        # The stage's own bound (timeout_ms) fires first: this only ends an orphaned request.
        return LlmReranker(timeout_s=max(cfg.timeout_ms, 1) / 1000 + 1.0)
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
        top_n = min(cfg.top_n, LLM_MAX_CANDIDATES) if cfg.provider == "llm" else cfg.top_n
        return cls(build_reranker(cfg), top_n=top_n, timeout_ms=cfg.timeout_ms, cooldown_s=cfg.cooldown_s)

    def attach_bus(self, nc: Any) -> None:
        """Hand the NATS client to a reranker that needs one (``llm``); a no-op otherwise."""
        attach = getattr(self.reranker, "attach", None)
        if attach is not None:
            attach(nc)

    @property
    def configured(self) -> bool:
        return self.reranker is not None

    async def apply(self, query: str, hits: list["Hit"], texts: dict[int, str], certain: set[int], *,
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
        docs = [texts.get(h.page_id, h.title) for h in head]
        try:
            scores = await asyncio.wait_for(self.reranker.score(query, docs), self.timeout_s)
        except TimeoutError:
            return self._failed(SKIP_TIMEOUT, None)
        except RerankBusy:
            return SKIP_BUSY
        except Exception as exc:  # noqa: BLE001 - optional stage: any failure keeps the fused order
            return self._failed(SKIP_ERROR, exc)
        sure = [i for i, h in enumerate(head) if h.page_id in certain]
        rest = sorted((i for i, h in enumerate(head) if h.page_id not in certain), key=lambda i: (-scores[i], i))
        order = sure + rest
        reordered = [head[i] for i in order]
        if explain:
            for rank, i in enumerate(order, start=1):
                if head[i].score_details is None:
                    head[i].score_details = {}
                head[i].score_details["rerank"] = {"rank": rank, "score": round(scores[i], 6), "fused_rank": i + 1}
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

