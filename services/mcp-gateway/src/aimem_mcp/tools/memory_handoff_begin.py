"""memory_handoff_begin: leave a single-use note for the next agent."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from aimem_common.errors import GoneError

from aimem_mcp.args import Scoped
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import tool

MAX_BODY_CHARS = 16 * 1024
MAX_STEPS = 50
_STEP_MARK = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


class Args(Scoped):
    summary: str = Field(
        description="Where the work stands: what was done, what is half-done, what to watch out for.",
        min_length=1,
        max_length=12 * 1024,
    )
    next_steps: list[str] | str | None = Field(
        None, description="Concrete next steps for the receiving agent, in order: a JSON list of strings, one "
        "step each (at most 50). A single string is taken too: each non-empty line is a step (a leading "
        "'- ', '* ' or '1. ' is dropped).",
    )
    title: str | None = Field(None, description="Short title; default: the first line of the summary.", max_length=512)
    cwd: str | None = Field(None, description="Working directory the work happens in.", max_length=4096)
    to_agent: str | None = Field(None, description="Intended receiver (claude-code, codex, gemini, ...), if any.", max_length=64)
    from_agent: str | None = Field(None, description="The agent writing the handoff.", max_length=64)
    session_id: str | None = Field(None, description="Your lifecycle session id, if known.", max_length=256)
    shared: bool = Field(
        False, description="Publish to every operator of the project instead of only your own identity."
    )

    @field_validator("next_steps")
    @classmethod
    def _steps(cls, v: list[str] | str | None) -> list[str] | None:
        """A string becomes one step per non-empty line; at most ``MAX_STEPS`` steps."""
        if isinstance(v, str):
            v = [_STEP_MARK.sub("", line).strip() for line in v.splitlines()]
            v = [line for line in v if line]
        if v is not None and len(v) > MAX_STEPS:
            raise ValueError(f"next_steps takes at most {MAX_STEPS} steps, got {len(v)}")
        return v

    @field_validator("summary")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("summary must not be blank")
        return v


def compose_body(summary: str, next_steps: list[str] | str | None) -> str:
    """Render the handoff body: the summary, then a `## Next steps` list."""
    body = summary.strip()
    if next_steps:
        body += "\n\n## Next steps\n" + "\n".join(f"- {s.strip()}" for s in next_steps if s.strip())
    return body


@tool(name="memory_handoff_begin", title="Hand off to the next agent", args=Args, read_only=False, destructive=True, idempotent=False)
async def memory_handoff_begin(call: ToolCall, args: Args) -> dict[str, Any]:
    """Open a handoff: a single-use note the NEXT agent claims once with memory_handoff_accept.

    Use when you stop mid-task (quitting, switching CLI, context running out) and another
    agent should continue: put the state of the work and the next steps in it. It is not a
    briefing (memory_briefing summarises the project for anyone, any time) and not durable
    knowledge (memory_write_page) - a handoff is consumed when accepted. It is owner-scoped
    (only your identity sees it) unless `shared: true`. Manual handoffs take precedence over
    the automatic ones written at session end. May create the workspace/project.

    Returns `{handoff_id, handoff: HandoffRecord}`; cancel a mistaken one with
    memory_handoff_cancel.
    """
    ws, pj = call.write_names(args.workspace, args.project)
    body = compose_body(args.summary, args.next_steps)
    if len(body) > MAX_BODY_CHARS:
        body = body[:MAX_BODY_CHARS]
    title = args.title or args.summary.strip().splitlines()[0][:200]
    payload = {
        "body": body,
        "title": title,
        "cwd": args.cwd,
        "to_agent": args.to_agent,
        "from_agent": args.from_agent,
        "session_id": args.session_id,
        "shared": args.shared,
    }
    result = await call.command("handoff.begin", payload, workspace=ws, project=pj)
    if result.get("skipped") == "purged":  # the writer dropped it and counted it on the purge tombstone
        raise GoneError(f"session {args.session_id} was purged; a handoff naming it is not stored (lift with "
                        "`aimem purge-session --forget-tombstone` to reuse the id)", data={"session_id": args.session_id})
    handoff = result.get("handoff") or {}
    return {"workspace": ws, "project": pj, "handoff_id": handoff.get("id"), **result}
