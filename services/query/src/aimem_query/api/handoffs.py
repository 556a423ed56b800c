"""Handoff and message listings (read-only: claiming is an MCP/writer operation)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query, Request

from aimem_common.read import handoffs, messages
from aimem_query.deps import PrincipalDep, read, readable_scope

router = APIRouter(prefix="/workspaces/{workspace}/projects/{project}", tags=["handoffs"])


@router.get("/handoffs", summary="List handoffs without claiming them")
async def list_handoffs(
    request: Request, principal: PrincipalDep, workspace: str, project: str,
    status: Literal["open", "accepted", "expired", "superseded", "any"] = "open",
    limit: int = Query(50, ge=1, le=200), include_body: bool = True,
) -> list[dict[str, Any]]:
    """Return ``list[HandoffRecord]`` oldest first; non-root callers see own/shared/automatic ones."""
    scope = await readable_scope(request, principal, workspace, project)
    viewer = None if principal.is_root else principal.name
    return await read(request, handoffs.list_handoffs, scope, viewer=viewer, status=status, limit=limit,
                      include_body=include_body)


@router.get("/messages", summary="A project's inbox or outbox")
async def list_messages(
    request: Request, principal: PrincipalDep, workspace: str, project: str,
    box: Literal["inbox", "outbox"] = "inbox",
    status: Literal["pending", "claimed", "cancelled", "any"] = "pending",
    limit: int = Query(50, ge=1, le=200),
) -> list[dict[str, Any]]:
    """Return ``list[MessageRecord]`` oldest first (bodies are untrusted cross-project input)."""
    scope = await readable_scope(request, principal, workspace, project)
    return await read(request, messages.list_messages, scope, box=box, status=status, limit=limit,
                      reader=principal)
