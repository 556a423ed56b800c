"""memory_consolidate: LLM rewrite of a session into durable pages (maintainer job)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from aimem_mcp.args import Scoped
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import tool


class Args(Scoped):
    session_id: str | None = Field(None, description="Session to consolidate; omit for the latest completed one.", max_length=256)
    multi_page: bool = Field(False, description="Fan out into several pages (concepts/, decisions/, gotchas/) atomically.")
    instructions: str | None = Field(
        None, description="One-off guidance for this run (overrides the project's _prompts/consolidation.md).", max_length=2000
    )


@tool(
    name="memory_consolidate",
    title="Consolidate a session (LLM)",
    args=Args,
    read_only=False,
    destructive=True,
    idempotent=False,
    open_world=True,
)
async def memory_consolidate(call: ToolCall, args: Args) -> dict[str, Any]:
    """Have the configured LLM rewrite a session's summary into durable wiki pages.

    Use when a finished session produced knowledge worth keeping beyond the rule-based
    session page (decisions, gotchas, procedures). Needs an LLM provider on the server and
    a running maintainer; otherwise it fails with a clear JSON-RPC error (-32002, `data.code`
    `llm_not_configured` or `maintainer_unavailable`). Writes go through the writer and are
    checkpointed in git. To save one specific fact yourself, memory_write_page is cheaper.

    Returns the maintainer's result (`pages` written, `session_id`, ...).
    """
    ws, pj = call.write_names(args.workspace, args.project)
    await call.read_scope(ws, pj)
    job_args = {"session_id": args.session_id, "multi_page": args.multi_page, "instructions": args.instructions}
    result = await call.maintainer("consolidate", job_args, workspace=ws, project=pj)
    return {"workspace": ws, "project": pj, **result}
