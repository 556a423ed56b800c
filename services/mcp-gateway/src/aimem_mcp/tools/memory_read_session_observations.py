"""memory_read_session_observations: page through one session's raw hook observations."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from aimem_common.models import DB_INT_MAX
from aimem_common.read.sessions import session_observations

from aimem_mcp.args import Scoped, limit_field
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import tool


class Args(Scoped):
    session_id: str | None = Field(None, description="Session id; omit for the latest completed session.", max_length=256)
    offset: int = Field(0, ge=0, le=DB_INT_MAX, description="Observations to skip (arrival order).")
    limit: int = limit_field(100, 500, "observations")
    body_max_chars: int = Field(4000, ge=1, le=16 * 1024, description="Per-observation body cap in characters.")


@tool(
    name="memory_read_session_observations",
    title="Read a session's raw observations",
    args=Args,
    read_only=True,
    destructive=False,
    idempotent=True,
)
async def memory_read_session_observations(call: ToolCall, args: Args) -> dict[str, Any]:
    """Page through ONE session's raw hook observations (prompts, tool calls, errors) in this project.

    Use to audit the evidence behind a session page or a `raw_hits` entry of memory_query:
    what the hooks actually captured, in order. Bodies are sanitized and capped per row
    (`body_max_chars`); rows the same session left in another project you may read are only
    counted (`elided_other_scope`). For a digest of a session, read its `sessions/<id>.md` page.

    Returns `{session, session_id, observations: [ObservationRecord], total,
    elided_other_scope, offset, limit, next_offset}`.
    """
    scope = await call.read_scope(args.workspace, args.project)
    return await call.read(
        session_observations,
        scope,
        args.session_id,
        offset=args.offset,
        limit=args.limit,
        body_max_chars=args.body_max_chars,
        reader=call.principal,
    )
