"""memory_restore_page: a page's checkpoints, and one written back (root only)."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import Field

from aimem_common.models import validate_page_path
from aimem_common.wikihistory import list_checkpoints

from aimem_mcp.args import Scoped, limit_field
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import tool


class Args(Scoped):
    path: str = Field(description="Exact page path, e.g. `decisions/0007-cursor-pagination.md`.",
                      min_length=1, max_length=512)
    rev: str | None = Field(None, min_length=4, max_length=64, pattern=r"^[0-9a-fA-F]+$",
                            description="A checkpoint id (or unique prefix) from the list: write that version back.")
    limit: int = limit_field(20, 200, "checkpoints")


@tool(name="memory_restore_page", title="Restore a page from a checkpoint", args=Args, read_only=False,
      destructive=True, idempotent=False)
async def memory_restore_page(call: ToolCall, args: Args) -> dict[str, Any]:
    """List the wiki checkpoints that changed one page, or write one of them back (root only).

    Without `rev`: the git checkpoints that changed the page at `path`, newest first,
    including the one that deleted it; nothing changes. With `rev`: that version becomes the
    page's new current version through the ordinary page write (sanitizer, supersession);
    the version it replaces stays in the history. Only page text comes back: sessions,
    handoffs and other database rows are not rolled back (that is `aimem restore`).

    Returns `{checkpoints: [{oid, short, message, time, author}], count}` without `rev`;
    with it the write's result (`page_id`, `version`, ...) and `restored_from: {rev}`.
    """
    call.require_root("memory_restore_page")
    path = validate_page_path(args.path)
    scope = await call.read_scope(args.workspace, args.project)
    base = {"workspace": scope.workspace, "project": scope.project, "path": path}
    if args.rev is None:
        prefix = f"{scope.workspace_id}/{scope.project_id}/{path}"
        items = await asyncio.to_thread(list_checkpoints, call.settings.wiki_dir, limit=args.limit, prefix=prefix)
        return {**base, "checkpoints": items, "count": len(items)}
    result = await call.command("page.restore", {"path": path, "rev": args.rev},
                                workspace=scope.workspace, project=scope.project)
    return {**base, **result}
