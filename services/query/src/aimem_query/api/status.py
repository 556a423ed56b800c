"""``/api/v1/status`` (counts, versions, data dir, stream lag) and the workspace list."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from aimem_common.bus import BULK, LIVE
from aimem_common.errors import AimemError
from aimem_common.read import scopes, status, visibility
from aimem_query.deps import PrincipalDep, bus_of, read, readable_scope, settings_of

router = APIRouter(tags=["status"])


@router.get("/status", summary="Store-wide status")
async def store_status(request: Request, principal: PrincipalDep) -> dict[str, Any]:
    """Return counts, schema/software versions, DB size, data dir and writer lag.

    ``writer_lag`` is the number of live commands not yet applied, ``import_lag`` the number
    of imported ones (the bulk lane, applied after live work; ``null`` when the bus cannot tell). The root credential (or anyone, with auth off) gets store-wide counts,
    ``db_bytes`` and the data dir; a scoped API key gets the counts and last page update
    of the projects it may read only (``counts.projects``: how many), and ``null`` for
    ``db_bytes`` and ``data_dir``. One project's figures: ``.../projects/{project}/status``.
    """
    settings = settings_of(request)
    if principal.is_root:
        out = await read(request, status.status)
    else:
        out = await read(request, lambda conn: status.status_of_projects(
            conn, visibility.readable_scopes(conn, principal)))
    for key, lane in (("writer_lag", LIVE), ("import_lag", BULK)):
        try:
            out[key] = await bus_of(request).writer_lag(lane)
        except AimemError:
            out[key] = None
    out["data_dir"] = str(settings.data_dir) if principal.is_root else None
    out["service"] = "query"
    out["embedding"] = (
        {"provider": settings.embedding.provider, "model": settings.embedding.model, "dim": settings.embedding.dim}
        if settings.embedding.provider else None
    )
    return out


@router.get("/workspaces/{workspace}/projects/{project}/status", summary="One project's status")
async def project_status(request: Request, principal: PrincipalDep, workspace: str, project: str) -> dict[str, Any]:
    """Return the project's counts and last update."""
    scope = await readable_scope(request, principal, workspace, project)
    out = await read(request, status.status, scope)
    if not principal.is_root:
        out["db_bytes"] = None  # the file is everyone's: a scoped caller sees its project's counts only
    return out


@router.get("/workspaces", summary="Workspaces and projects the caller may read")
async def list_workspaces(request: Request, principal: PrincipalDep) -> list[dict[str, Any]]:
    """Return ``[{"workspace", "workspace_id", "projects": [{"project", "project_id"}]}]``."""
    items = await read(request, scopes.list_workspaces)
    if principal.is_root:
        return items
    out = []
    for ws in items:
        projects = [p for p in ws["projects"] if principal.can_read(ws["workspace"], p["project"])]
        if projects:
            out.append({**ws, "projects": projects})
    return out
