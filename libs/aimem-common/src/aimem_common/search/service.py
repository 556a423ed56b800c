"""``Searcher``: the one search orchestration behind MCP, REST and web searches.

``memory_query`` (MCP), ``/api/v1/search`` (REST), the web search and every later caller.

Names → scopes → grant check → the question's vector → hybrid search → ``_global`` preference
hits → rerank → access bumps. Each service builds one ``Searcher`` in its lifespan; the
interfaces only turn their arguments into ``SearchParams`` and the result into their reply.
Ranking itself is ``search.query.memory_query``; this module decides *what* is searched and
what follows a search. Thread: event loop (the reads run on the reader pool).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aimem_common.config import Settings
from aimem_common.models import GLOBAL_PROJECT, Scope, validate_name
from aimem_common.read import scopes as scopes_mod
from aimem_common.read import visibility
from aimem_common.readpool import ReaderPool
from aimem_common.rerank import RerankStage
from aimem_common.search.access import AccessThrottle, publish_access
from aimem_common.search.params import SearchParams
from aimem_common.search.query import memory_query, resolve_search_scopes
from aimem_common.search.query_embed import QueryEmbedder, QueryEmbedding, annotate
from aimem_common.search.question import QueryOptions, QueryVector
from aimem_common.search.result import SearchResult

if TYPE_CHECKING:
    from aimem_common.auth import Principal
    from aimem_common.bus import Bus

GLOBAL_SCOPE_LIMIT = 5  # ``global_scope_hits`` per default-scoped search


@dataclass(slots=True, kw_only=True)
class Searcher:
    """What a search needs, built once per service: the reader pool, settings, and the optional
    embedder, reranker, and bus + throttle for the ``page.access`` bumps."""

    pool: ReaderPool
    settings: Settings
    embedder: QueryEmbedder | None = None
    reranker: RerankStage | None = None
    bus: "Bus | None" = None
    throttle: AccessThrottle | None = None
    _bumps: set[asyncio.Task] = field(default_factory=set, init=False, repr=False)  # record_access_soon's

    async def search(self, principal: "Principal", params: SearchParams, *, record: bool = True) -> SearchResult:
        """Run one search for ``principal``; return its typed result (``to_json``: the wire shape).

        ``hits`` (``Hit`` ≤ limit), ``raw_hits`` (``RawHit``), ``global_scope_hits``? (``Hit`` ≤ 5),
        and with ``explain``, ``explain`` (``streams_active``, ``streams_skipped``, ``fts_query``,
        ``query_embed_ms``?, ...) and per-hit ``score_details`` (each stream's rank and score).
        ``global_scope_hits`` come from the workspace's ``_global`` project (the user's
        preferences) on a default-scoped search when it exists and is readable. One embedding
        serves both searches; an embedder that fails or times out only drops the vector stream.
        With a configured reranker the top ``rerank.top_n`` hits are reordered by it (the exact
        stream's pages stay first; explain: ``score_details.rerank`` and ``"rerank"`` in
        ``streams_active``, or ``streams_skipped["rerank"]`` when it failed). With ``record``
        (and a bus and throttle) the page hits get their ``page.access`` bump before it returns
        (``record_access``); an interface that answers first passes ``record=False`` and bumps
        after (an HTTP route in a background task, MCP with ``record_access_soon``).

        Raises:
            BadRequestError: an invalid workspace/project name, a malformed scope ref, or no
                project, scopes or global (``scope_required``).
            NotFoundError: an unknown workspace or project (fail closed), or, for a non-root
                principal, one it may not read (the same ``not_found``: no existence probe).
            UnavailableError: the read ran past the pool's budget (``query_timeout``).
        """
        settings, reranker = self.settings, self.reranker
        ws = validate_name(params.workspace or settings.workspace_default, "workspace")
        if params.project:
            validate_name(params.project, "project")
        reranking = reranker is not None and reranker.configured
        limit = min(params.limit or settings.query.default_limit, settings.query.max_limit)
        opts = QueryOptions(
            # The reranker reorders the fused top ``top_n`` before the answer is cut to
            # ``limit``, so a candidate ranked below the limit can still come up.
            limit=max(limit, reranker.top_n) if reranking else limit,
            explain=params.explain,
            include_expired=params.include_expired,
            include_superseded=params.include_superseded,
            rrf_k=settings.retrieval.rrf_k,
            snippet_words=settings.query.snippet_words,
            raw_limit=settings.retrieval.raw_fallback_limit,
            rerank_docs=reranker.top_n if reranking else 0,
        )
        where = {"workspace": ws, "project": params.project, "scopes": params.scopes, "global_": params.global_}
        global_of = ws if params.default_scoped else None
        if self.embedder is not None and self.embedder.configured:
            # The scopes first, so a refused search never waits on the embedder.
            scope_list = await self.pool.run(search_scopes, principal, **where)
            qe = await self.embedder.embed(params.query)
            result = await self.pool.run(_query, params.query, scope_list, opts, qe.vector, principal, global_of,
                                         self.pool.vectors)
        else:  # nothing to wait for between them: one trip to a reader thread, one snapshot
            qe = QueryEmbedding(None)
            result = await self.pool.run(_scoped_query, params.query, where, opts, principal, global_of,
                                         self.pool.vectors)
        annotate(result, qe, explain=params.explain)
        rr, result.rerank = result.rerank, None
        if rr is not None and reranking:
            skipped = await reranker.apply(params.query, result.hits, rr["texts"], set(rr["certain"]),
                                           explain=params.explain)
            if result.explain is not None:
                if skipped:
                    result.explain.setdefault("streams_skipped", {})["rerank"] = skipped
                elif len(result.hits) > 1:
                    result.explain.setdefault("streams_active", []).append("rerank")
        result.hits = result.hits[:limit]
        if record:
            await self.record_access(result, actor=principal.name)
        return result

    async def record_access(self, result: SearchResult, *, actor: str) -> int:
        """Publish the ``page.access`` bumps of a ``search`` result's page hits (``hits`` and
        ``global_scope_hits``), throttled to once a minute per page; best effort, never raises.

        Returns the number of page ids published (0 without a bus or throttle).
        """
        if self.bus is None or self.throttle is None:
            return 0
        hits = result.hits + (result.global_scope_hits or [])
        return await publish_access(self.bus, self.throttle, hits, actor=actor)

    def record_access_soon(self, result: SearchResult, *, actor: str) -> None:
        """``record_access`` in a task of its own, so the caller answers without waiting for the
        PubAck (event loop; the task is kept until it ends)."""
        if self.bus is None or self.throttle is None:
            return
        task = asyncio.get_running_loop().create_task(self.record_access(result, actor=actor))
        self._bumps.add(task)
        task.add_done_callback(self._bumps.discard)


def search_scopes(conn: Any, principal: "Principal", *, workspace: str, project: str | None, scopes: list[str],
                  global_: bool) -> list[Scope] | None:
    """The scopes a search of ``principal`` covers (``resolve_search_scopes``), kept to what it
    may read: ``None`` (every project) stays ``None`` for root and becomes the readable
    projects otherwise; an explicitly named scope that is not readable is refused, never dropped.

    Raises:
        BadRequestError, NotFoundError: as ``resolve_search_scopes``.
        ForbiddenError: a named scope the principal may not read.
    """
    found = resolve_search_scopes(conn, workspace=workspace, project=project, scopes=scopes, global_=global_,
                                  reader=principal)
    if found is None:
        return None if principal.is_root else visibility.readable_scopes(conn, principal)
    for s in found:
        principal.require_read(s.workspace, s.project)
    return found


def _scoped_query(conn: Any, query: str, where: dict[str, Any], opts: QueryOptions, principal: "Principal",
                  global_of: str | None, vectors: Any = None) -> SearchResult:
    """``search_scopes`` then ``_query`` without a vector, in one read (raises as ``search_scopes``)."""
    scope_list = search_scopes(conn, principal, **where)
    return _query(conn, query, scope_list, opts, None, principal, global_of, vectors)


def _query(conn: Any, query: str, scope_list: list[Scope] | None, opts: QueryOptions, vector: QueryVector | None,
           principal: "Principal", global_of: str | None, vectors: Any = None) -> SearchResult:
    """``memory_query`` plus, with ``global_of`` (a workspace), the ``global_scope_hits`` of its
    ``_global`` project when it exists and ``principal`` may read it: one trip to a reader thread."""
    result = memory_query(conn, query, scope_list, options=opts, vector=vector, vectors=vectors)
    g = scopes_mod.find(conn, global_of, GLOBAL_PROJECT) if global_of else None
    if g is not None and principal.can_read(g.workspace, g.project):
        gopts = QueryOptions(limit=GLOBAL_SCOPE_LIMIT, snippet_words=opts.snippet_words, raw_fallback=False)
        result.global_scope_hits = memory_query(conn, query, [g], options=gopts, vector=vector,
                                                vectors=vectors).hits
    return result
