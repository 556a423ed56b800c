"""``GET|POST /api/v1/search``: ``memory_query`` over HTTP (the service's ``Searcher``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Query, Request

from aimem_common.auth import Principal
from aimem_common.errors import BadRequestError
from aimem_common.search.params import MAX_QUERY_INPUT_CHARS, SearchParams, SearchQuery
from aimem_query.deps import PrincipalDep, ctx_of

router = APIRouter(tags=["search"])

MAX_QUERY_CHARS = MAX_QUERY_INPUT_CHARS


class SearchRequest(SearchParams):
    """Body of ``POST /api/v1/search`` (the same fields as the GET query string)."""

    # No fields of its own: the name and this docstring are the body's OpenAPI component.


async def run_search(request: Request, principal: Principal, params: SearchParams, tasks: BackgroundTasks
                     ) -> dict[str, Any]:
    """Run ``params`` through the service's ``Searcher`` (``aimem_common.search.service``).

    Scopes fail closed and are grant-checked; the question's vector (``embedding.provider``
    set) feeds the vector stream, and an embedder that fails or exceeds
    ``embedding.query_timeout_ms`` only drops that stream (``streams_skipped`` with
    ``explain``); a default-scoped search also returns ``global_scope_hits``; page hits get
    their throttled access bump once the reply is sent.
    """
    searcher = ctx_of(request).searcher
    result = await searcher.search(principal, params, record=False)
    # The access bump runs after the reply is sent: an HTTP search does not wait on the bus.
    tasks.add_task(searcher.record_access, result, actor=principal.name)
    return result.to_json()


@router.get("/search", summary="Search the wiki (memory_query)")
async def search_get(request: Request, principal: PrincipalDep, tasks: BackgroundTasks,
                     params: Annotated[SearchQuery, Query()]) -> dict[str, Any]:
    """Return ``{"hits": [...], "raw_hits": [...], "global_scope_hits"?: [...]}`` (``memory_query``
    shape, DESIGN.md)."""
    return await run_search(request, principal, params, tasks)


@router.post("/search", summary="Search the wiki (memory_query), JSON body")
async def search_post(request: Request, principal: PrincipalDep, tasks: BackgroundTasks, body: SearchRequest) -> dict[str, Any]:
    """Same as ``GET /search`` with a JSON body (``query`` or ``q``)."""
    if len(body.query) > MAX_QUERY_CHARS:
        raise BadRequestError("query too long")
    return await run_search(request, principal, body, tasks)
