"""GitHub Copilot CLI sessions: ``~/.copilot/session-state/<session id>/events.jsonl``.

One event per line (Copilot CLI's session event log): ``{"type", "data", "id",
"timestamp", "parentId"}`` with ``session.start`` (``data.sessionId``,
``data.context.cwd``), ``user.message`` (``data.content``), ``assistant.message``
(``data.content``), ``tool.execution_start`` (``data.toolCallId``, ``toolName``,
``arguments``), ``tool.execution_complete`` (``toolCallId``, ``success``,
``result.content``) and ``session.compaction_complete`` (``data.summary``). Keys are
``copilot-cli:<session id>:<event id>``; the session id falls back to the folder name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from aimem_cli.transcripts.base import (
    PROMPT_CHARS, Event, FileState, ReadStats, bound, event, flush_stop, glob_under, hold_stop, read_jsonl,
    remember_call, take_call, text_of)

CLIENT = "copilot-cli"


def root(home: Path) -> Path:
    """Where the client keeps its transcripts (``~/.copilot/session-state``; ``aimem import`` names it when missing)."""
    return home / ".copilot" / "session-state"


def discover(home: Path) -> Iterator[Path]:
    """Yield ``~/.copilot/session-state/*/events.jsonl``."""
    yield from glob_under(root(home), "*/events.jsonl")


def read(path: Path, state: FileState, stats: ReadStats) -> Iterator[Event]:
    """Yield the events of the lines after ``state.offset`` (advancing it), then the pending stop."""
    state.ctx.setdefault("sid", path.parent.name)
    return read_jsonl(path, state, stats, _line)


def _line(obj: dict[str, Any], offset: int, ctx: dict[str, Any]) -> Iterator[Event]:
    kind, data, ts = obj.get("type"), obj.get("data"), obj.get("timestamp")
    if not isinstance(data, dict):
        return
    if kind == "session.start":
        ctx["sid"] = data.get("sessionId") if isinstance(data.get("sessionId"), str) else ctx["sid"]
        context = data.get("context") if isinstance(data.get("context"), dict) else {}
        ctx["cwd"] = context.get("cwd") or data.get("cwd") or ctx.get("cwd")
        return
    sid, cwd = ctx["sid"], ctx.get("cwd")
    base = f"{CLIENT}:{sid}:{obj.get('id') if isinstance(obj.get('id'), str) else offset}"
    if kind == "user.message":
        text = text_of(data.get("content"))
        if text.strip():
            yield from flush_stop(ctx)
            yield event(f"{base}:0", "user-prompt", sid, cwd, ts, prompt=bound(text, PROMPT_CHARS))
    elif kind == "assistant.message":
        text = text_of(data.get("content"))
        if text.strip():
            hold_stop(ctx, f"{base}:stop", sid, cwd, ts, text)
    elif kind == "tool.execution_start" and isinstance(data.get("toolCallId"), str):
        remember_call(ctx, data["toolCallId"], str(data.get("toolName") or "tool"), data.get("arguments"))
    elif kind == "tool.execution_complete":
        name, args = take_call(ctx, data.get("toolCallId"))
        result = data.get("result")
        out = text_of(result.get("content")) if isinstance(result, dict) else text_of(result)
        if data.get("success") is False:
            out = f"Error: {out or text_of((data.get('error') or {}).get('message') if isinstance(data.get('error'), dict) else data.get('error'))}"
        yield event(f"{base}:0", "post-tool-use", sid, cwd, ts, tool_name=name or "tool", tool_input=args,
                    tool_response=bound(out))
    elif kind == "session.compaction_complete" and data.get("summary"):
        yield event(f"{base}:0", "post-compaction", sid, cwd, ts, summary=bound(data["summary"], PROMPT_CHARS))

