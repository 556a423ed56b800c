"""Crush sessions: one SQLite database per project, ``<project>/.crush/crush.db``.

Crush (charmbracelet/crush) keeps each working directory's sessions in the ``crush.db`` of
its data directory (``options.data_directory``, ``.crush`` by default) and lists the
projects it has seen in ``~/.local/share/crush/projects.json`` (``{"projects": [{"path",
"data_dir", "last_accessed"}]}``; ``$XDG_DATA_HOME/crush/`` when set). Its tables
(``internal/db`` of its source): ``sessions`` (``id``, ``parent_session_id``, ``title``)
and ``messages`` (``id``, ``session_id``, ``role`` ``user``/``assistant``/``tool``,
``parts``, ``model``, ``created_at`` in epoch seconds, ``finished_at``,
``is_summary_message``). ``parts`` is a JSON list of ``{"type", "data"}``: ``text``
(``text``), ``tool_call`` (``id``, ``name``, ``input`` as a JSON string, ``finished``),
``tool_result`` (``tool_call_id``, ``name``, ``content``, ``is_error``) and ``finish``
(``reason``). Mapping: user text → ``user-prompt``; a tool call + its result →
``post-tool-use``; the turn's last assistant text → ``stop``; a summary message →
``post-compaction``. Sub-agent sessions (``parent_session_id`` set) are the parent's work
and are left out.

The database is opened read-only (Crush may be running: WAL). The unit read is the database
file; ``FileState.ctx["rowid"]`` is the last message row read, and reading stops before an
assistant message Crush has not finished writing, so the next run takes it whole. The
session's working directory is the project the data directory belongs to
(``projects.json``, else the data directory's parent). Keys are ``crush:<message id>:<n>``.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Iterator

from aimem_common.clients.crush import PART_TOOL_CALL, PART_TOOL_RESULT
from aimem_cli import hookconfig
from aimem_cli.transcripts.base import (
    PROMPT_CHARS, Event, FileState, ReadStats, bound, event, flush_stop, hold_stop, remember_call, take_call)

CLIENT = "crush"
ALWAYS_READ = True  # a database grows in its WAL, not its file: the size says nothing
DB_NAME = "crush.db"
MAX_ROWS = 100_000  # messages read per run and database (the rest next run)


def projects_file(home: Path) -> Path:
    """Crush's list of the projects it has seen (``$XDG_DATA_HOME/crush`` beats ``~/.local/share/crush``
    only when ``home`` is the real home)."""
    xdg = hookconfig.xdg_data_home()
    if xdg and home == Path.home():
        return Path(xdg) / "crush" / "projects.json"
    return home / ".local" / "share" / "crush" / "projects.json"


def _projects(home: Path) -> list[dict[str, Any]]:
    try:
        doc = json.loads(projects_file(home).read_bytes())
    except (OSError, ValueError, RecursionError):
        return []
    items = doc.get("projects") if isinstance(doc, dict) else None
    return [p for p in items if isinstance(p, dict) and isinstance(p.get("data_dir"), str)] \
        if isinstance(items, list) else []


def root(home: Path) -> Path:
    """Where Crush lists its projects (``projects_file``; ``aimem import`` names it when missing)."""
    return projects_file(home)


def problem(home: Path) -> str | None:
    """Why Crush's ``projects.json`` cannot be used (None when it can, or is absent): not
    readable, not JSON, or not ``{"projects": [{"data_dir": ...}, ...]}``."""
    path = projects_file(home)
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path}: cannot read it ({exc.strerror or exc})"
    except (ValueError, RecursionError) as exc:
        return f"{path}: not JSON ({exc})"
    items = doc.get("projects") if isinstance(doc, dict) else None
    if not isinstance(items, list) or not all(isinstance(p, dict) and isinstance(p.get("data_dir"), str)
                                              for p in items):
        return f'{path}: not the shape Crush writes ({{"projects": [{{"path", "data_dir"}}, ...]}})'
    return None


def discover(home: Path) -> Iterator[Path]:
    """Yield the ``crush.db`` of every project in Crush's ``projects.json`` that has one."""
    seen: set[Path] = set()
    for project in _projects(home):
        db = Path(project["data_dir"]) / DB_NAME
        if db not in seen and db.is_file():
            seen.add(db)
            yield db


def project_dir(db: Path) -> str | None:
    """The working directory whose data directory holds ``db``: the ``projects.json`` entry of
    the current user naming it, else the parent of a ``.crush`` folder, else None."""
    data_dir = str(db.parent)
    for project in _projects(Path.home()):
        if project["data_dir"].rstrip("/") == data_dir and isinstance(project.get("path"), str):
            return project["path"]
    return str(db.parent.parent) if db.parent.name == ".crush" else None


def read(path: Path, state: FileState, stats: ReadStats) -> Iterator[Event]:
    """Yield the events of the messages after ``state.ctx["rowid"]`` (advancing it), then the pending stop.

    A database that cannot be opened or queried counts as one malformed document."""
    ctx = state.ctx
    ctx.setdefault("cwd", project_dir(path))
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        stats.bad(why=f"cannot open it as SQLite: {exc}")
        return
    try:
        conn.row_factory = sqlite3.Row
        try:
            rows = conn.execute(
                "SELECT m.rowid AS rowid, m.id, m.session_id, m.role, m.parts, m.model, m.created_at,"
                " m.finished_at, m.is_summary_message, s.parent_session_id FROM messages m"
                " JOIN sessions s ON s.id = m.session_id WHERE m.rowid > ? ORDER BY m.rowid LIMIT ?",
                (int(ctx.get("rowid", 0)), MAX_ROWS)).fetchall()
        except sqlite3.Error as exc:  # "file is not a database", "no such table: messages", ...
            stats.bad(why=f"not a Crush database: {exc}")
            return
        for row in rows:
            if row["role"] == "assistant" and row["finished_at"] is None:
                break  # still being written: the next run reads it whole
            ctx["rowid"] = row["rowid"]
            stats.lines += 1
            if row["parent_session_id"]:
                continue
            try:
                parts = json.loads(row["parts"] or "[]")
            except (ValueError, RecursionError):
                stats.bad(row["rowid"])
                continue
            if not isinstance(parts, list):
                stats.bad(row["rowid"])
                continue
            yield from _message(row, [p for p in parts if isinstance(p, dict)], ctx)
        yield from flush_stop(ctx)
    finally:
        conn.close()
    state.offset = 0  # the database is always looked at again (ALWAYS_READ)


def _message(row: sqlite3.Row, parts: list[dict[str, Any]], ctx: dict[str, Any]) -> Iterator[Event]:
    sid, cwd, base = row["session_id"], ctx.get("cwd"), f"{CLIENT}:{row['id']}"
    ts = _iso(row["created_at"])
    data = [(p.get("type"), p.get("data") if isinstance(p.get("data"), dict) else {}) for p in parts]
    text = "\n".join(d["text"] for t, d in data if t == "text" and isinstance(d.get("text"), str)).strip()
    if row["is_summary_message"]:
        if text:
            yield from flush_stop(ctx)
            yield event(f"{base}:0", "post-compaction", sid, cwd, ts, summary=bound(text, PROMPT_CHARS))
        return
    if row["role"] == "user":
        if text:
            yield from flush_stop(ctx)
            yield event(f"{base}:0", "user-prompt", sid, cwd, ts, prompt=bound(text, PROMPT_CHARS))
        return
    if row["role"] == "assistant":
        for kind, d in data:
            if kind == PART_TOOL_CALL and isinstance(d.get("id"), str):
                remember_call(ctx, d["id"], str(d.get("name") or "tool"), _args(d.get("input")))
        if text:
            hold_stop(ctx, f"{base}:stop", sid, cwd, ts, text, row["model"])
        return
    n = 0
    for kind, d in data:  # role "tool": the results of the previous assistant message's calls
        if kind != PART_TOOL_RESULT:
            continue
        name, args = take_call(ctx, d.get("tool_call_id"))
        out = str(d.get("content") or "")
        if d.get("is_error"):
            out = f"Error: {out}"
        yield event(f"{base}:{n}", "post-tool-use", sid, cwd, ts, tool_name=name or str(d.get("name") or "tool"),
                    tool_input=args, tool_response=bound(out))
        n += 1


def _args(raw: Any) -> Any:
    """A tool call's input: Crush stores the model's arguments as a JSON string."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _iso(seconds: Any) -> str | None:
    if not isinstance(seconds, (int, float)):
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    except (ValueError, OverflowError, OSError):
        return None
