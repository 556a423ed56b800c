"""What every transcript reader shares: events, per-file state, the line reader (stdlib only).

A reader turns a client's own transcript file into ``Event``s of the shared vocabulary:
a ``generic`` hook payload whose ``hook_event_name`` is an ``ObservationKind`` value
(``user-prompt``, ``post-tool-use``, ``stop``, ``post-compaction``, ...), with the
session id, cwd, the line's timestamp and the text a hook would carry. Ingress reads it
with the same normaliser and sanitizer as a live hook (``POST /hook/import``).

Each event carries an idempotency key derived from where it came from — the line's own
uuid when the client writes one (Claude Code), else ``<session id>:<byte offset>`` — so
re-reading a file, or a copy of it, yields the same keys and the server stores nothing
twice. ``FileState`` remembers how far a file was read and the reader's context (session,
cwd, tool calls still waiting for their result), so an incremental run reads only the
appended bytes. Only complete lines are consumed: a last line without its newline that is
not valid JSON (a file being written, or truncated) is counted and left for the next run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

EXCERPT_CHARS = 6 * 1024  # client-side bound; ingress caps excerpts at 2 KiB after redaction
PROMPT_CHARS = 24 * 1024  # prompts, summaries, assistant messages (16 KiB after redaction)
MAX_LINE_BYTES = 64 * 1024 * 1024  # longer lines are skipped as malformed (bounded memory)
MAX_PENDING_CALLS = 256  # tool calls remembered while waiting for their results


@dataclass(slots=True)
class Event:
    """One event to import: ``payload`` is a ``generic`` hook payload; ``end`` marks a session end."""

    key: str
    payload: dict[str, Any]
    end: bool = False

    @property
    def session_id(self) -> str:
        return self.payload["session_id"]

    @property
    def cwd(self) -> str | None:
        return self.payload.get("cwd")


@dataclass(slots=True)
class FileState:
    """How far one transcript file was read (bytes) and the reader's carried context."""

    offset: int = 0
    ctx: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "ctx": self.ctx}

    @classmethod
    def from_json(cls, data: Any) -> "FileState":
        if not isinstance(data, dict) or not isinstance(data.get("offset"), int):
            return cls()
        ctx = data.get("ctx")
        return cls(offset=data["offset"], ctx=ctx if isinstance(ctx, dict) else {})


@dataclass(slots=True)
class ReadStats:
    """Counters of one read: lines seen, malformed (skipped), a truncated tail left unread;
    ``malformed_at``: the 1-based line numbers of the first ``MAX_LOCATED`` malformed lines
    (0: the file as a whole, for the one-document formats)."""

    lines: int = 0
    malformed: int = 0
    truncated: int = 0
    malformed_at: list[int] = field(default_factory=list)
    why: str = ""  # why the file as a whole could not be read (``bad(0, why)``), for the summary

    def bad(self, line: int = 0, why: str = "") -> None:
        """Count a malformed line (or document: ``line`` 0, with ``why`` it could not be read)
        and keep where it is, for the first few."""
        self.malformed += 1
        if len(self.malformed_at) < MAX_LOCATED:
            self.malformed_at.append(line)
        if why and not self.why:
            self.why = why


MAX_LOCATED = 5  # malformed lines located (file:line) per file; the rest are counted


def line_number(path: Path, offset: int) -> int:
    """The 1-based number of the line that starts at byte ``offset`` of ``path`` (reads up to it)."""
    count = 0
    with open(path, "rb") as fh:
        left = offset
        while left > 0:
            chunk = fh.read(min(left, 1 << 20))
            if not chunk:
                break
            count += chunk.count(b"\n")
            left -= len(chunk)
    return count + 1


def json_lines(path: Path, state: FileState, stats: ReadStats) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_start_offset, object)`` for each complete JSON-object line after ``state.offset``.

    Advances ``state.offset`` past every consumed line (also malformed ones, which are
    counted in ``stats.malformed``). A final line without a newline is consumed only when
    it parses; otherwise it counts as ``stats.truncated`` and stays for the next run.
    Memory: one line at a time (lines over ``MAX_LINE_BYTES`` are skipped unread).
    """
    with open(path, "rb") as fh:
        fh.seek(state.offset)
        while True:
            start = fh.tell()
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            complete = raw.endswith(b"\n")
            if not complete and len(raw) > MAX_LINE_BYTES:  # skip the rest of an over-long line
                while raw and not raw.endswith(b"\n"):
                    raw = fh.readline(1024 * 1024)
                stats.lines += 1
                stats.bad(line_number(path, start) if len(stats.malformed_at) < MAX_LOCATED else 0)
                state.offset = fh.tell()
                continue
            if not raw.strip():
                state.offset = fh.tell()
                continue
            obj = _parse(raw)
            if obj is None and not complete:
                stats.truncated += 1
                return
            stats.lines += 1
            state.offset = fh.tell()
            if obj is None:
                stats.bad(line_number(path, start) if len(stats.malformed_at) < MAX_LOCATED else 0)
                continue
            yield start, obj


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def bound(text: Any, chars: int = EXCERPT_CHARS) -> str | None:
    """Return ``text`` as a string of at most ~``chars`` chars, cut at whitespace (``…``).

    The cut falls on whitespace where there is some in the last 512 chars, so no token (a
    secret) is split here; ingress redacts, then applies its byte caps.
    """
    if text is None:
        return None
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False, default=str)
    if len(text) <= chars:
        return text
    head = text[:chars]
    cut = max(head.rfind(" ", chars - 512), head.rfind("\n", chars - 512))
    return (head[:cut] if cut > 0 else head) + "…"


def text_of(content: Any) -> str:
    """Join the text of a message ``content`` (a string, or a list of typed blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(p for p in parts if p)
    return ""


def event(key: str, kind: str, session_id: str, cwd: str | None, timestamp: Any, **fields: Any) -> Event:
    """Build an ``Event`` (``generic`` payload; ``None`` fields left out)."""
    payload = {"hook_event_name": kind, "session_id": session_id, "cwd": cwd, "timestamp": timestamp}
    payload.update(fields)
    return Event(key=key[:200], payload={k: v for k, v in payload.items() if v is not None})


def remember_call(ctx: dict[str, Any], call_id: str, name: str, args: Any) -> None:
    """Keep a tool call until its result line arrives (bounded: oldest dropped)."""
    calls = ctx.setdefault("calls", {})
    calls[call_id] = [name, bound(args) if not isinstance(args, dict) else _bound_args(args)]
    while len(calls) > MAX_PENDING_CALLS:
        calls.pop(next(iter(calls)))


def _bound_args(args: dict[str, Any]) -> dict[str, Any]:
    return {k: (bound(v, 2048) if isinstance(v, str) else v) for k, v in list(args.items())[:32]}


def take_call(ctx: dict[str, Any], call_id: Any) -> tuple[str | None, Any]:
    """Return and forget ``(tool name, args)`` of a remembered call; ``(None, None)`` if unknown."""
    got = ctx.get("calls", {}).pop(call_id, None) if isinstance(call_id, str) else None
    return (got[0], got[1]) if got else (None, None)


LineReader = Callable[[dict[str, Any], int, dict[str, Any]], Iterator[Event]]


def read_jsonl(path: Path, state: FileState, stats: ReadStats, line: LineReader) -> Iterator[Event]:
    """Run ``line(obj, offset, ctx)`` over the new lines of a JSONL transcript, then flush the
    turn's pending end-of-turn message (the events of one incremental read)."""
    for offset, obj in json_lines(path, state, stats):
        yield from line(obj, offset, state.ctx)
    yield from flush_stop(state.ctx)


def hold_stop(ctx: dict[str, Any], key: str, session_id: str, cwd: str | None, timestamp: Any, text: str,
              model: str | None = None) -> None:
    """Remember the turn's latest assistant text; ``flush_stop`` emits it when the turn ends."""
    ctx["text"] = [key, session_id, cwd, timestamp, bound(text, PROMPT_CHARS), model]


def flush_stop(ctx: dict[str, Any]) -> Iterator[Event]:
    """Emit the held assistant text as a ``stop`` event (once)."""
    pending = ctx.pop("text", None)
    if pending:
        key, sid, cwd, ts, text, model = pending
        yield event(key, "stop", sid, cwd, ts, message=text, model=model or ctx.get("model"))


def glob_under(root: Path, pattern: str, *, recursive: bool = False) -> Iterator[Path]:
    """Yield the files matching ``pattern`` under ``root`` (sorted; nothing when it is absent)."""
    if root.is_dir():
        yield from sorted(root.rglob(pattern) if recursive else root.glob(pattern))
