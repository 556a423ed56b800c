"""memory_auto_improve: review a completed session and apply or stage wiki edits (maintainer job)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from aimem_mcp.args import Scoped
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import tool


class Args(Scoped):
    session_id: str | None = Field(
        None,
        description="Session to review; omit for the newest completed session without a previous run.",
        max_length=256,
    )


@tool(
    name="memory_auto_improve",
    title="Auto-improve from a session (LLM)",
    args=Args,
    read_only=False,
    destructive=False,
    idempotent=False,
    open_world=True,
)
async def memory_auto_improve(call: ToolCall, args: Args) -> dict[str, Any]:
    """Review a completed session with the LLM and apply (or stage for approval) validated wiki edits.

    The server already schedules this for new sessions; call it to rerun one session or to
    catch up. Without `session_id`, repeated calls advance through unreviewed sessions.
    Proposals go through the approval path (`require_approval` leaves them pending). Needs
    an LLM provider and a running maintainer, otherwise a clear JSON-RPC error (-32002).

    Returns the maintainer's result (`session_id`, `proposals`, `applied`, `pending`, ...).
    """
    ws, pj = call.write_names(args.workspace, args.project)
    await call.read_scope(ws, pj)
    result = await call.maintainer("auto_improve", {"session_id": args.session_id}, workspace=ws, project=pj)
    return {"workspace": ws, "project": pj, **result}
