"""memory_delete_page: delete one page by exact path."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from aimem_mcp.args import Scoped
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import tool
from aimem_common.models import DbIdOrZero


class Args(Scoped):
    path: str = Field(description="Exact page path, e.g. `notes/old.md`.", min_length=1, max_length=512)
    expected_page_id: DbIdOrZero | None = Field(
        None, description="Delete only if the live page is still this version (`page_id` from memory_read_page).")


@tool(name="memory_delete_page", title="Delete a wiki page", args=Args, read_only=False, destructive=True, idempotent=True)
async def memory_delete_page(call: ToolCall, args: Args) -> dict[str, Any]:
    """Delete the page at an exact `path` (the file and every indexed version; git keeps history).

    Use only when the user asks to remove a page or a mirror must propagate a deletion.
    To mark a page outdated without deleting it, use memory_feedback with `stale`/`wrong`;
    to replace it, write a new version with memory_write_page. Idempotent: deleting a
    missing page returns `deleted: false`. The project must exist. With `expected_page_id`
    the page is deleted only while it is still that version; otherwise nothing is deleted
    and the call fails with JSON-RPC -32600, `data: {reason: "precondition_failed", path,
    expected_page_id, current_page_id}`: re-read the page and decide.

    Returns `{path, deleted, pre_checkpoint, checkpoint, ...}` (the writer's result).
    """
    ws, pj = call.write_names(args.workspace, args.project)
    payload = {"path": args.path, "expected_page_id": args.expected_page_id}
    result = await call.command("page.delete", payload, workspace=ws, project=pj)
    return {"workspace": ws, "project": pj, "path": args.path, **result}
