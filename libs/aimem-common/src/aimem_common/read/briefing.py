"""The one reader of a project's briefing: its rules and slots, and the structured snapshot.

``rules_and_slots`` is what every caller that injects or shows "the standing rules and
memory slots of a project" reads (the session-start context of ingress, the MCP briefing,
the maintainer's explore digest). ``briefing`` is the structured snapshot behind
``memory_briefing``/``memory_explore``, composed from the shared read layer
(``read.status``, ``read.pages``, ``read.sessions``) plus the rules/slots and the "settled"
rule/decision pages ranked by evidence. Sync, one read connection (``ReaderPool.run``).
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


def _live_pages_of_kind(conn: sqlite3.Connection, scope: Scope, kind: str, order: str, limit: int
                        ) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT id, path, title, body, kind, expires_at, updated_at FROM pages WHERE project_id = ?"
        f" AND is_latest = 1 AND kind = ? ORDER BY {order} LIMIT ?",
        (scope.project_id, kind, limit * 2),
    ).fetchall()
    return [
        {"page_id": r["id"], "path": r["path"], "title": r["title"], "kind": r["kind"], "body": r["body"] or "",
         "updated_at": r["updated_at"]}
        for r in rows if not is_expired(r["expires_at"])
    ][:limit]


def rules_and_slots(conn: sqlite3.Connection, scope: Scope, *, limit: int = MAX_RULES) -> dict[str, list[dict[str, Any]]]:
    """Return the live, unexpired ``_slots/`` and ``_rules/`` pages of ``scope``.

    Shape: ``{"slots": [page, by path], "rules": [page, newest first]}``, at most ``limit``
    of each; ``page`` = ``{"page_id", "path", "title", "kind", "body" (full), "updated_at"}``.
    """
    return {
        "slots": _live_pages_of_kind(conn, scope, "slot", "path", limit),
        "rules": _live_pages_of_kind(conn, scope, "rule", "updated_at DESC, path", limit),
    }


def _capped(pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pages by path, each body cut at ``RULE_BODY_CHARS`` (``truncated`` says so)."""
    return [
        {**p, "body": p["body"][:RULE_BODY_CHARS], "truncated": len(p["body"]) > RULE_BODY_CHARS}
        for p in sorted(pages, key=lambda p: p["path"])
    ]


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
    rs = rules_and_slots(conn, scope)
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
        rules=_capped(rs["rules"]),
        slots=_capped(rs["slots"]),
        recent=pages,
    )
    return out
