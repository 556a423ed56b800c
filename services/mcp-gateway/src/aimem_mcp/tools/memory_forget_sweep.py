"""memory_forget_sweep: the retention pass (maintainer job)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from aimem_mcp.args import Scoped
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import tool


class Args(Scoped):
    dry_run: bool = Field(False, description="Only report what would be evicted, purged or expired.")


@tool(name="memory_forget_sweep", title="Forget sweep", args=Args, read_only=False, destructive=True, idempotent=False)
async def memory_forget_sweep(call: ToolCall, args: Args) -> dict[str, Any]:
    """Run the retention pass now: evict cold episodic pages, purge old tombstones, delete TTL-expired pages.

    The maintainer runs it on a schedule; call it (ideally with `dry_run: true` first) when
    asked to clean up memory. Semantic, procedural and pinned pages never decay. Needs a
    running maintainer (otherwise JSON-RPC -32002 `maintainer_unavailable`). To delete one
    page use memory_delete_page.

    Returns the maintainer's report (`evicted`, `expired`, `purged`, `dry_run`, ...).
    """
    ws, pj = call.write_names(args.workspace, args.project)
    await call.read_scope(ws, pj)
    result = await call.maintainer("forget_sweep", {"dry_run": args.dry_run}, workspace=ws, project=pj)
    return {"workspace": ws, "project": pj, **result}
