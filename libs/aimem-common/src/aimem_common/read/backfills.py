"""Reading the backfill-on-start records (``project_backfills``) for status."""

from __future__ import annotations

import sqlite3
from typing import Any

FIELDS = ("agent", "session_id", "state", "claimed_at", "finished_at", "files", "sessions", "events",
          "new_events", "error")


def public_row(row: sqlite3.Row) -> dict[str, Any]:
    """One backfill as JSON: ``agent``, ``session_id`` (the start that claimed it), ``state``
    (``running`` | ``done`` | ``failed``), ``claimed_at``/``finished_at`` (ISO-8601 UTC),
    ``files``/``sessions``/``events``/``new_events`` (counts), ``truncated`` (a bound stopped it
    early), ``error`` (one line, or None)."""
    return {**{k: row[k] for k in FIELDS}, "truncated": bool(row["truncated"])}


def list_backfills(conn: sqlite3.Connection, limit: int = 50) -> list[dict[str, Any]]:
    """The newest ``limit`` backfills, each with its ``workspace`` and ``project`` names."""
    rows = conn.execute(
        "SELECT b.*, w.name AS workspace, p.name AS project FROM project_backfills b"
        " JOIN projects p ON p.id = b.project_id JOIN workspaces w ON w.id = b.workspace_id"
        " ORDER BY b.claimed_at DESC LIMIT ?", (limit,)).fetchall()
    return [{"workspace": r["workspace"], "project": r["project"], **public_row(r)} for r in rows]
