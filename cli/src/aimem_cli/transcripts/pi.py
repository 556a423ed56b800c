"""Pi sessions: ``~/.pi/agent/sessions/--<cwd>--/<time>_<session id>.jsonl`` (also OMP's and OpenClaw's).

Pi's session format (its ``docs/session-format.md``, version 3): the first line is the
header ``{"type": "session", "id", "cwd", "timestamp"}``; every later line is an entry
``{"type", "id", "parentId", "timestamp", ...}``. Mapping to the shared vocabulary:

* ``message`` with ``role: "user"`` → ``user-prompt``;
* an assistant message's ``toolCall`` block (``id``, ``name``, ``arguments``) + the
  ``toolResult`` message naming it (``toolCallId``, ``content``, ``isError``) → one
  ``post-tool-use`` (an error result starts ``Error:``);
* ``bashExecution`` (a command the user ran with ``!``) → ``post-tool-use`` of ``bash``,
  a non-zero ``exitCode`` written ``exit code: N``;
* the turn's last assistant text → ``stop`` (a turn ends at the next prompt, a compaction
  or the end of what was read);
* ``compaction`` (``summary``) → ``post-compaction``.

Branches (``parentId``) are read in file order: an abandoned branch's prompts and tools
were real work too. Extension entries (``custom``, ``custom_message``) are the extensions'
own and are skipped. Keys are ``<client>:<session id>:<entry id>:<n>``.

OMP (a fork of Pi) and OpenClaw (which embeds Pi's agent) write the same format; their
modules (``omp``, ``openclaw``) reuse ``make_read`` with their own client name and places.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

from aimem_cli.transcripts.base import (
    PROMPT_CHARS, Event, FileState, ReadStats, bound, event, flush_stop, glob_under, hold_stop, read_jsonl,
    remember_call, take_call, text_of)

CLIENT = "pi"


def root(home: Path) -> Path:
    """Where the client keeps its transcripts (``~/.pi/agent/sessions``; ``aimem import`` names it when missing)."""
    return home / ".pi" / "agent" / "sessions"


def discover(home: Path) -> Iterator[Path]:
    """Yield ``~/.pi/agent/sessions/*/*.jsonl`` (one folder per working directory)."""
    yield from glob_under(root(home), "*/*.jsonl")


def make_read(client: str) -> Callable[[Path, FileState, ReadStats], Iterator[Event]]:
    """The ``read(path, state, stats)`` of a client that writes Pi's session format."""

    def read(path: Path, state: FileState, stats: ReadStats) -> Iterator[Event]:
        """Yield the events of the lines after ``state.offset`` (advancing it), then the pending stop."""
        state.ctx.setdefault("client", client)
        return read_jsonl(path, state, stats, _line)

    return read


read = make_read(CLIENT)


def _line(obj: dict[str, Any], offset: int, ctx: dict[str, Any]) -> Iterator[Event]:
    kind, ts = obj.get("type"), obj.get("timestamp")
    if kind == "session":
        if isinstance(obj.get("id"), str) and obj["id"]:
            ctx["sid"] = obj["id"]
        if isinstance(obj.get("cwd"), str):
            ctx["cwd"] = obj["cwd"]
        return
    sid, cwd = ctx.get("sid"), ctx.get("cwd")
    if not sid:
        return
    base = f"{ctx['client']}:{sid}:{obj.get('id') if isinstance(obj.get('id'), str) else offset}"
    if kind == "compaction" and isinstance(obj.get("summary"), str) and obj["summary"].strip():
        yield from flush_stop(ctx)
        yield event(f"{base}:0", "post-compaction", sid, cwd, ts, summary=bound(obj["summary"], PROMPT_CHARS))
        return
    if kind == "model_change":  # Pi: ``modelId``; OMP: ``model`` as ``provider/model``
        model = obj.get("modelId") or obj.get("model")
        if isinstance(model, str):
            ctx["model"] = model
        return
    msg = obj.get("message")
    if kind != "message" or not isinstance(msg, dict):
        return
    role = msg.get("role")
    if role == "user":
        text = text_of(msg.get("content"))
        if text.strip():
            yield from flush_stop(ctx)
            yield event(f"{base}:0", "user-prompt", sid, cwd, ts, prompt=bound(text, PROMPT_CHARS))
    elif role == "assistant":
        model = msg.get("model") if isinstance(msg.get("model"), str) else None
        for block in msg.get("content") if isinstance(msg.get("content"), list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "toolCall" and isinstance(block.get("id"), str):
                remember_call(ctx, block["id"], str(block.get("name") or "tool"), block.get("arguments"))
            elif block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                hold_stop(ctx, f"{base}:stop", sid, cwd, ts, block["text"], model)
    elif role == "toolResult":
        name, args = take_call(ctx, msg.get("toolCallId"))
        out = text_of(msg.get("content"))
        if msg.get("isError"):
            out = f"Error: {out}"
        yield event(f"{base}:0", "post-tool-use", sid, cwd, ts, tool_name=name or str(msg.get("toolName") or "tool"),
                    tool_input=args, tool_response=bound(out))
    elif role == "bashExecution" and isinstance(msg.get("command"), str):
        out = str(msg.get("output") or "")
        code = msg.get("exitCode")
        if isinstance(code, int) and code != 0:
            out = f"exit code: {code}\n{out}"
        yield from flush_stop(ctx)  # the user's own command: the model's turn is over
        yield event(f"{base}:0", "post-tool-use", sid, cwd, ts, tool_name="bash",
                    tool_input={"command": msg["command"]}, tool_response=bound(out))
