"""memory_lint: rule-based (+ optional LLM) wiki lint (maintainer job)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from aimem_mcp.args import Scoped
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import tool


class Args(Scoped):
    llm: bool = Field(False, description="Also ask the LLM for contradiction findings (needs a provider).")


@tool(name="memory_lint", title="Lint the wiki", args=Args, read_only=False, destructive=True, idempotent=False, open_world=True)
async def memory_lint(call: ToolCall, args: Args) -> dict[str, Any]:
    """Check the project's wiki for broken links, orphans, flagged pages and (with `llm: true`) contradictions.

    Findings are written as a report page under `_lint/` (replacing the previous report).
    Use when asked to tidy memory or before a large consolidation. The rule-based part
    needs only a running maintainer; `llm: true` without a provider fails with a clear
    JSON-RPC error (-32002, `llm_not_configured`).

    Returns the maintainer's result (`findings`, `report_path`, ...).
    """
    ws, pj = call.write_names(args.workspace, args.project)
    await call.read_scope(ws, pj)
    result = await call.maintainer("lint", {"llm": args.llm}, workspace=ws, project=pj)
    return {"workspace": ws, "project": pj, **result}
