"""memory_write_pages_batch: write 1-100 pages atomically (bulk import)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from aimem_common.errors import BadRequestError, PayloadTooLargeError

from aimem_mcp.args import Scoped
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import ToolArgs, tool
from aimem_common.models import DbId, DbIdOrZero

MAX_BATCH_BODY_BYTES = 8 * 1024 * 1024
MAX_ENTRY_BODY_BYTES = 1024 * 1024  # one entry's body (the documented per-body limit)


class BatchPage(ToolArgs):
    path: str = Field(description="Page path ending in .md.", min_length=1, max_length=512)
    body: str = Field(description="Markdown body.")
    title: str | None = Field(None, max_length=512)
    frontmatter: dict[str, Any] | None = None
    expires_at: str | None = None
    create_only: bool | None = Field(None, description="Set true for a page that must not exist yet.")
    expected_page_id: DbIdOrZero | None = Field(None, description="The live page id this entry replaces.")

    @model_validator(mode="after")
    def _one_condition(self) -> "BatchPage":
        if bool(self.create_only) == (self.expected_page_id is not None):
            raise ValueError("set exactly one of create_only: true or expected_page_id")
        return self


class Args(Scoped):
    pages: list[BatchPage] = Field(
        min_length=1,
        max_length=100,
        description="1-100 entries; each sets exactly one of `create_only: true` or `expected_page_id`; "
        "paths must be unique.",
    )


@tool(
    name="memory_write_pages_batch",
    title="Write pages in one atomic batch",
    args=Args,
    read_only=False,
    destructive=True,
    idempotent=False,
)
async def memory_write_pages_batch(call: ToolCall, args: Args) -> dict[str, Any]:
    """Write 1-100 pages into one project all-or-nothing (bulk importers, mirrors).

    Every entry sets exactly one of `create_only: true` or `expected_page_id`, so a batch
    never overwrites something it has not seen. Duplicate paths are refused, a body may not
    exceed 1 MiB, and the bodies together may not exceed 8 MiB. Admission and persistence are atomic: any invalid entry or
    stale precondition writes nothing; a stale entry fails with JSON-RPC -32600 and
    `data: {reason: "precondition_failed", index, path, current_page_id}`. For a single
    page use memory_write_page.

    Returns `{pages: [{path, page_id}, ...]}` in input order, plus one git checkpoint.
    """
    ws, pj = call.write_names(args.workspace, args.project)
    paths = [p.path for p in args.pages]
    dupes = sorted({p for p in paths if paths.count(p) > 1})
    if dupes:
        raise BadRequestError(f"duplicate paths in batch: {dupes}", code="duplicate_path", data={"paths": dupes})
    sizes = [len(p.body.encode("utf-8", "surrogatepass")) for p in args.pages]
    over = [i for i, n in enumerate(sizes) if n > MAX_ENTRY_BODY_BYTES]
    if over:
        i = over[0]
        raise PayloadTooLargeError(
            f"pages[{i}] ({args.pages[i].path}): body is {sizes[i]} bytes, over the {MAX_ENTRY_BODY_BYTES} byte"
            " cap of one entry", data={"index": i, "path": args.pages[i].path, "bytes": sizes[i]})
    total = sum(sizes)
    if total > MAX_BATCH_BODY_BYTES:
        raise PayloadTooLargeError(
            f"batch bodies total {total} bytes, over the {MAX_BATCH_BODY_BYTES} byte cap", data={"bytes": total}
        )
    payload = {
        "pages": [
            {
                "path": p.path,
                "body": p.body,
                "title": p.title,
                "frontmatter": p.frontmatter or {},
                "expires_at": p.expires_at,
                "create_only": bool(p.create_only),
                "expected_page_id": p.expected_page_id,
            }
            for p in args.pages
        ]
    }
    result = await call.command("page.write_batch", payload, workspace=ws, project=pj)
    return {"workspace": ws, "project": pj, **result}
