"""Page routes: by path or id (full body, frontmatter, backlinks), recent, graph."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from aimem_common.models import validate_page_path
from aimem_common.read import pages
from aimem_query.deps import PrincipalDep, read, readable_scope
from aimem_common.models import DbId

router = APIRouter(prefix="/workspaces/{workspace}/projects/{project}", tags=["pages"])


@router.get("/page", summary="One live page by path")
async def page_by_path(
    request: Request, principal: PrincipalDep, workspace: str, project: str,
    path: str = Query(..., max_length=512), include_expired: bool = True,
) -> dict[str, Any]:
    """Return the ``PageRecord`` (body, frontmatter, links, backlinks of projects the caller may read)."""
    scope = await readable_scope(request, principal, workspace, project)
    return await read(request, pages.get_page, scope, path=validate_page_path(path), include_expired=include_expired,
                      reader=principal)


@router.get("/pages/{page_id}", summary="One page version by id")
async def page_by_id(request: Request, principal: PrincipalDep, workspace: str, project: str, page_id: DbId) -> dict[str, Any]:
    """Return the ``PageRecord`` of any retained version of a page of this project."""
    scope = await readable_scope(request, principal, workspace, project)
    return await read(request, pages.get_page, scope, page_id=page_id, reader=principal)


@router.get("/recent", summary="Recently updated pages (legacy array or incremental)")
async def recent(
    request: Request, principal: PrincipalDep, workspace: str, project: str,
    limit: int = Query(20, ge=1, le=500),
    updated_since: str | None = Query(None, description="RFC 3339; switches to {pages, next_cursor}"),
    cursor: str | None = Query(None, description="next_cursor of the previous call"),
) -> Any:
    """Without ``updated_since``/``cursor``: ``list[PageSummary]`` newest first.

    With either: ``{"pages": [...], "next_cursor": str|null}`` (updated strictly after the
    cutoff, ascending by update time then path; expired and superseded pages omitted).
    """
    scope = await readable_scope(request, principal, workspace, project)
    if updated_since is None and cursor is None:
        return await read(request, pages.recent, scope, limit=limit)
    return await read(request, pages.recent_since, scope, updated_since=updated_since, cursor=cursor, limit=limit)


@router.get("/graph", summary="Link graph of a project")
async def graph(request: Request, principal: PrincipalDep, workspace: str, project: str) -> dict[str, Any]:
    """Return ``{"nodes", "edges", "truncated"}``; readable other projects' pages are ``external``."""
    scope = await readable_scope(request, principal, workspace, project)
    return await read(request, pages.graph, scope, reader=principal)
