"""Read-only access to the store for the maintainer (DESIGN.md invariant 2).

Every job reads through a fresh ``mode=ro`` connection opened in a worker thread
(``ReadStore.run``), so a long sweep never blocks the event loop and no connection is
shared across threads. Functions here are sync and take the open connection.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from aimem_common.db.connect import open_reader

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ScopeIds:
    """One workspace/project: names (for envelopes) and ids (for queries)."""

    workspace: str
    project: str
    workspace_id: str
    project_id: str

    def as_dict(self) -> dict[str, str]:
        return {"workspace": self.workspace, "project": self.project}


class ReadStore:
    """Opens read-only connections on demand (thread per call)."""

    def __init__(self, db_path: Path, *, wait_s: float = 60.0):
        self.db_path = db_path
        self.wait_s = wait_s

    def open(self) -> sqlite3.Connection:
        return open_reader(self.db_path, wait_s=self.wait_s)

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on a worker thread with a fresh read-only connection."""

        def call() -> T:
            conn = self.open()
            try:
                return fn(conn)
            finally:
                conn.close()

        return await asyncio.to_thread(call)


def parse_time(value: str | None) -> datetime | None:
    """Parse an ISO-8601 timestamp or date (naive = UTC); None/invalid → None."""
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def days_between(later: datetime, earlier: datetime | None) -> float | None:
    """Return ``later - earlier`` in days (float), None when ``earlier`` is None."""
    if earlier is None:
        return None
    return (later - earlier).total_seconds() / 86400.0


def list_scopes(conn: sqlite3.Connection) -> list[ScopeIds]:
    """Every existing workspace/project, ordered by names (what each tick enumerates)."""
    rows = conn.execute(
        "SELECT w.name AS ws, p.name AS pj, w.id AS wid, p.id AS pid FROM projects p "
        "JOIN workspaces w ON w.id = p.workspace_id ORDER BY w.name, p.name"
    ).fetchall()
    return [ScopeIds(r["ws"], r["pj"], r["wid"], r["pid"]) for r in rows]


def find_scope(conn: sqlite3.Connection, workspace: str, project: str) -> ScopeIds | None:
    """Resolve names to ids; None when the project does not exist."""
    r = conn.execute(
        "SELECT w.name AS ws, p.name AS pj, w.id AS wid, p.id AS pid FROM projects p "
        "JOIN workspaces w ON w.id = p.workspace_id WHERE w.name = ? AND p.name = ?",
        (workspace, project),
    ).fetchone()
    return ScopeIds(r["ws"], r["pj"], r["wid"], r["pid"]) if r else None


def live_page(conn: sqlite3.Connection, project_id: str, path: str) -> sqlite3.Row | None:
    return conn.execute(
        "SELECT * FROM pages WHERE project_id = ? AND path = ? AND is_latest = 1", (project_id, path)
    ).fetchone()


def fts_terms(text: str, limit: int = 12) -> str | None:
    """An FTS5 OR query of the text's longer words, each quoted (no operator injection)."""
    import re

    seen: list[str] = []
    for w in re.findall(r"[\w][\w.-]{3,}", text.lower()):
        w = w.strip(".-")
        if len(w) > 3 and w not in seen and w not in _STOP:
            seen.append(w)
        if len(seen) >= limit:
            break
    if not seen:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in seen)


_STOP = {"this", "that", "with", "from", "have", "were", "will", "what", "when", "which", "there", "their",
         "about", "would", "could", "should", "into", "than", "then", "them", "they", "been", "also", "only"}


def related_pages(conn: sqlite3.Connection, project_id: str, text: str, *, k: int, exclude_path: str | None = None
                  ) -> list[sqlite3.Row]:
    """Top-``k`` live pages of the project by FTS bm25 against ``text`` (bounded context)."""
    q = fts_terms(text)
    if not q or k <= 0:
        return []
    try:
        return conn.execute(
            "SELECT p.id, p.path, p.title, substr(p.body, 1, 2000) AS body FROM pages_fts f "
            "JOIN pages p ON p.id = f.rowid WHERE pages_fts MATCH ? AND p.project_id = ? AND p.is_latest = 1 "
            "AND p.path != ? AND p.kind NOT IN ('lint', 'pending') ORDER BY bm25(pages_fts) LIMIT ?",
            (q, project_id, exclude_path or "", k),
        ).fetchall()
    except sqlite3.OperationalError:
        return []
