"""``GET|POST /api/v1/search``: ``memory_query`` over HTTP (the shared search service)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, BackgroundTasks, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from aimem_common.auth import Principal
from aimem_common.errors import BadRequestError
from aimem_common.search import service as search_service
from aimem_query.deps import PrincipalDep, ctx_of

router = APIRouter(tags=["search"])

MAX_QUERY_CHARS = search_service.MAX_QUERY_INPUT_CHARS


class SearchRequest(BaseModel):
    """Body of ``POST /api/v1/search`` (the same fields as the GET query string)."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    query: str = Field("", max_length=MAX_QUERY_CHARS, validation_alias="q", description="the question")
    workspace: str | None = Field(None, description="defaults to the server's workspace_default")
    project: str | None = None
    scopes: list[str] = Field(default_factory=list, description="'project' or 'workspace/project' names")
    global_: bool = Field(False, alias="global", description="search every readable project")
    limit: int | None = Field(None, ge=1, le=100)
    explain: bool = False
    include_expired: bool = False
    include_superseded: bool = False


async def run_search(request: Request, principal: Principal, req: SearchRequest, tasks: BackgroundTasks
                     ) -> dict[str, Any]:
    """Run ``req`` through the shared search service (``aimem_common.search.service``).

    Scopes fail closed and are grant-checked; the question's vector (``embedding.provider``
    set) feeds the vector stream, and an embedder that fails or exceeds
    ``embedding.query_timeout_ms`` only drops that stream (``streams_skipped`` with
    ``explain``); a default-scoped search also returns ``global_scope_hits``; page hits get
    their throttled access bump once the reply is sent.
    """
    ctx = ctx_of(request)
    result = await search_service.search(
        ctx.read_pool, ctx.embedder, principal,
        search_service.SearchRequest(
            query=req.query, workspace=req.workspace, project=req.project, scopes=req.scopes, global_=req.global_,
            limit=req.limit, explain=req.explain, include_expired=req.include_expired,
            include_superseded=req.include_superseded),
        settings=ctx.settings, reranker=ctx.reranker)
    # The access bump runs after the reply is sent: an HTTP search does not wait on the bus.
    tasks.add_task(search_service.record_access, ctx.bus, ctx.access, result, actor=principal.name)
    return result


@router.get("/search", summary="Search the wiki (memory_query)")
async def search_get(
    request: Request,
    principal: PrincipalDep,
    tasks: BackgroundTasks,
    q: str = Query("", max_length=MAX_QUERY_CHARS, description="the question"),
    workspace: str | None = None,
    project: str | None = None,
    scopes: list[str] = Query(default_factory=list, description="repeat or comma-separate"),
    global_: bool = Query(False, alias="global"),
    limit: int | None = Query(None, ge=1, le=100),
    explain: bool = False,
    include_expired: bool = False,
    include_superseded: bool = False,
) -> dict[str, Any]:
    """Return ``{"hits": [...], "raw_hits": [...], "global_scope_hits"?: [...]}`` (``memory_query``
    shape, DESIGN.md)."""
    flat = [s.strip() for item in scopes for s in item.split(",") if s.strip()]
    req = SearchRequest(query=q, workspace=workspace, project=project, scopes=flat, global_=global_, limit=limit,
                        explain=explain, include_expired=include_expired, include_superseded=include_superseded)
    return await run_search(request, principal, req, tasks)


@router.post("/search", summary="Search the wiki (memory_query), JSON body")
async def search_post(request: Request, principal: PrincipalDep, tasks: BackgroundTasks, body: SearchRequest) -> dict[str, Any]:
    """Same as ``GET /search`` with a JSON body (``query`` or ``q``)."""
    if len(body.query) > MAX_QUERY_CHARS:
        raise BadRequestError("query too long")
    return await run_search(request, principal, body, tasks)
