"""Claude Code transcripts: ``~/.claude/projects/<escaped cwd>/<session id>.jsonl``.

One JSON object per line (the line format Claude Code writes; no public schema, read from
its files and the Agent SDK's message types): ``type`` ``user`` / ``assistant`` /
``system`` / ``attachment`` / ``summary`` / ..., each message line with ``uuid``,
``sessionId``, ``cwd``, ``timestamp`` and ``message`` (``role``, ``content``: a string or
``text`` / ``tool_use`` / ``tool_result`` blocks). Mapping to the shared vocabulary:

* user text → ``user-prompt`` (``isMeta`` lines are the client's own notes: skipped);
* ``tool_use`` (assistant) + its ``tool_result`` (a later user line) → one
  ``post-tool-use`` with name, input and output (``is_error`` results start ``Error:``);
* the last assistant text of a turn → ``stop`` (a turn ends at the next prompt, a
  ``turn_duration`` or ``compact_boundary`` record, or the end of the file);
* ``isCompactSummary`` user line (after a ``compact_boundary``) → ``post-compaction``.

Keys are ``claude-code:<line uuid>:<n>``: a resumed session that copies earlier lines into
a new file (same uuids) adds nothing twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from aimem_cli.transcripts.base import (
    PROMPT_CHARS, Event, FileState, ReadStats, bound, event, flush_stop, glob_under, hold_stop, read_jsonl,
    remember_call, take_call, text_of)

CLIENT = "claude-code"


def root(home: Path) -> Path:
    """Where the client keeps its transcripts (``~/.claude/projects``; ``aimem import`` names it when missing)."""
    return home / ".claude" / "projects"


def discover(home: Path) -> Iterator[Path]:
    """Yield ``~/.claude/projects/*/*.jsonl`` (subagent files live deeper and are not sessions)."""
    yield from glob_under(root(home), "*/*.jsonl")


def read(path: Path, state: FileState, stats: ReadStats) -> Iterator[Event]:
    """Yield the events of the lines after ``state.offset`` (advancing it), then the pending stop."""
    return read_jsonl(path, state, stats, _line)


def _line(obj: dict[str, Any], offset: int, ctx: dict[str, Any]) -> Iterator[Event]:
    sid = obj.get("sessionId")
    kind = obj.get("type")
    if not isinstance(sid, str) or not sid or kind not in ("user", "assistant", "system"):
        return
    cwd = obj.get("cwd") if isinstance(obj.get("cwd"), str) else ctx.get("cwd")
    ctx["cwd"] = cwd
    ts = obj.get("timestamp")
    base = f"{CLIENT}:{obj['uuid']}" if isinstance(obj.get("uuid"), str) else f"{CLIENT}:{sid}:{offset}"
    if kind == "system":
        if obj.get("subtype") in ("turn_duration", "compact_boundary"):
            yield from flush_stop(ctx)
        return
    msg = obj.get("message")
    if not isinstance(msg, dict):
        return
    content = msg.get("content")
    if kind == "assistant":
        model = msg.get("model") if isinstance(msg.get("model"), str) else None
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                remember_call(ctx, block["id"], str(block.get("name") or "tool"), block.get("input"))
            elif block.get("type") == "text" and block.get("text"):
                hold_stop(ctx, f"{base}:stop", sid, cwd, ts, block["text"], model)
        if isinstance(content, str) and content:
            hold_stop(ctx, f"{base}:stop", sid, cwd, ts, content, model)
        return
    if obj.get("isMeta"):
        return
    if obj.get("isCompactSummary"):
        yield event(f"{base}:0", "post-compaction", sid, cwd, ts, summary=bound(text_of(content), PROMPT_CHARS))
        return
    n = 0
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            name, args = take_call(ctx, block.get("tool_use_id"))
            out = text_of(block.get("content"))
            if block.get("is_error"):
                out = f"Error: {out}"
            yield event(f"{base}:{n}", "post-tool-use", sid, cwd, ts, tool_name=name or "tool",
                        tool_input=args, tool_response=bound(out))
            n += 1
    prompt = text_of(content) if not (isinstance(content, list) and n) else ""
    if prompt.strip():
        yield from flush_stop(ctx)
        yield event(f"{base}:{n}", "user-prompt", sid, cwd, ts, prompt=bound(prompt, PROMPT_CHARS))

