"""Purge tombstones (``purge_tombstones``, migration 15).

What was purged and what was refused since.

A tombstone is live until ``purge.lift`` sets ``lifted_at``. A live ``session`` tombstone
refuses every later event of that session id (any project); a live ``project`` or
``workspace`` tombstone refuses events for those names that happened at or before the
purge (an event after the purge is new work in a fresh project).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

COLUMNS = ("id, kind, workspace, project, session_id, parent_id, purged_at, actor, removed,"
           " refused_events, refused, last_refused_at, lifted_at, lifted_by")


def session_tombstone(conn: sqlite3.Connection, session_id: str) -> int | None:
    """Return the id of ``session_id``'s newest live tombstone, or None (an indexed lookup)."""
    row = conn.execute("SELECT max(id) FROM purge_tombstones WHERE session_id = ? AND lifted_at IS NULL",
                       (session_id,)).fetchone()
    return row[0] if row else None


def scope_tombstone(conn: sqlite3.Connection, workspace: str, project: str, at: str) -> int | None:
    """Return the live project/workspace tombstone that refuses an event for these names
    that happened at ``at`` (ISO UTC): one purged at or after ``at``; None otherwise."""
    # Written so the partial index ``purge_tombstones_names`` answers it (a workspace
    # tombstone has no project): the hook hot path runs this once per event.
    row = conn.execute(
        "SELECT max(id) FROM purge_tombstones WHERE kind != 'session' AND lifted_at IS NULL AND workspace = ?"
        " AND (project = ? OR project IS NULL) AND purged_at >= ?",
        (workspace, project, at)).fetchone()
    return row[0] if row else None


def refusing_tombstone(conn: sqlite3.Connection, session_id: str, workspace: str, project: str,
                       at: str) -> int | None:
    """``session_tombstone`` or ``scope_tombstone`` in one statement (the writer's hot path:
    two index searches, one round trip); the newest matching tombstone's id, or None."""
    row = conn.execute(
        "SELECT max(id) FROM (SELECT id FROM purge_tombstones WHERE session_id = ? AND lifted_at IS NULL"
        " UNION ALL SELECT id FROM purge_tombstones WHERE kind != 'session' AND lifted_at IS NULL AND workspace = ?"
        " AND (project = ? OR project IS NULL) AND purged_at >= ?)",
        (session_id, workspace, project, at)).fetchone()
    return row[0] if row else None


def live_session_ids(conn: sqlite3.Connection, known: tuple[int, int] | None = None
                     ) -> tuple[tuple[int, int], frozenset[str] | None]:
    """Return ``(version, ids)``: the purged session ids with a live tombstone.

    ``version`` is ``(max id, live count)``; when it equals ``known`` the ids are not read
    again and ``None`` comes back in their place (a cache's cheap refresh).
    """
    row = conn.execute("SELECT coalesce(max(id), 0), count(*) FROM purge_tombstones"
                       " WHERE session_id IS NOT NULL AND lifted_at IS NULL").fetchone()
    version = (int(row[0]), int(row[1]))
    if version == known:
        return version, None
    ids = frozenset(r[0] for r in conn.execute(
        "SELECT session_id FROM purge_tombstones WHERE session_id IS NOT NULL AND lifted_at IS NULL"))
    return version, ids


def _public(row: sqlite3.Row) -> dict[str, Any]:
    """A tombstone row as a dict with its JSON columns decoded."""
    out = dict(row)
    for key in ("removed", "refused"):
        try:
            out[key] = json.loads(out[key] or "{}")
        except ValueError:
            out[key] = {}
    return out


def list_tombstones(conn: sqlite3.Connection, *, limit: int = 100, include_lifted: bool = False,
                    session_id: str | None = None) -> list[dict[str, Any]]:
    """Return tombstones newest first (``removed``/``refused`` as dicts), len ≤ ``limit``."""
    where, args = [], []
    if not include_lifted:
        where.append("lifted_at IS NULL")
    if session_id is not None:
        where.append("session_id = ?")
        args.append(session_id)
    sql = f"SELECT {COLUMNS} FROM purge_tombstones"
    if where:
        sql += " WHERE " + " AND ".join(where)
    rows = conn.execute(sql + " ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
    return [_public(r) for r in rows]


def summary(conn: sqlite3.Connection) -> dict[str, Any]:
    """``{live: {kind: n}, refused_events, last_refused_at, lifted}`` for ``/admin/status``."""
    live = {r[0]: r[1] for r in conn.execute(
        "SELECT kind, count(*) FROM purge_tombstones WHERE lifted_at IS NULL GROUP BY kind")}
    row = conn.execute("SELECT coalesce(sum(refused_events), 0), max(last_refused_at),"
                       " sum(lifted_at IS NOT NULL) FROM purge_tombstones").fetchone()
    return {"live": live, "refused_events": int(row[0]), "last_refused_at": row[1], "lifted": int(row[2] or 0)}
