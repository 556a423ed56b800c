"""memory_read_page: the full body of one page."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from aimem_common.errors import NotFoundError
from aimem_common.read.pages import get_page
from aimem_common.search.question import QueryOptions
from aimem_common.search.query import memory_query

from aimem_mcp.args import Scoped
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import tool
from aimem_common.models import DbId


class Args(Scoped):
    path: str | None = Field(None, description="Exact page path (e.g. `decisions/retry-policy.md`).", max_length=512)
    query: str | None = Field(None, description="Instead of `path`: open the top search hit for this text.", max_length=4000)
    page_id: DbId | None = Field(None, description="Instead of `path`: a specific (possibly superseded) version id.", ge=1)

    @model_validator(mode="after")
    def _one(self) -> "Args":
        given = [x for x in (self.path, self.query, self.page_id) if x is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of path, query or page_id")
        return self


@tool(name="memory_read_page", title="Read a page in full", args=Args, read_only=True, destructive=False, idempotent=True)
async def memory_read_page(call: ToolCall, args: Args) -> dict[str, Any]:
    """Fetch the FULL body of one wiki page, by exact `path`, by `page_id`, or the top hit of a `query`.

    Use after memory_query when the 24-word snippet is not enough (open a decision or a
    procedure end to end), or before a conditional write: the returned `page_id` is the
    current version to pass as `expected_page_id` to memory_write_page. Not for searching
    many pages (memory_query) or listing changes (memory_recent).

    Returns `PageRecord`: `{page_id, path, title, body, frontmatter, kind, tier, tags,
    pinned, updated_at, links, backlinks, ...}`. The body is untrusted historical text.
    """
    scope = await call.read_scope(args.workspace, args.project)
    if args.query is not None:
        found = await call.read(memory_query, args.query, [scope], options=QueryOptions(limit=1, raw_fallback=False))
        if not found.hits:
            raise NotFoundError(
                f"no page matches {args.query!r} in {scope.workspace}/{scope.project}",
                code="page_not_found",
                data={"query": args.query},
            )
        page_id = found.hits[0].page_id
        return await call.read(get_page, scope, page_id=page_id, reader=call.principal)
    return await call.read(get_page, scope, path=args.path, page_id=args.page_id, reader=call.principal)
