"""Session routes: the session list and one session's observations (paged, body-capped)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from aimem_common.models import DB_INT_MAX
from aimem_common.read import sessions
from aimem_query.deps import PrincipalDep, read, readable_scope

router = APIRouter(prefix="/workspaces/{workspace}/projects/{project}", tags=["sessions"])


@router.get("/sessions", summary="Sessions of a project, newest first")
async def list_sessions(
    request: Request, principal: PrincipalDep, workspace: str, project: str,
    limit: int = Query(50, ge=1, le=500), ended_only: bool = False,
) -> list[dict[str, Any]]:
    """Return ``list[SessionSummary]`` by last event, newest first."""
    scope = await readable_scope(request, principal, workspace, project)
    return await read(request, sessions.list_sessions, scope, limit=limit, ended_only=ended_only)


@router.get("/sessions/{session_id}/observations", summary="One session's observations")
async def session_observations(
    request: Request, principal: PrincipalDep, workspace: str, project: str, session_id: str,
    offset: int = Query(0, ge=0, le=DB_INT_MAX), limit: int = Query(100, ge=1, le=500),
    body_max_chars: int = Query(sessions.DEFAULT_BODY_MAX_CHARS, ge=1, le=sessions.MAX_BODY_MAX_CHARS),
) -> dict[str, Any]:
    """Return ``{session, observations, total, elided_other_scope, offset, limit, next_offset}``."""
    scope = await readable_scope(request, principal, workspace, project)
    return await read(request, sessions.session_observations, scope, session_id, offset=offset, limit=limit,
                      body_max_chars=body_max_chars, reader=principal)
