"""memory_resolve_write_target: where a write would land, without creating anything."""

from __future__ import annotations

from typing import Any

from aimem_common.errors import NotFoundError
from aimem_common.read import scopes

from aimem_mcp.args import Scoped
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import tool


class Args(Scoped):
    pass


@tool(name="memory_resolve_write_target", title="Resolve a write destination", args=Args, read_only=True,
      destructive=False, idempotent=True)
async def memory_resolve_write_target(call: ToolCall, args: Args) -> dict[str, Any]:
    """Check where writes with this `workspace` + `project` (or `project_id`) would land, creating nothing.

    Use before a bulk import or a mirror that writes into several projects: resolve every
    destination first, so an unknown or unauthorized one is found before anything is
    written. Checks the caller's write grant (an unauthorized destination is an error, as
    the write would be); never creates, renames or promotes a workspace or project. A
    `project_id` must name an existing project (in `workspace` when given). Then pass the
    returned `project_id` (stable across renames) or the names to memory_write_page /
    memory_write_pages_batch.

    Returns `{workspace, project, workspace_id, project_id, workspace_exists, project_exists,
    would_create}`; the ids are null for what does not exist yet.
    """
    if args.project_id:
        await call.select_project_id(args)  # must exist and be readable
    ws, pj = call.write_names(args.workspace, args.project)
    scope = await call.read(scopes.find, ws, pj)
    if scope is None and not call.principal.is_root and not call.principal.can_read(ws, pj):
        raise NotFoundError(f"{ws}/{pj} not found", code="not_found")  # pragma: no cover - write implies read
    wid = scope.workspace_id if scope else await call.read(scopes.workspace_id, ws)
    return {
        "workspace": ws,
        "project": pj,
        "workspace_id": wid,
        "project_id": scope.project_id if scope else None,
        "workspace_exists": wid is not None,
        "project_exists": scope is not None,
        "would_create": scope is None,
    }
