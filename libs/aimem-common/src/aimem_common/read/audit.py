"""The audit log, newest first (every writer op that changes who or what is remembered)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

MAX_AUDIT = 1000


def list_audit(conn: sqlite3.Connection, *, limit: int = 50, op: str | None = None,
               before_id: int | None = None, project_id: str | None = None) -> list[dict[str, Any]]:
    """Return audit rows newest first: ``[{id, at, actor, op, workspace_id, project_id,
    workspace, project, target, detail (parsed JSON or the raw text), cmd_id}]``.

    Args:
        limit: rows (1–1000). op: only this op. before_id: rows with a smaller id (paging).
        project_id: only rows of this project.
    """
    limit = max(1, min(limit, MAX_AUDIT))
    sql = ("SELECT a.id, a.at, a.actor, a.op, a.workspace_id, a.project_id, w.name AS workspace, p.name AS project,"
           " a.target, a.detail, a.cmd_id FROM audit_log a LEFT JOIN workspaces w ON w.id = a.workspace_id"
           " LEFT JOIN projects p ON p.id = a.project_id WHERE 1 = 1")
    args: list[Any] = []
    if op:
        sql += " AND a.op = ?"
        args.append(op)
    if before_id is not None:
        sql += " AND a.id < ?"
        args.append(before_id)
    if project_id is not None:
        sql += " AND a.project_id = ?"
        args.append(project_id)
    out = []
    for r in conn.execute(sql + " ORDER BY a.id DESC LIMIT ?", (*args, limit)):
        d = dict(r)
        try:
            d["detail"] = json.loads(d["detail"]) if d["detail"] else None
        except ValueError:
            pass
        out.append(d)
    return out
