"""``GET|POST /api/v1/search``: ``memory_query`` over HTTP."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, BackgroundTasks, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from aimem_common.auth import Principal
from aimem_common.errors import BadRequestError
from aimem_common.models import Scope
from aimem_common.read import scopes as scopes_mod
from aimem_common.read import search
from aimem_common.read.access import publish_access
from aimem_common.read.query_embed import annotate
from aimem_query.deps import PrincipalDep, ctx_of, read, settings_of

router = APIRouter(tags=["search"])

MAX_QUERY_CHARS = 16 * 1024


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


async def _scopes_for(request: Request, principal: Principal, req: SearchRequest) -> list[Scope] | None:
    ws = req.workspace or settings_of(request).workspace_default
    resolved = await read(
        request, search.resolve_search_scopes, workspace=ws, project=req.project, scopes=req.scopes,
        global_=req.global_,
    )
    if resolved is None:
        if principal.is_root:
            return None
        every = await read(request, scopes_mod.all_scopes)
        return [s for s in every if principal.can_read(s.workspace, s.project)]
    for s in resolved:
        principal.require_read(s.workspace, s.project)
    return resolved


async def run_search(request: Request, principal: Principal, req: SearchRequest, tasks: BackgroundTasks) -> dict[str, Any]:
    """Resolve scopes (fail closed, grant-checked), embed the question, search, schedule the access bump.

    The question's vector (``embedding.provider`` set) feeds the vector stream; an embedder
    that fails or exceeds ``embedding.query_timeout_ms`` only drops that stream
    (``streams_skipped`` with ``explain``).
    """
    settings = settings_of(request)
    scope_list = await _scopes_for(request, principal, req)
    opts = search.QueryOptions(
        limit=req.limit or settings.query.default_limit,
        explain=req.explain,
        include_expired=req.include_expired,
        include_superseded=req.include_superseded,
        rrf_k=settings.retrieval.rrf_k,
        snippet_words=settings.query.snippet_words,
        raw_limit=settings.retrieval.raw_fallback_limit,
    )
    qe = await ctx_of(request).embedder.embed(req.query)
    result = await read(request, search.memory_query, req.query, scope_list, options=opts, vector=qe.vector)
    annotate(result, qe, explain=req.explain)
    if result["hits"]:
        tasks.add_task(publish_access, ctx_of(request).bus, ctx_of(request).access, result["hits"],
                       actor=principal.name)
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
    """Return ``{"hits": [...], "raw_hits": [...]}`` (``memory_query`` shape, DESIGN.md)."""
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
