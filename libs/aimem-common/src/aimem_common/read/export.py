"""Export reads: a project's live pages, sessions, observations and handoffs, in pages of rows.

``export_part(conn, scope, part, after=0, limit=500)`` returns ``{"part", "items",
"next": int|None}``: rows of ``part`` with ``id > after`` in id order, ``next`` the last
id when more may follow (pass it back as ``after``). Shapes of the items::

    pages        {"id", "path", "title", "body", "frontmatter": dict, "kind", "tags": list,
                  "session_id", "created_at", "updated_at"}         (live versions only)
    sessions     {"id", "session_id", "agent", "cwd", "model", "started_at",
                  "last_event_at", "ended_at", "observation_count"}
    observations {"id", "session_id", "kind", "agent", "cwd", "title", "body", "tool_name",
                  "source_event", "extension", "occurred_at"}         (bodies in full)
    handoffs     {"id", "automatic", "shared", "from_agent", "to_agent", "from_session_id",
                  "cwd", "title", "body", "status", "created_at", "closed_at"}

Sync functions over a read connection (``ReaderPool.run``); ``aimem export`` is the caller.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from aimem_common.errors import BadRequestError
from aimem_common.models import Scope

MAX_ROWS = 1000
_SQL = {
    "pages": "SELECT id, path, title, body, frontmatter, kind, tags, session_id, created_at, updated_at"
             " FROM pages WHERE project_id = ? AND is_latest = 1 AND retired_reason IS NULL AND id > ?"
             " ORDER BY id LIMIT ?",
    "sessions": "SELECT id, session_id, agent, cwd, model, started_at, last_event_at, ended_at, observation_count"
                " FROM sessions WHERE project_id = ? AND id > ? ORDER BY id LIMIT ?",
    "observations": "SELECT id, session_id, kind, agent, cwd, title, body, tool_name, source_event, extension,"
                    " occurred_at FROM observations WHERE project_id = ? AND id > ? ORDER BY id LIMIT ?",
    "handoffs": "SELECT id, automatic, shared, from_agent, to_agent, from_session_id, cwd, title, body, status,"
                " created_at, closed_at FROM handoffs WHERE project_id = ? AND id > ? ORDER BY id LIMIT ?",
}
PARTS = tuple(_SQL)


def export_part(conn: sqlite3.Connection, scope: Scope, part: str, *, after: int = 0,
                limit: int = 500) -> dict[str, Any]:
    """Return up to ``limit`` (≤ ``MAX_ROWS``) rows of ``part`` after id ``after`` (see module doc).

    Raises:
        BadRequestError: ``invalid_part`` for a part not in ``PARTS``.
    """
    if part not in _SQL:
        raise BadRequestError(f"unknown export part {part!r}; expected one of {PARTS}", code="invalid_part")
    limit = max(1, min(limit, MAX_ROWS))
    rows = conn.execute(_SQL[part], (scope.project_id, max(0, after), limit)).fetchall()
    items = []
    for r in rows:
        item = {k: r[k] for k in r.keys()}
        for key in ("frontmatter", "tags"):
            if key in item and isinstance(item[key], str):
                item[key] = json.loads(item[key])
        items.append(item)
    return {"part": part, "items": items, "next": items[-1]["id"] if len(items) == limit else None}
