"""``/admin/pending-writes``: list, approve and reject auto-improve proposals.

Approve/reject are writer ops (``proposal.approve`` / ``proposal.reject``) answered after
commit; the list is a read-only query. The proposals come from the maintainer's
auto-improve job; the admin router includes this module (``aimem_query.admin.__init__``).

* ``GET  /admin/pending-writes?workspace=&project=&status=pending|approved|rejected|any&limit=``
  → ``{"proposals": [{id, workspace, project, session_id, path, title, rationale, confidence,
  status, created_at, decided_at, decided_by, applied_page_id, body_chars}]}``
* ``POST /admin/pending-writes/approve`` ``{"ids": [int], "workspace"?, "project"?}``
* ``POST /admin/pending-writes/reject``  ``{"ids": [int], "reason"?, "workspace"?, "project"?}``
  → ``{"proposals": [{id, path, status, applied_page_id}]}`` (all or nothing: a proposal
  that is not pending, or whose target page changed, fails the whole request with 409)
"""

from __future__ import annotations

import sqlite3
from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from aimem_common.read import proposals, scopes
from aimem_common.commands import make_envelope
from aimem_query.deps import bus_of, read
from aimem_common.models import DbId

router = APIRouter()


def _list(conn: sqlite3.Connection, workspace: str | None, project: str | None, status: str | None,
          limit: int) -> list[dict[str, Any]]:
    scope = scopes.resolve(conn, workspace or "default", project) if project else None
    return proposals.list_proposals(conn, scope.project_id if scope else None, status, limit)


@router.get("/pending-writes")
async def list_pending(
    request: Request,
    workspace: str | None = None,
    project: str | None = None,
    status: Literal["pending", "approved", "rejected", "any"] = "pending",
    limit: int = Query(100, ge=1, le=1000),
) -> dict:
    rows = await read(request, _list, workspace, project, None if status == "any" else status, limit)
    return {"proposals": rows}


@router.get("/pending-writes/{proposal_id}")
async def get_pending(request: Request, proposal_id: DbId) -> dict:
    return await read(request, proposals.get_proposal, proposal_id)


class Decision(BaseModel):
    ids: list[DbId] = Field(min_length=1, max_length=100)
    reason: str | None = Field(None, max_length=2000)
    workspace: str | None = None
    project: str | None = None


async def _decide(request: Request, op: str, body: Decision) -> dict:
    payload: dict[str, Any] = {"ids": body.ids}
    if op == "proposal.reject" and body.reason:
        payload["reason"] = body.reason
    env = make_envelope(op, payload, workspace=body.workspace, project=body.project,
                        actor=getattr(request.state, "admin_actor", None) or "root")
    return await bus_of(request).request(env)


@router.post("/pending-writes/approve")
async def approve(request: Request, body: Decision) -> dict:
    return await _decide(request, "proposal.approve", body)


@router.post("/pending-writes/reject")
async def reject(request: Request, body: Decision) -> dict:
    return await _decide(request, "proposal.reject", body)
