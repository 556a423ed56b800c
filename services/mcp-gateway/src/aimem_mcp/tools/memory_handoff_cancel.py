"""memory_handoff_cancel: expire a handoff created by mistake."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from aimem_mcp.args import Scoped
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import tool
from aimem_common.models import DbId


class Args(Scoped):
    handoff_id: DbId = Field(description="Exact id of an open handoff you can see (from memory_handoff_list).", ge=1)
    any_owner: bool = Field(False, description="Root only: cancel another operator's private handoff (recovery).")


@tool(name="memory_handoff_cancel", title="Cancel a handoff", args=Args, read_only=False, destructive=True, idempotent=True)
async def memory_handoff_cancel(call: ToolCall, args: Args) -> dict[str, Any]:
    """Mark an open handoff expired when it was created by mistake (needs its exact id).

    Use only to retract a handoff nobody should receive. Accepting is memory_handoff_accept;
    listing is memory_handoff_list. An unknown id is an error. Root may pass `any_owner:
    true` to cancel another operator's private handoff.

    Returns the writer's result (`handoff_id`, `status`).
    """
    if args.any_owner:
        call.require_root("any_owner=true")
    ws, pj = call.write_names(args.workspace, args.project)
    await call.read_scope(ws, pj)
    payload = {"handoff_id": args.handoff_id, "any_owner": args.any_owner}
    result = await call.command("handoff.cancel", payload, workspace=ws, project=pj)
    return {"workspace": ws, "project": pj, "handoff_id": args.handoff_id, **result}
