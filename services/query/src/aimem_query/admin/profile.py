"""Profile memory for the operator CLI.

``aimem profile list|add|remove``: the caller's own profile, or with ``user`` a user's (an admin sees and removes any; nobody else reaches
``/admin``). Agents use the ``memory_profile`` MCP tool for their own."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from aimem_common.auth import get_principal
from aimem_common.commands.profile import MAX_ENTRY_CHARS
from aimem_common.errors import ConflictError, NotFoundError
from aimem_common.models import DbId, validate_name
from aimem_common.read import profile
from aimem_query.deps import read, resolve_scope, send

router = APIRouter()


class AddBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_ENTRY_CHARS)
    user: str | None = Field(None, max_length=128)
    workspace: str = "default"
    project: str | None = None


async def _owner(request: Request, user: str | None) -> int | None:
    """The profile to act on: ``user``'s (404 ``not_found`` for an unknown name), else the caller's."""
    if user is None:
        return profile.owner_of(await get_principal(request))
    uid = await read(request, profile.user_id_of, user)
    if uid is None:
        raise NotFoundError(f"user {user!r} not found", code="not_found", data={"user": user})
    return uid


@router.get("/profile")
async def profile_list(request: Request, user: str | None = None) -> dict:
    """List a profile, oldest first: ``{"entries": [...], "count"}`` (``read.profile.entries``)."""
    rows = await read(request, profile.entries, await _owner(request, user))
    return {"user": user, "entries": rows, "count": len(rows)}


@router.post("/profile")
async def profile_add(body: AddBody, request: Request) -> dict:
    """Add one preference (secrets redacted); ``project`` (must exist) records where it was stated.

    409 ``no_profile`` for a ``user`` who holds no profile (not root, no grant): nobody would
    ever see the entry."""
    owner = await _owner(request, body.user)
    if body.user is not None and not await read(request, profile.user_holds_profile, owner):
        raise ConflictError(f"{body.user} has no grant, so no profile memory: an entry would never be seen "
                            f"(grant a project first: aimem user grant {body.user} ...)", code="no_profile",
                            data={"user": body.user})
    scope = {}
    if body.project is not None:
        validate_name(body.workspace, "workspace")
        validate_name(body.project, "project")
        await read(request, resolve_scope, body.workspace, body.project)
        scope = {"workspace": body.workspace, "project": body.project}
    return await send(request, "profile.add", {"user_id": owner, "body": body.text}, **scope)


@router.delete("/profile/{entry_id}")
async def profile_remove(entry_id: DbId, request: Request, user: str | None = None) -> dict:
    """Remove one preference (404 ``not_found`` when that profile has no such entry)."""
    owner = await _owner(request, user)
    return await send(request, "profile.remove", {"user_id": owner, "entry_id": entry_id})
