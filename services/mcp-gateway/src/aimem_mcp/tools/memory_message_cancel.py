"""memory_message_cancel: retract unread sent messages."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from aimem_mcp.args import Scoped
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import tool
from aimem_common.models import DbId


class Args(Scoped):
    message_id: DbId | None = Field(None, description="Exact id of a pending sent message; omit to clear the whole outbox.", ge=1)


@tool(name="memory_message_cancel", title="Retract sent messages", args=Args, read_only=False, destructive=True, idempotent=True)
async def memory_message_cancel(call: ToolCall, args: Args) -> dict[str, Any]:
    """Retract a pending message this project sent (`message_id`), or every pending one when omitted.

    Scoped to the sender project: you can only cancel your own project's outbox, and only
    messages nobody has popped yet. See the outbox with memory_message_list `box: "outbox"`.

    Returns the writer's result (`cancelled`: count or ids).
    """
    ws, pj = call.write_names(args.workspace, args.project)
    await call.read_scope(ws, pj)
    result = await call.command("message.cancel", {"message_id": args.message_id}, workspace=ws, project=pj)
    return {"workspace": ws, "project": pj, **result}
