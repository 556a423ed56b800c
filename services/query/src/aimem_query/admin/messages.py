"""Cross-project messages for the operator CLI (``aimem message send|pop|cancel``).

The writes of the memory_message_* MCP tools, as root. Listing is ``GET /api/v1/.../messages``.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from aimem_common.models import DbId, validate_name
from aimem_query.deps import read, resolve_scope, send

router = APIRouter()


class _Scoped(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workspace: str = "default"
    project: str


class SendBody(_Scoped):
    to_workspace: str | None = None
    to_project: str
    body: str = Field(min_length=1, max_length=16 * 1024)
    subject: str | None = Field(None, max_length=512)


class IdBody(_Scoped):
    message_id: DbId | None = None


@router.post("/messages/send")
async def message_send(body: SendBody, request: Request) -> dict:
    """Send a message from ``workspace/project`` (must exist) to another project's inbox
    (must exist: never created)."""
    to_ws = validate_name(body.to_workspace or body.workspace, "to_workspace")
    to_pj = validate_name(body.to_project, "to_project")
    await read(request, resolve_scope, body.workspace, body.project)
    await read(request, resolve_scope, to_ws, to_pj)
    payload = {"to_workspace": to_ws, "to_project": to_pj, "body": body.body, "subject": body.subject}
    return await send(request, "message.send", payload, workspace=body.workspace, project=body.project)


@router.post("/messages/pop")
async def message_pop(body: IdBody, request: Request) -> dict:
    """Claim one pending inbox message (oldest, or ``message_id``), exactly once."""
    await read(request, resolve_scope, body.workspace, body.project)
    return await send(request, "message.pop", {"message_id": body.message_id},
                      workspace=body.workspace, project=body.project)


@router.post("/messages/cancel")
async def message_cancel(body: IdBody, request: Request) -> dict:
    """Retract a pending outbox message (``message_id``), or every pending one."""
    await read(request, resolve_scope, body.workspace, body.project)
    return await send(request, "message.cancel", {"message_id": body.message_id},
                      workspace=body.workspace, project=body.project)
