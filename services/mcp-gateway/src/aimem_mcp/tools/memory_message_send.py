"""memory_message_send: send a message into another project's inbox."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from aimem_common.models import validate_name

from aimem_mcp.args import Scoped
from aimem_mcp.context import ToolCall
from aimem_mcp.registry import tool


class Args(Scoped):
    to_project: str = Field(description="Recipient project (must already exist; it is never created).", min_length=1, max_length=128)
    to_workspace: str | None = Field(None, description="Recipient workspace; default: the sender's workspace.", max_length=128)
    body: str = Field(description="Message text (secret-scrubbed by the writer, max 16 KiB).", min_length=1, max_length=16 * 1024)
    subject: str | None = Field(None, description="Short subject line.", max_length=512)


@tool(name="memory_message_send", title="Message another project", args=Args, read_only=False, destructive=True, idempotent=False)
async def memory_message_send(call: ToolCall, args: Args) -> dict[str, Any]:
    """Send a directed message from this project (`workspace`/`project`) to another project's inbox.

    The one tool that crosses project isolation on purpose: use it to tell the agents of a
    sibling project something they must act on (an API change, a broken contract). The
    recipient must already exist (fail closed). Not for notes to your own next session
    (memory_handoff_begin) or durable knowledge (memory_write_page). Retract an unread
    message with memory_message_cancel.

    Returns `{message_id, message: MessageRecord}`.
    """
    ws, pj = call.write_names(args.workspace, args.project)
    to_ws = validate_name(args.to_workspace or ws, "to_workspace")
    to_pj = validate_name(args.to_project, "to_project")
    await call.read(_recipient_exists, to_ws, to_pj)
    payload = {"to_workspace": to_ws, "to_project": to_pj, "body": args.body, "subject": args.subject}
    result = await call.command("message.send", payload, workspace=ws, project=pj)
    message = result.get("message") or {}
    return {"workspace": ws, "project": pj, "to_workspace": to_ws, "to_project": to_pj,
            "message_id": message.get("id"), **result}


def _recipient_exists(conn: Any, workspace: str, project: str) -> None:
    """Fail closed before sending: the recipient project must exist (``project_not_found``)."""
    from aimem_common.read.scopes import resolve

    resolve(conn, workspace, project)
