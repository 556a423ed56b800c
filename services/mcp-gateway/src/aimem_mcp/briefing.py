"""The structured project briefing behind ``memory_briefing`` and ``memory_explore``.

Composed from the shared read layer (``read.status``, ``read.pages``, ``read.sessions``)
plus two small listings of maintained pages (rules/slots and "settled" rule/decision
pages ranked by evidence). Sync, one read connection (``ReaderPool.run``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from aimem_common.models import Scope
from aimem_common.read.pages import is_expired, recent
from aimem_common.read.sessions import list_sessions
from aimem_common.read.status import counts

RULE_BODY_CHARS = 600  # rules and slots are short by design; cap a runaway one
MAX_RULES = 20
MAX_SETTLED = 8


def _kind_pages(conn: sqlite3.Connection, scope: Scope, kinds: tuple[str, ...], limit: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        f"SELECT id, path, title, body, kind, expires_at, updated_at FROM pages WHERE project_id = ?"
        f" AND is_latest = 1 AND kind IN ({','.join('?' * len(kinds))}) ORDER BY path LIMIT ?",
        (scope.project_id, *kinds, limit * 2),
    ).fetchall()
    out = []
    for r in rows:
        if is_expired(r["expires_at"]):
            continue
        body = r["body"] or ""
        out.append({
            "page_id": r["id"], "path": r["path"], "title": r["title"], "kind": r["kind"],
            "body": body[:RULE_BODY_CHARS], "truncated": len(body) > RULE_BODY_CHARS, "updated_at": r["updated_at"],
        })
    return out[:limit]


def _settled(conn: sqlite3.Connection, scope: Scope) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT p.id, p.path, p.title, p.kind, p.updated_at, p.expires_at,"
        " (SELECT count(*) FROM page_evidence e WHERE e.page_id = p.id) AS evidence_count"
        " FROM pages p WHERE p.project_id = ? AND p.is_latest = 1 AND p.kind IN ('rule', 'decision')"
        " ORDER BY evidence_count DESC, p.updated_at DESC LIMIT ?",
        (scope.project_id, MAX_SETTLED * 2),
    ).fetchall()
    return [
        {"page_id": r["id"], "path": r["path"], "title": r["title"], "kind": r["kind"],
         "evidence_count": r["evidence_count"], "updated_at": r["updated_at"]}
        for r in rows if not is_expired(r["expires_at"])
    ][:MAX_SETTLED]


def briefing(conn: sqlite3.Connection, scope: Scope, *, recent_limit: int = 10, settled_first: bool = False) -> dict[str, Any]:
    """Return the structured snapshot of ``scope``.

    Shape: ``{"workspace", "project", "counts", "activity": {"last_page_update",
    "recent_sessions": [SessionSummary ≤ 5]}, "rules": [...], "slots": [...],
    "recent": [PageSummary ≤ recent_limit], "settled"?: [≤ 8 rule/decision pages by
    evidence count then recency]}``; ``settled`` comes first when ``settled_first``.
    """
    c = counts(conn, scope)
    sessions = list_sessions(conn, scope, limit=5)
    pages = recent(conn, scope, limit=recent_limit)
    out: dict[str, Any] = {"workspace": scope.workspace, "project": scope.project}
    if settled_first:
        out["settled"] = _settled(conn, scope)
    out.update(
        counts=c,
        activity={
            "last_page_update": pages[0]["updated_at"] if pages else None,
            "recent_sessions": sessions,
        },
        rules=_kind_pages(conn, scope, ("rule",), MAX_RULES),
        slots=_kind_pages(conn, scope, ("slot",), MAX_RULES),
        recent=pages,
    )
    return out
