"""The session page and the automatic handoff, built from a session's observations (no LLM).

``digest(rows, root)`` reads the stored observations in order and keeps what the next
agent needs: the task (the first prompt, also when a client carries it on its start
event), later prompts, commands run (each with how it ended), files changed and read
(relative to the repository root), each error with its meaningful line (not only
"Exit code 1"), compaction summaries, subagents, a pending permission and the final
assistant message. ``render_page`` turns it into markdown with no empty sections
(≤ ``BODY_CAP_BYTES``); ``render_handoff`` into the handoff text: what was being done,
what changed, what failed, where it stopped and what is next.

Observation bodies are the ingress format: ``tool: <name>``, ``input: <excerpt>``,
``output: <excerpt>``, ``error: <excerpt>`` (failed calls, whose title reads
``<tool> failed: ...``), ``reason: ...`` lines.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from aimem_common.patches import is_patch_tool, looks_like_patch, patch_files
from aimem_common.text import cap_utf8

BODY_CAP_BYTES = 15 * 1024  # leaves room for the frontmatter inside the 16 KiB page
PROMPT_CAP_BYTES = 1536
TASK_CAP_BYTES = 2048
PROMPTS_BUDGET_BYTES = 5 * 1024
MAX_COMMANDS, COMMAND_CAP_BYTES = 40, 200
MAX_FILES = 50
MAX_ERRORS, ERROR_CAP_BYTES = 10, 300
COMMANDS_BUDGET_BYTES = 2560
FILES_BUDGET_BYTES = 1536
ERRORS_BUDGET_BYTES = 1536
STOP_CAP_BYTES = 1536
COMPACT_CAP_BYTES = 1536
TAIL_CAP_BYTES = 2560  # the transcript tail a client sent with its session end
HANDOFF_CAP_BYTES = 4 * 1024

SHELL_TOOLS = {"bash", "shell", "run_shell_command", "exec_command", "local_shell", "terminal", "execute",
               "run_terminal_cmd", "command", "exec", "powershell"}
READ_TOOLS = {"read", "read_file", "view", "readfile", "read_many_files", "notebookread"}
FILE_KEYS = ("file_path", "filePath", "path", "notebook_path", "target_file", "absolute_path", "file")
_FILE_KEY_RE = re.compile(r'"(?:' + "|".join(FILE_KEYS) + r')":\s*"((?:[^"\\]|\\.)*)"')
# A line that says what went wrong; exit-status lines alone say nothing.
ERROR_RE = re.compile(
    r"(?i)\b(error|exception|traceback|failed|failure|fatal|panic|denied|refused|cannot|can't|"
    r"not found|no such file|undefined|invalid|assert\w*)\b")
EXIT_RE = re.compile(r"(?i)^\s*(?:exit (?:code|status):? ?(-?\d+)|command exited with (?:code )?(-?\d+))\s*$")
_TAG_LINE = re.compile(r"^</?[a-z_]+>$")  # Gemini wraps tool output in <untrusted_context> tags
# Labels clients put before a tool's output lines (Gemini: "Output: ...", "Exit Code: 2").
_LINE_LABEL = re.compile(r"(?i)^(?:output|stdout|stderr|error|command output):\s*")
END_REASONS = {
    "idle": "idle: no events for the configured quiet period, finalised by aimem",
    "finalize-session": "finalised by hand (aimem finalize-session)",
    "clear": "the user cleared the conversation",
    "logout": "the user logged out",
}
_NEXT_RE = re.compile(r"(?i)\b(next|todo|remaining|still need|left to|not yet|follow[- ]up)\b")
# The agent's own label in front of its hint ("Next: …", "Next steps - …"): the handoff adds "Next: " itself.
_NEXT_LABEL_RE = re.compile(r"(?i)^\s*next(?:\s+steps?)?\s*[:\uff1a\-\u2013\u2014]\s*")


@dataclass(slots=True)
class ShellCommand:
    """One shell command and how it ended (``failed`` with its meaningful error line)."""

    text: str
    failed: bool = False
    detail: str = ""


@dataclass(slots=True)
class Digest:
    """What the next agent needs from one session (each list bounded)."""

    task: str = ""
    prompts: list[str] = field(default_factory=list)
    commands: list[ShellCommand] = field(default_factory=list)
    more_commands: set[str] = field(default_factory=set)  # distinct commands past MAX_COMMANDS (counted only)
    changed: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    subagents: list[str] = field(default_factory=list)
    compaction: str | None = None  # the client's summary after compacting
    compact_instructions: str | None = None  # what the user asked compaction to keep
    stop: str | None = None
    agents: list[str] = field(default_factory=list)
    pending_permission: str | None = None
    last_failure: str | None = None  # the failure no later success of the same command cleared
    ended_mid_turn: bool = False
    tail: str | None = None  # the transcript tail the hook client sent with the session end


def sections(body: str, *, failed: bool) -> dict[str, str]:
    """Split an ingress tool body into ``{label: text}`` (``tool``/``input``/``output``/...).

    ``error:`` is only taken as a section of a failed call (an output may itself hold a
    line starting with ``error: ``), and then from its last occurrence.
    """
    out: dict[str, str] = {}
    rest = body
    if failed and "\nerror: " in rest:
        rest, err = rest.rsplit("\nerror: ", 1)
        out["error"] = err.split("\nreason: ", 1)[0].strip()
    for label in ("reason",):
        if f"\n{label}: " in rest:
            rest, val = rest.rsplit(f"\n{label}: ", 1)
            out[label] = val.strip()
    m = re.match(r"tool: (.*?)(?:\n|\Z)", rest)
    if m:
        out["tool"] = m.group(1)
        rest = rest[m.end():]
    if rest.startswith("input: "):
        cut = rest.find("\noutput: ")
        out["input"] = (rest[7:cut] if cut >= 0 else rest[7:]).strip()
        rest = rest[cut + 1:] if cut >= 0 else ""
    if rest.startswith("output: "):
        out["output"] = rest[8:].strip()
    return out


def meaningful_line(text: str) -> tuple[str, str | None]:
    """Return ``(line, exit_code)``: the line of ``text`` that says what went wrong.

    Exit-status lines (``Exit code 2``) give only the code; the line is the first one
    matching an error word, else the last non-empty line, else ``""``.
    """
    code = None
    lines: list[tuple[str, str]] = []  # (line as written, line without its output label)
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line:
            continue
        m = EXIT_RE.match(line)
        if m:
            code = code or m.group(1) or m.group(2)
            continue
        if not _TAG_LINE.match(line):
            lines.append((line, _LINE_LABEL.sub("", line)))
    hit = next((clean for line, clean in lines if ERROR_RE.search(line)), lines[-1][1] if lines else "")
    return hit, code


def relative(path: str, roots: list[str], cwd: str | None) -> str:
    """``path`` relative to the first root containing it (relative paths are taken from ``cwd``)."""
    path = path.strip()
    if cwd and not path.startswith("/") and not re.match(r"^[A-Za-z]:[\\/]", path):
        path = posixpath.normpath(posixpath.join(cwd, path))
    for root in roots:
        base = root.rstrip("/")
        if base and (path == base or path.startswith(base + "/")):
            return path[len(base) + 1:] or "."
    return path


def _args(raw: str | None) -> dict[str, Any]:
    if not raw or not raw.lstrip().startswith("{"):
        return {}
    try:
        value = json.loads(raw)
    except ValueError:  # an excerpt cut at 2 KiB: keep what a regex can still read
        found = _FILE_KEY_RE.search(raw)
        return {"file_path": json.loads(f'"{found.group(1)}"')} if found else {}
    return value if isinstance(value, dict) else {}


def _after_colon(title: str) -> str:
    return title.split(": ", 1)[1] if ": " in title else ""


def _add(items: list[str], value: str, limit: int) -> None:
    if value and value not in items and len(items) < limit:
        items.append(value)


def digest(rows: list[Any], roots: list[str]) -> Digest:
    """Read observations (``kind, agent, title, body, tool_name, cwd`` rows, in order).

    Args:
        rows: The session's observations, oldest first.
        roots: Directories paths are made relative to, best first (the repository root,
            then the session's cwd).

    Returns:
        ``Digest`` with every list bounded.
    """
    d = Digest()
    open_turn = False
    for r in rows:
        kind, title, body = r["kind"], r["title"] or "", r["body"] or ""
        tool, cwd = (r["tool_name"] or ""), r["cwd"]
        if r["agent"] and r["agent"] not in d.agents:
            d.agents.append(r["agent"])
        if kind in ("session-start", "user-prompt"):
            text = body.strip() or (_after_colon(title) if kind == "user-prompt" else "")
            if text:
                d.task = d.task or text
                d.prompts.append(text)
                open_turn = True
        elif kind in ("pre-tool-use", "post-tool-use"):
            _tool_call(d, kind, title, body, tool, cwd, roots)
            d.pending_permission = None
        elif kind == "permission-request":
            s = sections(body, failed=False)
            what = _after_colon(_after_colon(title)) or s.get("input", "")
            d.pending_permission = f"{tool or 'tool'}: {what}".strip() if "denied" not in title.casefold() else None
        elif kind == "notification":
            text = " ".join((body or _after_colon(title)).split())
            if text and (ERROR_RE.search(text) or title.startswith(("Turn failed", "Error"))):
                _add(d.errors, cap_utf8(text, ERROR_CAP_BYTES), MAX_ERRORS)
        elif kind == "subagent-start":
            _add(d.subagents, cap_utf8(_after_colon(title) or "subagent", 200), 10)
        elif kind == "stop":
            text = body.strip() or _after_colon(title)
            if text:
                d.stop = text
            open_turn = False
        elif kind == "post-compaction" and body.strip():
            d.compaction = body.strip()
        elif kind == "pre-compact" and body.strip():
            d.compact_instructions = body.strip()
    d.ended_mid_turn = open_turn
    return d


def _tool_call(d: Digest, kind: str, title: str, body: str, tool: str, cwd: str | None,
               roots: list[str]) -> None:
    failed = " failed: " in title or title.endswith(" failed")
    s = sections(body, failed=failed)
    raw_in = s.get("input")
    args = _args(raw_in)
    name = tool.casefold()
    command = args.get("command") or args.get("cmd") or ""
    if isinstance(command, list):
        command = " ".join(str(c) for c in command)
    patch_text = command if isinstance(command, str) and looks_like_patch(command) else ""
    if is_patch_tool(tool) or (not args and raw_in and looks_like_patch(raw_in)):
        patch_text = patch_text or (raw_in or "")
    if patch_text:  # Codex apply_patch (as a tool or a shell heredoc): the files it changes
        for path in patch_files(patch_text):
            _add(d.changed, cap_utf8(relative(path, roots, cwd), 300), MAX_FILES)
    elif name in SHELL_TOOLS:
        cmd = command or (_after_colon(title) if not failed else title.split(" failed: ", 1)[-1]) or raw_in or ""
        cmd = cap_utf8(" ".join(str(cmd).split()), COMMAND_CAP_BYTES)
        if kind == "post-tool-use" and cmd:
            _command_result(d, cmd, s, failed)
        elif cmd and not any(c.text == cmd for c in d.commands):
            if len(d.commands) < MAX_COMMANDS:
                d.commands.append(ShellCommand(cmd))
            else:
                d.more_commands.add(cmd)
        return
    else:
        path = next((args[k] for k in FILE_KEYS if isinstance(args.get(k), str) and args[k]), None)
        if path is None and (name in READ_TOOLS or "edit" in name or "write" in name or name in (
                "replace", "create", "multiedit", "notebookedit", "str_replace_based_edit_tool")):
            path = _after_colon(title).split(" failed: ")[-1] or None
        if path:
            target = d.read if name in READ_TOOLS else d.changed
            _add(target, cap_utf8(relative(path, roots, cwd), 300), MAX_FILES)
    if kind == "post-tool-use" and failed:
        line, code = meaningful_line(s.get("error", ""))
        what = _after_colon(title.replace(" failed: ", ": ", 1))
        err = f"{tool or 'tool'} `{what}`" + (f" (exit {code})" if code else "") + (f": {line}" if line else "")
        _add(d.errors, cap_utf8(err, ERROR_CAP_BYTES), MAX_ERRORS)
        d.last_failure = err


def _command_result(d: Digest, cmd: str, s: dict[str, str], failed: bool) -> None:
    """Record how ``cmd`` ended: failed (error section, or an output that reads as an error)."""
    text = s.get("error", "") if failed else s.get("output", "")
    line, code = meaningful_line(text)
    reads_bad = bool(ERROR_RE.search(text)) and not text.lstrip().startswith(("PASS", "ok"))
    bad = failed or bool(code and code != "0") or reads_bad
    existing = next((c for c in d.commands if c.text == cmd), None)
    if existing is None and len(d.commands) < MAX_COMMANDS:
        existing = ShellCommand(cmd)
        d.commands.append(existing)
    elif existing is None:
        d.more_commands.add(cmd)
    if existing is not None:
        existing.failed, existing.detail = bad, (cap_utf8(line, ERROR_CAP_BYTES) if bad else "")
        if bad and code:
            existing.detail = f"exit {code}: {existing.detail}" if existing.detail else f"exit {code}"
    if bad:
        err = f"`{cmd}`" + (f" (exit {code})" if code else "") + (f": {line}" if line else "")
        _add(d.errors, cap_utf8(err, ERROR_CAP_BYTES), MAX_ERRORS)
        d.last_failure = err
    elif d.last_failure and d.last_failure.startswith(f"`{cmd}`"):
        d.last_failure = None  # the same command later succeeded


def _bounded(lines: list[str], budget: int, hidden: int = 0) -> list[str]:
    """Keep lines in order while they fit ``budget`` bytes; then one "… and N more" line,
    which also counts ``hidden`` items that were never made lines."""
    out, used = [], 0
    for i, line in enumerate(lines):
        size = len(line.encode()) + 1
        if used + size > budget:
            out.append(f"- … and {len(lines) - i + hidden} more")
            return out
        out.append(line)
        used += size
    if hidden:
        out.append(f"- … and {hidden} more")
    return out


def _one_line(text: str, limit: int) -> str:
    return cap_utf8(" ".join(text.split()), limit)


def how_it_ended(reason: str | None) -> str:
    """One line saying how a session ended (``None``: the client's own session end event)."""
    if not reason:
        return "the client's session end"
    return END_REASONS.get(reason, f"the client's session end ({reason})")


def render_page(session_id: str, row: Any, d: Digest, ended_at: str, count: int, roots: list[str],
                reason: str | None = None) -> tuple[str, str]:
    """Return ``(title, body)`` of the session page; the body is ≤ ``BODY_CAP_BYTES``.

    Sections appear only when they have content: Task, Later prompts, Commands, Files
    changed, Files read, Errors, Subagents, Compaction summary, Final message.
    """
    first = " ".join(d.task.split())
    title = f"Session {session_id[:12]}: {first[:80]}" if first else f"Session {session_id[:12]}"
    where = relative(row["cwd"], roots, None) if row["cwd"] else "?"
    where = "the repository root" if where == "." else f"`{where}`"
    out = [f"# {title}", ""]
    if d.task:
        out += ["## Task", "", cap_utf8(d.task.strip(), TASK_CAP_BYTES), ""]
    out += [f"{', '.join(d.agents) or row['agent']} in {where}, {row['started_at']} → {ended_at}, "
            f"{count} events. Ended: {how_it_ended(reason)}.", ""]
    later = d.prompts[1:]
    if later:
        out += ["## Later prompts", ""]
        used = 0
        for i, p in enumerate(later):
            chunk = cap_utf8(p.strip(), PROMPT_CAP_BYTES)
            if used + len(chunk.encode()) > PROMPTS_BUDGET_BYTES and i:
                out.append(f"- … {len(later) - i} more prompts; the last: {_one_line(later[-1], 512)}")
                break
            out.append(f"- {chunk.replace(chr(10), chr(10) + '  ')}")
            used += len(chunk.encode())
        out.append("")
    if d.commands:
        lines = [f"- `{c.text.replace('`', chr(39))}`" + (f" — failed ({c.detail})" if c.failed and c.detail else
                                                           " — failed" if c.failed else "") for c in d.commands]
        out += ["## Commands", ""] + _bounded(lines, COMMANDS_BUDGET_BYTES, len(d.more_commands)) + [""]
    if d.changed:
        out += ["## Files changed", ""] + _bounded([f"- {f}" for f in d.changed], FILES_BUDGET_BYTES) + [""]
    if d.read:
        out += ["## Files read", ""] + _bounded([f"- {f}" for f in d.read[:20]], FILES_BUDGET_BYTES // 2) + [""]
    if d.errors:
        out += ["## Errors", ""] + _bounded([f"- {e}" for e in d.errors], ERRORS_BUDGET_BYTES) + [""]
    if d.subagents:
        out += ["## Subagents", ""] + [f"- {s}" for s in d.subagents] + [""]
    if d.compaction or d.compact_instructions:
        out += ["## Compaction summary", ""]
        if d.compaction:
            out += [cap_utf8(d.compaction, COMPACT_CAP_BYTES), ""]
        if d.compact_instructions:
            out += [f"Asked to keep: {_one_line(d.compact_instructions, 512)}", ""]
    if d.stop:
        out += ["## Final message", "", cap_utf8(d.stop, STOP_CAP_BYTES), ""]
    if d.pending_permission:
        out += ["## Waiting on", "", f"Permission to run {_one_line(d.pending_permission, 300)}", ""]
    if d.tail:
        out += ["## From the transcript", "", cap_utf8(d.tail, TAIL_CAP_BYTES), ""]
    return title, cap_utf8("\n".join(out), BODY_CAP_BYTES)


def next_step(d: Digest) -> str:
    """What the next agent should do, from the digest alone (rule-based), without a leading "Next:" label."""
    if d.pending_permission:
        return f"the session stopped waiting for permission: {_one_line(d.pending_permission, 300)}"
    if d.last_failure:
        return f"fix what failed last: {_one_line(d.last_failure, 400)}"
    if d.stop:
        hint = next((s.strip() for s in re.split(r"(?<=[.!?])\s+", d.stop) if _NEXT_RE.search(s)), None)
        hint = _NEXT_LABEL_RE.sub("", hint) if hint else None  # "Next: add tests." → "add tests."
        if hint:
            return _one_line(hint, 400)
    if d.ended_mid_turn and d.prompts:
        return f"the last request may be unfinished: {_one_line(d.prompts[-1], 400)}"
    return "check the changes against the task, then continue from the final message"


def render_handoff(session_id: str, row: Any, d: Digest, page_path: str, roots: list[str],
                   reason: str | None = None) -> tuple[str, str]:
    """Return ``(title, body)`` of the automatic handoff (body ≤ ``HANDOFF_CAP_BYTES``)."""
    last = _one_line(d.prompts[-1], 100) if d.prompts else ""
    title = f"Continue: {last}" if last else f"Continue session {session_id[:12]}"
    where = relative(row["cwd"], roots, None) if row["cwd"] else "?"
    lines = [f"Previous session {session_id} ({row['agent']}) in {'the repository root' if where == '.' else where}"
             f" ended: {how_it_ended(reason)}."]
    if d.task:
        lines.append(f"Task: {_one_line(d.task, 1024)}")
    if len(d.prompts) > 1:
        lines.append(f"Last request: {_one_line(d.prompts[-1], 512)}")
    if d.changed:
        lines.append("Changed: " + ", ".join(d.changed[:15]) + (f" (+{len(d.changed) - 15} more)"
                                                                 if len(d.changed) > 15 else ""))
    if d.commands:
        lines.append("Ran: " + "; ".join(f"`{c.text}`" + (" (failed)" if c.failed else "")
                                         for c in d.commands[-5:]))
    if d.errors:
        lines.append("Failed: " + " | ".join(d.errors[-3:]))
    if d.stop:
        lines.append(f"Where it stopped: {_one_line(d.stop, 1536)}")
    lines.append(f"Next: {next_step(d)}")
    lines.append(f"Summary page: {page_path}")
    return title[:512], cap_utf8("\n".join(lines), HANDOFF_CAP_BYTES)


__all__ = ["END_REASONS", "Digest", "digest", "how_it_ended", "meaningful_line", "next_step", "relative",
           "render_handoff", "render_page", "sections"]
