"""memory_recent: most recently updated pages (with an incremental form)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from aimem_common.read.pages import recent, recent_since

from aimem_mcp.args import Scoped, limit_field
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import tool


class Args(Scoped):
    limit: int = limit_field(20, 500, "pages")
    updated_since: str | None = Field(
        None, description="Incremental mode: only pages updated strictly after this RFC 3339 time, oldest first."
    )
    cursor: str | None = Field(None, description="Incremental mode: the `next_cursor` of the previous call.", max_length=2000)
    include_expired: bool = Field(False, description="Also list pages past their TTL (non-incremental mode).")


@tool(name="memory_recent", title="Recently updated pages", args=Args, read_only=True, destructive=False, idempotent=True)
async def memory_recent(call: ToolCall, args: Args) -> dict[str, Any]:
    """List the project's most recently updated live pages (titles and metadata, no bodies).

    Use to see what changed lately or to sync a local cache. Default: newest first. With
    `updated_since` (then `cursor` until `next_cursor` is null) it pages through pages
    updated after that time, oldest first - deletions are not reported. To find pages about
    a topic use memory_query; for an overview of the project use memory_briefing.

    Returns `{pages: [PageSummary], next_cursor?}`.
    """
    scope = await call.read_scope(args.workspace, args.project)
    base = {"workspace": scope.workspace, "project": scope.project}
    if args.updated_since or args.cursor:
        out = await call.read(
            recent_since, scope, updated_since=args.updated_since, cursor=args.cursor, limit=args.limit
        )
        return {**base, **out}
    pages = await call.read(recent, scope, limit=args.limit, include_expired=args.include_expired)
    return {**base, "pages": pages}
