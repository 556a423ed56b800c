"""``SearchResult``: one search's typed outcome, serialised only at the edge (``to_json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aimem_common.search.hits import Hit
from aimem_common.search.raw import RawHit

# Explain keys a service adds after the search (the embedder's, the reranker's): on the wire they
# follow ``global_scope_hits``, where clients have always seen them.
_SERVICE_EXPLAIN = ("streams_skipped", "query_embed_ms")


@dataclass(slots=True)
class SearchResult:
    """Page hits (score desc), raw observation hits and, for a default-scoped service search,
    the ``_global`` project's hits.

    ``explain`` (None unless asked): ``streams_active``, ``fts_query``, ``trigram_query``,
    ``trigram_short``, ``recency`` (only when the question asks for the newest of something:
    its cue words), ``stream_ms`` (stage → wall ms), and from the service
    ``streams_skipped`` (stream → reason) and ``query_embed_ms``. ``rerank`` is the reranker's
    input (``hits.rerank_input``), never sent.
    """

    hits: list[Hit] = field(default_factory=list)
    raw_hits: list[RawHit] = field(default_factory=list)
    global_scope_hits: list[Hit] | None = None
    explain: dict[str, Any] | None = None
    rerank: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The wire shape of ``memory_query`` (DESIGN.md "Read side"): ``{"hits": [...],
        "raw_hits": [...], <explain keys>?, "global_scope_hits"?: [...]}``, keys in the order
        clients have always seen."""
        out: dict[str, Any] = {"hits": [h.to_json() for h in self.hits],
                               "raw_hits": [r.to_json() for r in self.raw_hits]}
        explain = self.explain or {}
        out.update((k, v) for k, v in explain.items() if k not in _SERVICE_EXPLAIN)
        if self.global_scope_hits is not None:
            out["global_scope_hits"] = [h.to_json() for h in self.global_scope_hits]
        out.update((k, explain[k]) for k in _SERVICE_EXPLAIN if k in explain)
        return out
