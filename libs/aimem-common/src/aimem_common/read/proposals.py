"""Auto-improve proposals (the pending-writes audit trail), read-only.

Shared by the maintainer's ``pending_writes`` NATS job and the query service's
``/admin/pending-writes`` so both list exactly the same rows.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from aimem_common.errors import NotFoundError

_LIST_SQL = (
    "SELECT a.id, w.name AS workspace, p.name AS project, a.session_id, a.path, a.title, a.rationale,"
    " a.confidence, a.status, a.created_at, a.decided_at, a.decided_by, a.applied_page_id,"
    " length(a.body) AS body_chars FROM auto_improve_proposals a JOIN projects p ON p.id = a.project_id"
    " JOIN workspaces w ON w.id = a.workspace_id WHERE 1 = 1"
)


def list_proposals(conn: sqlite3.Connection, project_id: str | None, status: str | None = "pending",
                   limit: int = 100) -> list[dict[str, Any]]:
    """Return proposals newest first: ``[{id, workspace, project, session_id, path, title,
    rationale, confidence, status, created_at, decided_at, decided_by, applied_page_id,
    body_chars}]``, len ≤ ``limit``; ``project_id``/``status`` None = any."""
    sql, args = _LIST_SQL, []
    if project_id is not None:
        sql += " AND a.project_id = ?"
        args.append(project_id)
    if status:
        sql += " AND a.status = ?"
        args.append(status)
    sql += " ORDER BY a.id DESC LIMIT ?"
    args.append(limit)
    return [dict(r) for r in conn.execute(sql, args)]


def get_proposal(conn: sqlite3.Connection, proposal_id: int) -> dict[str, Any]:
    """Return one proposal with its full body ``{id, workspace, project, path, title, body,
    rationale, confidence, status, target_page_id, created_at, decided_at, decided_by}``.

    Raises:
        NotFoundError: no proposal with that id.
    """
    row = conn.execute(
        "SELECT a.id, w.name AS workspace, p.name AS project, a.path, a.title, a.body, a.rationale, a.confidence,"
        " a.status, a.target_page_id, a.created_at, a.decided_at, a.decided_by FROM auto_improve_proposals a"
        " JOIN projects p ON p.id = a.project_id JOIN workspaces w ON w.id = a.workspace_id WHERE a.id = ?",
        (proposal_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"proposal {proposal_id} not found", data={"id": proposal_id})
    return dict(row)
