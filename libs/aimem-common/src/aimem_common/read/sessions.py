"""Session reads: the session list of a project and one session's raw observations.

Shapes::

    SessionSummary = {"session_id", "agent", "cwd", "model", "started_at", "last_event_at",
                      "ended_at": str|None, "observation_count": int,
                      "summary_page_id": int|None, "summary_path": str|None,
                      "workspace", "project"}
    ObservationRecord = {"id", "session_id", "kind", "agent", "cwd", "title", "body",
                         "truncated": bool, "body_chars": int, "tool_name", "source_event",
                         "extension", "occurred_at", "created_at"}

Sync functions over a read connection (``ReaderPool.run``).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from aimem_common.errors import NotFoundError
from aimem_common.models import Scope
from aimem_common.read import scopes, visibility

if TYPE_CHECKING:
    from aimem_common.auth import Principal

MAX_SESSIONS = 500
MAX_OBSERVATIONS = 500
DEFAULT_BODY_MAX_CHARS = 4000
MAX_BODY_MAX_CHARS = 16 * 1024

_SESSION_SQL = """
SELECT s.session_id, s.agent, s.cwd, s.model, s.started_at, s.last_event_at, s.ended_at,
       s.observation_count, s.summary_page_id, p.path AS summary_path
FROM sessions s LEFT JOIN pages p ON p.id = s.summary_page_id
"""


def _session(row: sqlite3.Row, scope: Scope) -> dict[str, Any]:
    out = {k: row[k] for k in row.keys()}
    out.update(workspace=scope.workspace, project=scope.project)
    return out


def list_sessions(
    conn: sqlite3.Connection, scope: Scope, *, limit: int = 50, ended_only: bool = False
) -> list[dict[str, Any]]:
    """Return ``list[SessionSummary]`` of ``scope``, ``last_event_at`` descending, len ≤ ``limit``."""
    limit = max(1, min(limit, MAX_SESSIONS))
    where = " WHERE s.project_id = ?" + (" AND s.ended_at IS NOT NULL" if ended_only else "")
    rows = conn.execute(
        _SESSION_SQL + where + " ORDER BY s.last_event_at DESC, s.id DESC LIMIT ?", (scope.project_id, limit)
    ).fetchall()
    return [_session(r, scope) for r in rows]


def locate_session(conn: sqlite3.Connection, session_id: str,
                   workspace: str | None = None) -> tuple[Scope, str | None] | None:
    """Return ``(scope, cwd)`` of the project where ``session_id`` ran (its latest event wins
    when the id is in several projects; only ``workspace``'s when given), else ``None``.

    Ingress joins an event that carries a session id but no location to its session with it
    (docs/lifecycle.md "Events without a location").
    """
    rows = conn.execute("SELECT project_id, workspace_id, cwd FROM sessions WHERE session_id = ?"
                        " ORDER BY last_event_at DESC, id DESC LIMIT 20", (session_id,)).fetchall()
    for r in rows:
        found = scopes.find_by_id(conn, r["project_id"], r["workspace_id"])
        if found is not None and (workspace is None or found.workspace == workspace):
            return found, r["cwd"]
    return None


def get_session(conn: sqlite3.Connection, scope: Scope, session_id: str | None = None) -> dict[str, Any]:
    """Return one ``SessionSummary``; ``session_id=None`` = the latest *ended* session.

    Raises:
        NotFoundError: ``session_not_found``.
    """
    if session_id is None:
        row = conn.execute(
            _SESSION_SQL + " WHERE s.project_id = ? AND s.ended_at IS NOT NULL"
            " ORDER BY s.ended_at DESC, s.id DESC LIMIT 1",
            (scope.project_id,),
        ).fetchone()
    else:
        row = conn.execute(
            _SESSION_SQL + " WHERE s.project_id = ? AND s.session_id = ?", (scope.project_id, session_id)
        ).fetchone()
    if row is None:
        what = f"session {session_id!r}" if session_id else "a completed session"
        raise NotFoundError(f"{what} not found in {scope.workspace}/{scope.project}", code="session_not_found",
                            data={"session_id": session_id})
    return _session(row, scope)


def session_observations(
    conn: sqlite3.Connection,
    scope: Scope,
    session_id: str | None = None,
    *,
    offset: int = 0,
    limit: int = 100,
    body_max_chars: int = DEFAULT_BODY_MAX_CHARS,
    reader: "Principal | None" = None,
) -> dict[str, Any]:
    """Page through one session's observations that landed in ``scope``.

    Args:
        session_id: the session; ``None`` reads the latest completed session.
        offset: rows to skip (0-based, in ``id`` order = arrival order).
        limit: rows to return (1–500).
        body_max_chars: per-row body cap in characters (≤ 16384); capped rows have
            ``truncated: true`` and the original length in ``body_chars``.

    Returns ``{"session": SessionSummary, "session_id", "observations":
    list[ObservationRecord], "total": int (rows in scope), "elided_other_scope": int (rows of
    the same session id stored under other projects ``reader`` may read; ``reader`` None:
    none are counted), "offset", "limit",
    "next_offset": int|None}``.

    Raises:
        NotFoundError: ``session_not_found``.
    """
    session = get_session(conn, scope, session_id)
    sid = session["session_id"]
    offset = min(max(0, offset), 2**63 - 1)  # SQLite binds a 64-bit OFFSET at most
    limit = max(1, min(limit, MAX_OBSERVATIONS))
    cap = max(1, min(body_max_chars, MAX_BODY_MAX_CHARS))
    total = conn.execute(
        "SELECT count(*) FROM observations WHERE project_id = ? AND session_id = ?", (scope.project_id, sid)
    ).fetchone()[0]
    vis = visibility.only(scope) if reader is None else visibility.readable(conn, reader)
    where, args = vis.where("project_id")
    other = conn.execute(
        f"SELECT count(*) FROM observations WHERE session_id = ? AND project_id != ?{where}",
        (sid, scope.project_id, *args),
    ).fetchone()[0]
    rows = conn.execute(
        "SELECT id, session_id, kind, agent, cwd, title, body, tool_name, source_event, extension,"
        " occurred_at, created_at FROM observations WHERE project_id = ? AND session_id = ?"
        " ORDER BY id LIMIT ? OFFSET ?",
        (scope.project_id, sid, limit, offset),
    ).fetchall()
    obs = []
    for r in rows:
        d = {k: r[k] for k in r.keys()}
        body = d["body"] or ""
        d["body_chars"] = len(body)
        d["truncated"] = len(body) > cap
        if d["truncated"]:
            d["body"] = body[:cap]
        obs.append(d)
    nxt = offset + len(rows)
    return {
        "session": session,
        "session_id": sid,
        "observations": obs,
        "total": total,
        "elided_other_scope": other,
        "offset": offset,
        "limit": limit,
        "next_offset": nxt if nxt < total else None,
    }


def idle_sessions(conn: sqlite3.Connection, *, quiet_before: str, limit: int = 200) -> list[dict[str, Any]]:
    """Open sessions whose last event is older than ``quiet_before`` (ISO-8601 UTC), oldest first.

    Shape: ``[{"workspace", "project", "session_id", "agent", "cwd", "last_event_at",
    "observation_count"}]``, len ≤ ``limit``. The maintainer finalises these through the
    session-end path (``session.end`` with reason ``idle``).
    """
    rows = conn.execute(
        "SELECT w.name AS workspace, p.name AS project, s.session_id, s.agent, s.cwd, s.last_event_at,"
        " s.observation_count FROM sessions s JOIN projects p ON p.id = s.project_id"
        " JOIN workspaces w ON w.id = p.workspace_id"
        # Compared as instants (julianday), not text: rows stored before event times had one
        # fixed width hold "…:35Z", which sorts after "…:35.839Z" as text.
        " WHERE s.ended_at IS NULL AND julianday(s.last_event_at) < julianday(?)"
        " ORDER BY julianday(s.last_event_at) LIMIT ?",
        (quiet_before, max(1, limit)),
    ).fetchall()
    return [{k: r[k] for k in r.keys()} for r in rows]


def session_locations(conn: sqlite3.Connection, *, workspace_id: str | None = None,
                      project_id: str | None = None) -> list[dict[str, Any]]:
    """Return every distinct ``cwd`` sessions ran in (store-wide, or of one workspace or
    project), with where those sessions are now: ``[{"cwd", "sessions": int,
    "projects": ["ws/project", ...]}]`` ordered by cwd. Sessions without a cwd are left
    out. For ``aimem reorg``, which resolves each directory's project again."""
    where, args = ["s.cwd IS NOT NULL", "s.cwd != ''"], []
    if workspace_id is not None:
        where.append("s.workspace_id = ?")
        args.append(workspace_id)
    if project_id is not None:
        where.append("s.project_id = ?")
        args.append(project_id)
    out: dict[str, dict[str, Any]] = {}
    for cwd, ws, pj, n in conn.execute(
            "SELECT s.cwd, w.name, p.name, count(*) FROM sessions s JOIN projects p ON p.id = s.project_id"
            " JOIN workspaces w ON w.id = s.workspace_id WHERE " + " AND ".join(where)
            + " GROUP BY s.cwd, w.name, p.name ORDER BY s.cwd, w.name, p.name", args):
        entry = out.setdefault(cwd, {"cwd": cwd, "sessions": 0, "projects": []})
        entry["sessions"] += n
        entry["projects"].append(f"{ws}/{pj}")
    return list(out.values())
