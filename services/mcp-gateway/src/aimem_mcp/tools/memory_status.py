"""memory_status: counts, paths and versions."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from aimem_common.read.status import package_version, status

from aimem_mcp.args import WORKSPACE_DOC
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import ToolArgs, tool


class Args(ToolArgs):
    workspace: str | None = Field(None, description=WORKSPACE_DOC, max_length=128)
    project: str | None = Field(None, description="Project to count; omit for store-wide counts (root only).", max_length=128)


@tool(name="memory_status", title="Memory status", args=Args, read_only=True, destructive=False, idempotent=True)
async def memory_status(call: ToolCall, args: Args) -> dict[str, Any]:
    """Report counts (pages, sessions, observations, open handoffs, pending messages), versions and size.

    Use to check that memory is reachable and populated, or to diagnose an empty search.
    With `project` the counts are that project's (it must exist); without, store-wide
    (root only when auth is on). Not an overview of the work - that is memory_briefing.

    Returns `{counts, schema_version, sqlite_version, version, db_bytes, last_page_update,
    data_dir, gateway_version}` (`db_bytes` and `data_dir` null for a scoped key); with
    `project` also `root`, `origin` and `aliases` (the other roots the project was seen at: a
    moved, renamed or second checkout).
    """
    if args.project:
        scope = await call.read_scope(args.workspace, args.project)
        out = await call.read(status, scope)
    else:
        call.require_root("store-wide memory_status")
        out = await call.read(status, None)
    # The file and the data dir are everyone's: a scoped caller sees its project's counts only.
    out["data_dir"] = str(call.settings.data_dir) if call.principal.is_root else None
    if not call.principal.is_root:
        out["db_bytes"] = None
    out["gateway_version"] = package_version("aimem-mcp-gateway")
    return out
