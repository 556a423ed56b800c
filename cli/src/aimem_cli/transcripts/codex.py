"""Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl``.

One ``{"timestamp", "type", "payload"}`` object per line (codex-rs ``RolloutLine`` /
``RolloutItem``): ``session_meta`` (id, cwd), ``turn_context`` (cwd, model),
``response_item`` (``message``, ``function_call`` / ``function_call_output``,
``custom_tool_call`` / ``custom_tool_call_output``, ``local_shell_call``, ``reasoning``),
``event_msg`` (``user_message``, ``agent_message``, ``task_complete``, ``token_count``,
...) and ``compacted`` (``message``: the summary that replaced the history). Mapping:

* ``event_msg`` ``user_message`` → ``user-prompt``; a ``response_item`` user message too
  (newer releases write only that form) unless it opens with ``<`` (environment context,
  instructions, injected context); the same text in both forms counts once;
* a call + its output (matched by ``call_id``) → ``post-tool-use``; a JSON output's
  ``metadata.exit_code`` ≠ 0 is written ``exit code: N`` so errors are recognised;
* ``task_complete`` ``last_agent_message`` (else the turn's last assistant message) → ``stop``;
* ``compacted`` → ``post-compaction``.

Lines carry no ids, so keys are ``codex:<session id>:<byte offset>:<n>``; a resumed
session appends to its rollout, which an incremental run reads from the saved offset.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from aimem_cli.transcripts.base import (
    PROMPT_CHARS, Event, FileState, ReadStats, bound, event, flush_stop, glob_under, hold_stop, read_jsonl,
    remember_call, take_call, text_of)

CLIENT = "codex"


def root(home: Path) -> Path:
    """Where the client keeps its transcripts (``~/.codex/sessions``; ``aimem import`` names it when missing)."""
    return home / ".codex" / "sessions"


def discover(home: Path) -> Iterator[Path]:
    """Yield ``~/.codex/sessions/**/rollout-*.jsonl`` (``$CODEX_HOME`` is the caller's ``home``)."""
    yield from glob_under(root(home), "rollout-*.jsonl", recursive=True)


def read(path: Path, state: FileState, stats: ReadStats) -> Iterator[Event]:
    """Yield the events of the lines after ``state.offset`` (advancing it), then the pending stop."""
    return read_jsonl(path, state, stats, _line)


def _line(obj: dict[str, Any], offset: int, ctx: dict[str, Any]) -> Iterator[Event]:
    kind, p, ts = obj.get("type"), obj.get("payload"), obj.get("timestamp")
    if not isinstance(p, dict):
        return
    if kind == "session_meta":
        sid = p.get("id") or p.get("session_id")
        if isinstance(sid, str) and sid:
            ctx["sid"] = sid
        if isinstance(p.get("cwd"), str):
            ctx["cwd"] = p["cwd"]
        return
    if kind == "turn_context":
        if isinstance(p.get("cwd"), str):
            ctx["cwd"] = p["cwd"]
        if isinstance(p.get("model"), str):
            ctx["model"] = p["model"]
        return
    sid, cwd = ctx.get("sid"), ctx.get("cwd")
    if not sid:
        return
    base = f"{CLIENT}:{sid}:{offset}"
    ptype = p.get("type")
    if kind == "compacted":
        yield from flush_stop(ctx)
        yield event(f"{base}:0", "post-compaction", sid, cwd, ts, summary=bound(p.get("message"), PROMPT_CHARS))
    elif (kind == "event_msg" and ptype == "user_message") or (
            kind == "response_item" and ptype == "message" and p.get("role") == "user"):
        text = p.get("message") if kind == "event_msg" else text_of(p.get("content"))
        if kind == "response_item" and isinstance(text, str) and text.lstrip().startswith("<"):
            return  # <environment_context>, <user_instructions>, injected context: not the user's words
        if isinstance(text, str) and text.strip() and text != ctx.get("prompt"):
            ctx["prompt"] = text  # the other form of the same prompt follows: once
            yield from flush_stop(ctx)
            yield event(f"{base}:0", "user-prompt", sid, cwd, ts, prompt=bound(text, PROMPT_CHARS))
    elif kind == "event_msg" and ptype == "task_complete":
        last = p.get("last_agent_message")
        if isinstance(last, str) and last:
            hold_stop(ctx, f"{base}:stop", sid, cwd, ts, last)
        yield from flush_stop(ctx)
    elif kind == "response_item" and ptype == "message" and p.get("role") == "assistant":
        text = text_of(p.get("content"))
        if text:
            hold_stop(ctx, f"{base}:stop", sid, cwd, ts, text)
    elif kind == "response_item" and ptype in ("function_call", "custom_tool_call", "local_shell_call"):
        call_id = p.get("call_id") or p.get("id")
        if isinstance(call_id, str):
            remember_call(ctx, call_id, str(p.get("name") or "shell"), _args(p))
    elif kind == "response_item" and ptype in ("function_call_output", "custom_tool_call_output"):
        name, args = take_call(ctx, p.get("call_id"))
        yield event(f"{base}:0", "post-tool-use", sid, cwd, ts, tool_name=name or "tool", tool_input=args,
                    tool_response=bound(_output(p.get("output"))))


def _args(p: dict[str, Any]) -> Any:
    """A call's input: ``arguments`` (a JSON string), ``input`` (apply_patch) or ``action``."""
    raw = p.get("arguments")
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    if p.get("input") is not None:
        return {"command": p["input"]} if isinstance(p["input"], str) else p["input"]
    action = p.get("action")
    return {"command": action.get("command")} if isinstance(action, dict) else None


def _output(raw: Any) -> str:
    """A call's output text; a JSON ``{"output", "metadata": {"exit_code"}}`` string is unpacked."""
    if isinstance(raw, dict):
        raw = raw.get("content") or json.dumps(raw, ensure_ascii=False)
    if not isinstance(raw, str):
        return text_of(raw)
    if raw.startswith("{"):
        try:
            data = json.loads(raw)
        except ValueError:
            return raw
        if isinstance(data, dict) and "output" in data:
            out = str(data.get("output") or "")
            code = (data.get("metadata") or {}).get("exit_code") if isinstance(data.get("metadata"), dict) else None
            return f"exit code: {code}\n{out}" if isinstance(code, int) and code != 0 else out
    return raw

