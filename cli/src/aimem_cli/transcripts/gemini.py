"""Gemini CLI chat recordings.

``~/.gemini/tmp/<project hash>/chats/session-*.json`` (and the line-based ``session-*.jsonl``
of newer releases, ``_read_jsonl``).

One JSON document per session (gemini-cli ``ChatRecordingService``): ``sessionId``,
``projectHash`` (SHA-256 of the project root), ``messages`` with ``id``, ``timestamp``,
``type`` (``user`` / ``gemini`` / ``info`` / ``error``), ``content`` and, on ``gemini``
messages, ``toolCalls`` (``id``, ``name``, ``args``, ``result``, ``status``). The file is
rewritten as the chat grows, so the state keeps how many messages were read and keys are
``gemini-cli:<session id>:<message id>``. The file names no directory: the root is found
by hashing candidate directories (``hints``: the cwds of the other transcripts and the
current directory); without a match the session has no cwd and needs ``--project``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterator

from aimem_cli.transcripts.base import (PROMPT_CHARS, Event, FileState, ReadStats, bound, event, glob_under, json_lines,
                                        text_of)

CLIENT = "gemini-cli"
MAX_FILE_BYTES = 256 * 1024 * 1024


def root(home: Path) -> Path:
    """Where the client keeps its transcripts (``~/.gemini/tmp``; ``aimem import`` names it when missing)."""
    return home / ".gemini" / "tmp"


def discover(home: Path) -> Iterator[Path]:
    """Yield ``~/.gemini/tmp/*/chats/session-*.json`` and ``session-*.jsonl`` (newer releases)."""
    yield from glob_under(root(home), "*/chats/session-*.json")
    yield from glob_under(root(home), "*/chats/session-*.jsonl")


def read(path: Path, state: FileState, stats: ReadStats, hints: dict[str, str] | None = None) -> Iterator[Event]:
    """Yield events of the messages after ``state.ctx["seen"]``; ``hints`` maps project hash → dir."""
    if path.suffix == ".jsonl":
        yield from _read_jsonl(path, state, stats, hints)
        return
    size = path.stat().st_size
    if size == state.offset:
        return
    try:
        doc = json.loads(path.read_bytes()) if size <= MAX_FILE_BYTES else None
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        stats.lines += 1
        stats.truncated += 1  # being rewritten, or cut: retried next run
        return
    state.offset = size
    sid = doc.get("sessionId")
    if not isinstance(sid, str) or not sid:
        stats.bad(why="no sessionId")
        return
    cwd = (hints or {}).get(str(doc.get("projectHash") or ""))
    seen = int(state.ctx.get("seen", 0))
    for msg in doc["messages"][seen:]:
        stats.lines += 1
        if not isinstance(msg, dict):
            stats.bad()
            continue
        yield from _message(sid, cwd, msg)
    state.ctx["seen"] = len(doc["messages"])


def _read_jsonl(path: Path, state: FileState, stats: ReadStats, hints: dict[str, str] | None) -> Iterator[Event]:
    """The line-based recording of newer releases: a header line (``sessionId``, ``projectHash``),
    then one line per message, and ``{"$set": {...}}`` lines (``messages`` sets the whole list:
    its messages come again under the same keys). Gemini's own ``<session_context>`` setup
    message is not the user's prompt and is skipped."""
    for _, obj in json_lines(path, state, stats):
        if isinstance(obj.get("sessionId"), str) and "type" not in obj:
            state.ctx["sid"], state.ctx["hash"] = obj["sessionId"], str(obj.get("projectHash") or "")
            continue
        sid = state.ctx.get("sid")
        if not sid:
            continue
        cwd = (hints or {}).get(state.ctx.get("hash", ""))
        put = obj.get("$set")
        msgs = put.get("messages") if isinstance(put, dict) else ([obj] if "type" in obj and "id" in obj else None)
        for msg in msgs if isinstance(msgs, list) else []:
            if isinstance(msg, dict) and not text_of(msg.get("content")).lstrip().startswith("<session_context>"):
                yield from _message(sid, cwd, msg)


def _message(sid: str, cwd: str | None, msg: dict[str, Any]) -> Iterator[Event]:
    base = f"{CLIENT}:{sid}:{msg.get('id')}"
    ts, kind, text = msg.get("timestamp"), msg.get("type"), text_of(msg.get("content"))
    if kind == "user" and text.strip():
        yield event(f"{base}:0", "user-prompt", sid, cwd, ts, prompt=bound(text, PROMPT_CHARS))
    elif kind == "error" and text:
        yield event(f"{base}:0", "notification", sid, cwd, ts, message=bound(f"error: {text}"))
    elif kind == "gemini":
        for n, call in enumerate(c for c in msg.get("toolCalls") or [] if isinstance(c, dict)):
            out = call.get("resultDisplay") or call.get("result")
            if call.get("status") == "error":
                out = f"Error: {text_of(out) if not isinstance(out, str) else out}"
            yield event(f"{base}:{n}", "post-tool-use", sid, cwd, call.get("timestamp") or ts,
                        tool_name=str(call.get("name") or "tool"), tool_input=call.get("args"),
                        tool_response=bound(out))
        if text.strip():
            yield event(f"{base}:stop", "stop", sid, cwd, ts, message=bound(text, PROMPT_CHARS),
                        model=msg.get("model") if isinstance(msg.get("model"), str) else None)


def project_hash(directory: str) -> str:
    """The Gemini CLI project hash of a directory (SHA-256 hex of its path)."""
    return hashlib.sha256(directory.encode()).hexdigest()
