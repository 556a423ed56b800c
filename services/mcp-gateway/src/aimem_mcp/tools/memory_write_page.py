"""memory_write_page: write one durable wiki page through the writer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from aimem_common.models import GLOBAL_PROJECT

from aimem_mcp.args import Scoped
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import tool
from aimem_common.models import DbId, DbIdOrZero


class Args(Scoped):
    path: str = Field(
        description="Page path relative to the project, ending in .md, e.g. `decisions/retry-policy.md` "
        "(directories: concepts/, decisions/, gotchas/, procedures/, _rules/, _slots/, or any notes path).",
        min_length=1,
        max_length=512,
    )
    body: str = Field(description="Markdown body of the page (the full new version, not a diff).")
    title: str | None = Field(None, description="Page title; default: the first heading or the file name.", max_length=512)
    frontmatter: dict[str, Any] | None = Field(
        None, description="Extra frontmatter keys (e.g. `tags`, `entities`, `tier`, `pinned`)."
    )
    scope: Literal["project", "global"] = Field(
        "project",
        description="`global` writes into the reserved `_global` preferences scope of the workspace "
        "(user-wide preferences every project sees); `project` (default) writes into `project`.",
    )
    expires_at: str | None = Field(
        None, description="Hard TTL: RFC 3339 time or a date (YYYY-MM-DD); the page is deleted after it."
    )
    create_only: bool = Field(False, description="Fail with precondition_failed if a live page already exists at `path`.")
    expected_page_id: DbIdOrZero | None = Field(
        None,
        description="Write only if the live page's id (the `page_id` from memory_read_page) still equals this; "
        "0 means the page must not exist. Otherwise nothing is written and the call fails with "
        "precondition_failed carrying `current_page_id`.",
    )


@tool(name="memory_write_page", title="Write a wiki page", args=Args, read_only=False, destructive=True, idempotent=False)
async def memory_write_page(call: ToolCall, args: Args) -> dict[str, Any]:
    """Save durable knowledge as a wiki page (creates or supersedes the page at `path`; history is kept).

    Use when the user explicitly asks to remember, note or document something that should
    outlive this session (a decision, a gotcha, a procedure, a preference). Do NOT use it to
    pass work to the next agent (use memory_handoff_begin) or to message another project
    (memory_message_send). Writes may create the workspace/project. Conditional writes:
    `create_only: true` or `expected_page_id` (from memory_read_page); a stale condition
    fails with JSON-RPC -32600 and `data: {reason: "precondition_failed", path,
    expected_page_id, current_page_id}` - re-read and decide. The call waits for the writer,
    so a following memory_read_page / memory_query sees the new version.

    Returns `{page_id, path, workspace, project, ...}` (the writer's result).
    """
    project = GLOBAL_PROJECT if args.scope == "global" else args.project
    ws, pj = call.write_names(args.workspace, project)
    payload: dict[str, Any] = {
        "path": args.path,
        "body": args.body,
        "title": args.title,
        "frontmatter": args.frontmatter or {},
        "create_only": args.create_only,
        "expected_page_id": args.expected_page_id,
        "expires_at": args.expires_at,
    }
    result = await call.command("page.write", payload, workspace=ws, project=pj)
    return {"workspace": ws, "project": pj, "path": args.path, **result}
