"""``/admin/purges``: what purges removed and what they refused since, and lifting them.

* ``GET /admin/purges?all=false&limit=100&session_id=`` → ``{"purges": [...], "summary": {...}}``:
  the purge tombstones, newest first (``removed``: the purge's deleted counts;
  ``refused_events`` / ``refused`` by op: late events dropped since; ``lifted_at`` once lifted),
  ``all`` includes lifted ones.
* ``POST /admin/purges/lift`` ``{"session_id"}``, ``{"workspace", "project"}`` or
  ``{"workspace", "workspace_only": true}`` →
  ``{"lifted": [ids], "target"}``: later events of
  that id or name are stored again (what was purged stays purged); 404 ``no_tombstone``.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field, model_validator

from aimem_common.read import tombstones
from aimem_query.deps import read, send

router = APIRouter()


@router.get("/purges")
async def list_purges(request: Request, all: bool = False, limit: int = Query(100, ge=1, le=10_000),
                      session_id: str | None = Query(None, max_length=256)) -> dict:
    """List purge tombstones (live unless ``all``) newest first, with the summary."""
    rows = await read(request, lambda c: tombstones.list_tombstones(
        c, limit=limit, include_lifted=all, session_id=session_id))
    return {"purges": rows, "summary": await read(request, tombstones.summary)}


class LiftBody(BaseModel):
    """What ``POST /admin/purges/lift`` lifts: exactly one of a session id, a project, a workspace."""

    model_config = ConfigDict(extra="forbid")
    session_id: str | None = Field(default=None, min_length=1, max_length=256)
    workspace: str = "default"
    project: str | None = None
    workspace_only: bool = False

    @model_validator(mode="after")
    def _one_target(self) -> "LiftBody":
        if (self.session_id is not None) + (self.project is not None) + self.workspace_only != 1:
            raise ValueError("name exactly one target: session_id, project or workspace_only")
        return self


@router.post("/purges/lift")
async def lift_purge(body: LiftBody, request: Request) -> dict:
    """Lift the tombstones of a session id, a project or a workspace (``purge.lift``)."""
    if body.session_id is not None:
        return await send(request, "purge.lift", {"session_id": body.session_id})
    # A workspace lift names no project; the envelope's scope needs one (never resolved).
    return await send(request, "purge.lift", {"workspace_only": body.workspace_only},
                      workspace=body.workspace, project=body.project or "default")
