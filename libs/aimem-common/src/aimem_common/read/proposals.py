"""Auto-improve proposals (the pending-writes audit trail), read-only.

Shared by the maintainer's ``pending_writes`` NATS job and the query service's
``/admin/pending-writes`` so both list exactly the same rows.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from aimem_common.errors import NotFoundError

_LIST_SQL = (
    "SELECT a.id, w.name AS workspace, p.name AS project, a.session_id, a.path, a.title, a.rationale,"
    " a.confidence, a.status, a.created_at, a.decided_at, a.decided_by, a.applied_page_id,"
    " length(a.body) AS body_chars, a.reject_stage, a.reject_reason FROM auto_improve_proposals a JOIN projects p ON p.id = a.project_id"
    " JOIN workspaces w ON w.id = a.workspace_id WHERE 1 = 1"
)


def list_proposals(conn: sqlite3.Connection, project_id: str | None, status: str | None = "pending",
                   limit: int = 100) -> list[dict[str, Any]]:
    """Return proposals newest first: ``[{id, workspace, project, session_id, path, title,
    rationale, confidence, status, created_at, decided_at, decided_by, applied_page_id,
    body_chars, reject_stage, reject_reason}]``, len ≤ ``limit``; ``project_id``/``status`` None = any."""
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
    rationale, confidence, status, target_page_id, created_at, decided_at, decided_by, patch,
    reject_stage, reject_reason, eval}`` (``patch`` the edits ``[{find, replace}]``, ``eval``
    the eval gate's answer; both None when absent).

    Raises:
        NotFoundError: no proposal with that id.
    """
    row = conn.execute(
        "SELECT a.id, w.name AS workspace, p.name AS project, a.path, a.title, a.body, a.rationale, a.confidence,"
        " a.status, a.target_page_id, a.created_at, a.decided_at, a.decided_by, a.patch, a.reject_stage,"
        " a.reject_reason, a.eval FROM auto_improve_proposals a"
        " JOIN projects p ON p.id = a.project_id JOIN workspaces w ON w.id = a.workspace_id WHERE a.id = ?",
        (proposal_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"proposal {proposal_id} not found", data={"id": proposal_id})
    out = dict(row)
    for k in ("patch", "eval"):
        out[k] = json.loads(out[k]) if out[k] else None
    return out


REJECTION_EXCERPT = 300  # characters of each edit's find/replace given back to the model


def recent_rejections(conn: sqlite3.Connection, project_id: str, limit: int) -> list[dict[str, Any]]:
    """The project's newest rejected proposals, for the next review (the rejection buffer):
    ``[{path, stage, reason, edits: [{find, replace}]}]``, newest first, len ≤ ``limit``;
    ``stage`` is validation|eval|operator, each edit's text cut to ``REJECTION_EXCERPT``."""
    if limit <= 0:
        return []
    out = []
    for r in conn.execute(
        "SELECT path, reject_stage, reject_reason, patch FROM auto_improve_proposals WHERE project_id = ?"
        " AND status = 'rejected' ORDER BY id DESC LIMIT ?", (project_id, limit)):
        edits = json.loads(r["patch"]) if r["patch"] else []
        out.append({"path": r["path"], "stage": r["reject_stage"] or "operator", "reason": r["reject_reason"] or "",
                    "edits": [{k: (e.get(k) or "")[:REJECTION_EXCERPT] for k in ("find", "replace")}
                              for e in edits[:8]]})
    return out


def report(conn: sqlite3.Connection, project_id: str, *, recent: int = 20) -> dict[str, Any]:
    """What auto-improve did in one project (read-only; ``auto-improve-report``).

    Returns ``{runs: {status: n}, proposals: {status: n}, rejected_by: {stage: n},
    acceptance: approved / (approved + rejected) or None, watermark_at,
    recent: [{id, session_id, path, status, reject_stage, reject_reason, edits, changed_chars,
    created_at}]}`` with ``recent`` newest first, len ≤ ``recent``.
    """
    runs = {r[0]: r[1] for r in conn.execute(
        "SELECT status, count(*) FROM auto_improve_runs WHERE project_id = ? GROUP BY status", (project_id,))}
    props = {r[0]: r[1] for r in conn.execute(
        "SELECT status, count(*) FROM auto_improve_proposals WHERE project_id = ? GROUP BY status", (project_id,))}
    by = {r[0] or "operator": r[1] for r in conn.execute(
        "SELECT reject_stage, count(*) FROM auto_improve_proposals WHERE project_id = ? AND status = 'rejected'"
        " GROUP BY reject_stage", (project_id,))}
    wm = conn.execute("SELECT watermark_at FROM auto_improve_state WHERE project_id = ?", (project_id,)).fetchone()
    decided = props.get("approved", 0) + props.get("rejected", 0)
    rows = []
    for r in conn.execute(
        "SELECT id, session_id, path, status, reject_stage, reject_reason, patch, created_at"
        " FROM auto_improve_proposals WHERE project_id = ? ORDER BY id DESC LIMIT ?", (project_id, recent)):
        edits = json.loads(r["patch"]) if r["patch"] else []
        rows.append({"id": r["id"], "session_id": r["session_id"], "path": r["path"], "status": r["status"],
                     "reject_stage": r["reject_stage"], "reject_reason": r["reject_reason"], "edits": len(edits),
                     "changed_chars": sum(len(e.get("find") or "") + len(e.get("replace") or "") for e in edits),
                     "created_at": r["created_at"]})
    return {"runs": runs, "proposals": props, "rejected_by": by,
            "acceptance": round(props.get("approved", 0) / decided, 3) if decided else None,
            "watermark_at": wm[0] if wm else None, "recent": rows}
