"""Small read helpers of the maintainer's jobs (sync, ``fn(conn, ...)``).

Jobs read through the service's ``ReaderPool`` (``ctx.read_pool.run``, DESIGN.md invariant
2: read-only connections, off the event loop, with a time budget); scopes come from
``aimem_common.read.scopes`` and the FTS query from ``aimem_common.read.text`` like every
other reader's.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from aimem_common.read.text import fts_query, query_terms


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


def live_page(conn: sqlite3.Connection, project_id: str, path: str) -> sqlite3.Row | None:
    return conn.execute(
        "SELECT * FROM pages WHERE project_id = ? AND path = ? AND is_latest = 1", (project_id, path)
    ).fetchone()


RELATED_TERMS = 12  # content terms of the basis text in the related-pages FTS query
MIN_RELATED_TERM_CHARS = 4  # short words match too many pages to say "related"


def related_pages(conn: sqlite3.Connection, project_id: str, text: str, *, k: int, exclude_path: str | None = None
                  ) -> list[sqlite3.Row]:
    """Top-``k`` live pages of the project by FTS bm25 against ``text`` (bounded context)."""
    q = fts_query([t for t in query_terms(text, max_terms=4 * RELATED_TERMS)
                   if len(t) >= MIN_RELATED_TERM_CHARS][:RELATED_TERMS])
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
