"""The one search orchestration behind ``memory_query`` (MCP), ``/api/v1/search`` (REST) and
every later caller: names → scopes → grant check → the question's vector → hybrid search →
``_global`` preference hits → access bumps.

``search(pool, embedder, principal, request, settings=...)`` is the entry point; the
interfaces only turn their arguments into a ``SearchRequest`` and the result into their
reply. Ranking itself is ``search.memory_query`` (FTS + entities + links + vectors, RRF,
authority); this module decides *what* is searched and what follows a search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aimem_common.config import Settings
from aimem_common.models import GLOBAL_PROJECT, Scope, validate_name
from aimem_common.read import scopes as scopes_mod
from aimem_common.read import visibility
from aimem_common.read.access import AccessThrottle, publish_access
from aimem_common.read.pool import ReaderPool
from aimem_common.read.query_embed import QueryEmbedder, QueryEmbedding, annotate
from aimem_common.read.search import QueryOptions, QueryVector, memory_query, resolve_search_scopes
from aimem_common.rerank import RerankStage

if TYPE_CHECKING:
    from aimem_common.auth import Principal
    from aimem_common.bus import Bus

GLOBAL_SCOPE_LIMIT = 5  # ``global_scope_hits`` per default-scoped search
# The longest question every interface accepts (API, MCP, web); what is read of it is cut shorter
# before tokenising (``text.MAX_QUERY_CHARS``), so a pasted log stays cheap and is not refused.
MAX_QUERY_INPUT_CHARS = 16 * 1024


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """One search, as every interface states it.

    ``workspace`` defaults to ``settings.workspace_default``; ``project`` and ``scopes``
    (``"project"`` or ``"workspace/project"`` each) are unioned; ``global_`` searches every
    project the principal may read. ``limit`` None = ``settings.query.default_limit``.
    """

    query: str
    workspace: str | None = None
    project: str | None = None
    scopes: Sequence[str] = ()
    global_: bool = False
    limit: int | None = None
    explain: bool = False
    include_expired: bool = False
    include_superseded: bool = False

    @property
    def default_scoped(self) -> bool:
        """True for a plain one-project search (the case that also gets ``_global`` hits)."""
        return bool(self.project) and not self.scopes and not self.global_ and self.project != GLOBAL_PROJECT


async def search(
    pool: ReaderPool,
    embedder: QueryEmbedder | None,
    principal: "Principal",
    request: SearchRequest,
    *,
    settings: Settings,
    bus: "Bus | None" = None,
    throttle: AccessThrottle | None = None,
    reranker: RerankStage | None = None,
) -> dict[str, Any]:
    """Run one search for ``principal``; return the ``memory_query`` result.

    Shape: ``{"hits": [Hit ≤ limit], "raw_hits": [RawHit], "global_scope_hits"?: [Hit ≤ 5]}``
    plus, with ``explain``, ``streams_active``, ``streams_skipped``, ``fts_query``,
    ``query_embed_ms``? and per-hit ``score_details`` (each stream's rank and score).
    ``global_scope_hits`` come from the workspace's ``_global`` project (the user's
    preferences) on a default-scoped search when it exists and is readable. One embedding
    serves both searches; an embedder that fails or times out only drops the vector stream.
    With a configured ``reranker`` the top ``rerank.top_n`` hits are reordered by it (the
    exact stream's pages stay first; explain: ``score_details.rerank`` and ``"rerank"`` in
    ``streams_active``, or ``streams_skipped["rerank"]`` when it failed).
    With ``bus`` and ``throttle`` the page hits get their ``page.access`` bump before it
    returns (``record_access``: at most once a minute per page, best effort).

    Raises:
        BadRequestError: an invalid workspace/project name, a malformed scope ref, or no
            project, scopes or global (``scope_required``).
        NotFoundError: an unknown workspace or project (fail closed), or, for a non-root
            principal, one it may not read (the same ``not_found``: no existence probe).
        UnavailableError: the read ran past the pool's budget (``query_timeout``).
    """
    ws = validate_name(request.workspace or settings.workspace_default, "workspace")
    if request.project:
        validate_name(request.project, "project")
    found = await pool.run(resolve_search_scopes, workspace=ws, project=request.project,
                           scopes=request.scopes, global_=request.global_, reader=principal)
    scope_list = await readable_scopes(pool, principal, found)
    opts = QueryOptions(
        limit=min(request.limit or settings.query.default_limit, settings.query.max_limit),
        explain=request.explain,
        include_expired=request.include_expired,
        include_superseded=request.include_superseded,
        rrf_k=settings.retrieval.rrf_k,
        snippet_words=settings.query.snippet_words,
        raw_limit=settings.retrieval.raw_fallback_limit,
        rerank_docs=reranker.top_n if reranker is not None and reranker.configured else 0,
    )
    qe = await embedder.embed(request.query) if embedder is not None else QueryEmbedding(None)
    result = await pool.run(_query, request.query, scope_list, opts, qe.vector, principal,
                            ws if request.default_scoped else None)
    annotate(result, qe, explain=request.explain)
    rr = result.pop("rerank", None)
    if rr is not None and reranker is not None and reranker.configured:
        skipped = await reranker.apply(request.query, result["hits"], rr["texts"], set(rr["certain"]),
                                       explain=request.explain)
        if request.explain:
            if skipped:
                result.setdefault("streams_skipped", {})["rerank"] = skipped
            elif len(result["hits"]) > 1:
                result.setdefault("streams_active", []).append("rerank")
    if bus is not None and throttle is not None:
        await record_access(bus, throttle, result, actor=principal.name)
    return result


async def record_access(bus: "Bus", throttle: AccessThrottle, result: dict[str, Any], *, actor: str) -> int:
    """Publish the ``page.access`` bumps of a ``search`` result's page hits (``hits`` and
    ``global_scope_hits``), throttled to once a minute per page; best effort, never raises.

    ``search`` calls it when given ``bus`` and ``throttle``; an HTTP route may instead run it
    after its reply is sent. Returns the number of page ids published.
    """
    hits = list(result.get("hits", [])) + list(result.get("global_scope_hits", []))
    return await publish_access(bus, throttle, hits, actor=actor)


async def readable_scopes(pool: ReaderPool, principal: "Principal", found: list[Scope] | None) -> list[Scope] | None:
    """Keep the scopes ``principal`` may read.

    ``None`` (every project) stays ``None`` for root and becomes the readable projects
    otherwise; an explicitly named scope that is not readable is refused, never dropped.

    Raises:
        ForbiddenError: a named scope the principal may not read.
    """
    if found is None:
        if principal.is_root:
            return None
        return await pool.run(visibility.readable_scopes, principal)
    for s in found:
        principal.require_read(s.workspace, s.project)
    return found


def _query(conn: Any, query: str, scope_list: list[Scope] | None, opts: QueryOptions, vector: QueryVector | None,
           principal: "Principal", global_of: str | None, vectors: Any = None) -> dict[str, Any]:
    """``memory_query`` plus, with ``global_of`` (a workspace), the ``global_scope_hits`` of its
    ``_global`` project when it exists and ``principal`` may read it: one trip to a reader thread."""
    result = memory_query(conn, query, scope_list, options=opts, vector=vector, vectors=vectors)
    g = scopes_mod.find(conn, global_of, GLOBAL_PROJECT) if global_of else None
    if g is not None and principal.can_read(g.workspace, g.project):
        gopts = QueryOptions(limit=GLOBAL_SCOPE_LIMIT, snippet_words=opts.snippet_words, raw_fallback=False)
        result["global_scope_hits"] = memory_query(conn, query, [g], options=gopts, vector=vector,
                                                   vectors=vectors)["hits"]
    return result
