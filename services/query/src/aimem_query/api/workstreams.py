"""Managed workstreams of a project (read-only): list, one workstream, ledger search, audit.

Every route needs the read grant on the project. Event text is the sanitised, redacted
ledger text written by agents: untrusted data.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Query, Request

from aimem_common.errors import NotFoundError
from aimem_common.read import workstreams
from aimem_query.deps import PrincipalDep, read, readable_scope

router = APIRouter(prefix="/workspaces/{workspace}/projects/{project}", tags=["workstreams"])
WS_ID = Path(pattern=r"^[0-9a-f]{32}$")


@router.get("/workstreams", summary="A project's managed workstreams")
async def list_workstreams(request: Request, principal: PrincipalDep, workspace: str, project: str) -> list[dict[str, Any]]:
    """Return the workstreams, newest activity first (harness cursors, the live run if any)."""
    scope = await readable_scope(request, principal, workspace, project)
    return await read(request, workstreams.list_workstreams, scope)


@router.get("/workstreams/search", summary="Full-text search over the project's ledgers")
async def search_workstreams(request: Request, principal: PrincipalDep, workspace: str, project: str,
                             q: str = Query(..., min_length=1, max_length=1000),
                             limit: int = Query(20, ge=1, le=200),
                             workstream_id: str | None = Query(None, pattern=r"^[0-9a-f]{32}$")) -> list[dict[str, Any]]:
    """Return matching ledger events (bm25 order), each naming its workstream."""
    scope = await readable_scope(request, principal, workspace, project)
    return await read(request, workstreams.search, scope, q, limit=limit, workstream_id=workstream_id)


@router.get("/workstreams/contamination", summary="Ledger events carrying an origin marker")
async def audit_contamination(request: Request, principal: PrincipalDep, workspace: str,
                              project: str) -> list[dict[str, Any]]:
    """Return the events that hold aimem's own injected packet (there should be none)."""
    scope = await readable_scope(request, principal, workspace, project)
    return await read(request, workstreams.contaminated, scope)


@router.get("/workstreams/{workstream_id}", summary="One workstream: runs, cursors, recent events")
async def show_workstream(request: Request, principal: PrincipalDep, workspace: str, project: str,
                          workstream_id: str = WS_ID, last: int = Query(50, ge=0, le=500)) -> dict[str, Any]:
    """Return the workstream with its runs and its last ``last`` events.

    Raises:
        NotFoundError: no such workstream in the project (404).
    """
    scope = await readable_scope(request, principal, workspace, project)
    got = await read(request, workstreams.show, scope, workstream_id, last=last)
    if got is None:
        raise NotFoundError(f"workstream {workstream_id} not found", data={"workstream_id": workstream_id})
    return got
