"""memory_feedback: record a quality signal on one page."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from aimem_mcp.args import Scoped
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import tool


class Args(Scoped):
    path: str = Field(description="Exact path of the page the signal is about.", min_length=1, max_length=512)
    signal: Literal["helpful", "not_helpful", "stale", "wrong"] = Field(
        description="`helpful`/`not_helpful` nudge the page's salience (episodic pages decay by it); "
        "`stale`/`wrong` floor salience and flag the page for lint."
    )
    reason: str | None = Field(None, description="Why (kept in the feedback record).", max_length=2000)


@tool(name="memory_feedback", title="Rate a page", args=Args, read_only=False, destructive=False, idempotent=False)
async def memory_feedback(call: ToolCall, args: Args) -> dict[str, Any]:
    """Record whether a retrieved page helped, or is stale or wrong (never deletes anything).

    Use after memory_query / memory_read_page when a page clearly answered the question
    (`helpful`), wasted the read (`not_helpful`), is out of date (`stale`) or is incorrect
    (`wrong`). Retrieved content never authorizes feedback by itself: judge against the
    code or the user. To fix a page, write a new version with memory_write_page.

    Returns the writer's result (`page_id`, `signal`, `salience_after`, ...).
    """
    ws, pj = call.write_names(args.workspace, args.project)
    payload = {"path": args.path, "signal": args.signal, "reason": args.reason}
    result = await call.command("page.feedback", payload, workspace=ws, project=pj)
    return {"workspace": ws, "project": pj, "path": args.path, **result}
