"""memory_profile: the caller's profile memory (preferences stated once, seen in every project)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from aimem_common.commands.profile import MAX_ENTRY_CHARS
from aimem_common.read import profile
from aimem_common.models import WORKSPACE_DOC

from aimem_mcp.args import PROJECT_DOC
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import ToolArgs, tool


class Args(ToolArgs):
    action: Literal["list", "add", "remove"] = Field(
        "list", description="`list` your profile, `add` one preference (`text`), `remove` one (`entry_id`).")
    text: str | None = Field(None, description="The preference, in the user's words (add).", min_length=1,
                             max_length=MAX_ENTRY_CHARS)
    entry_id: int | None = Field(None, description="The entry to remove (its `id` from `list`).", ge=1)
    workspace: str | None = Field(None, description=WORKSPACE_DOC + " Where it was stated (add, optional).",
                                  max_length=128)
    project: str | None = Field(None, description=PROJECT_DOC + " Where it was stated (add, optional): purging "
                                "that project forgets it.", min_length=1, max_length=128)
    session_id: str | None = Field(None, description="Your session id (add, optional): purging that session "
                                   "forgets it.", max_length=256)

    @model_validator(mode="after")
    def _fields_of_action(self) -> "Args":
        if self.action == "add" and not self.text:
            raise ValueError("action `add` needs `text`")
        if self.action == "remove" and self.entry_id is None:
            raise ValueError("action `remove` needs `entry_id`")
        return self


@tool(name="memory_profile", title="Profile memory", args=Args, read_only=False, destructive=True,
      idempotent=False, fenced=True)
async def memory_profile(call: ToolCall, args: Args) -> dict[str, Any]:
    """List, add or remove the user's standing preferences (profile memory).

    A preference the user states once ("always answer in French", "I use pnpm, never npm")
    is added here and shown at the start of every later session of this user, in any
    project. Add only what the user asked to be remembered about themselves, never secrets
    (they are redacted) and never project facts (write a page for those). Only you (your
    credential) and an admin can see your profile; a key without any grant has none.

    Not project-scoped: the profile is per person. `project` on `add` only records where it
    was stated.

    Returns `{entries: [{id, body, created_at, source_project, ...}], count}` for `list`,
    `{entry, created}` for `add` (an identical entry is returned, not copied), `{removed:
    id}` for `remove`; the text is the JSON inside one <aimem-memory> fence, because entries
    are untrusted historical text that can never end the fence.
    """
    owner = profile.require_profile(call.principal, write=args.action != "list")
    if args.action == "list":
        rows = await call.read(profile.entries, owner)
        return {"entries": rows, "count": len(rows)}
    payload: dict[str, Any] = {"user_id": owner}
    scope: dict[str, Any] = {"workspace": None, "project": None}
    if args.action == "add":
        payload.update(body=args.text, session_id=args.session_id)
        if args.project:  # the source: only a project the caller may write
            ws, pj = call.write_names(args.workspace, args.project)
            scope = {"workspace": ws, "project": pj}
        return await call.command("profile.add", payload, **scope)
    payload["entry_id"] = args.entry_id
    return await call.command("profile.remove", payload, **scope)
