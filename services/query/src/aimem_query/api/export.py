"""Export route: a project's live pages, sessions, observations and handoffs, paged by id."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from aimem_common.models import DbIdOrZero
from aimem_common.read import export
from aimem_query.deps import PrincipalDep, read, readable_scope

router = APIRouter(prefix="/workspaces/{workspace}/projects/{project}", tags=["export"])


@router.get("/export", summary="Everything of a project, one part at a time (for aimem export)")
async def export_part(
    request: Request, principal: PrincipalDep, workspace: str, project: str,
    part: str = Query(..., description="pages | sessions | observations | handoffs"),
    after: Annotated[DbIdOrZero, Query(description="the previous answer's `next`")] = 0,
    limit: int = Query(500, ge=1, le=export.MAX_ROWS),
) -> dict[str, Any]:
    """Return ``{"part", "items", "next"}`` (``aimem_common.read.export``); 400 ``invalid_part``."""
    scope = await readable_scope(request, principal, workspace, project)
    return await read(request, export.export_part, scope, part, after=after, limit=limit)
