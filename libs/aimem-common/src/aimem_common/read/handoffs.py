"""Handoff reads: list without claiming (claiming is the writer op ``handoff.accept``).

``HandoffRecord`` = ``{"id", "workspace", "project", "automatic": bool, "shared": bool,
"owner", "from_agent", "to_agent", "from_session_id", "cwd", "title", "body", "status",
"created_at", "closed_at", "accepted_by", "accepted_session_id", "root", "superseded_by",
"event_at", "started_at"}`` (``status``: open|accepted|expired|superseded). ``created_at`` is
arrival; ``event_at`` when the work ended by the events' own time (an automatic handoff's
session end; a manual one's begin), ``started_at`` when that session began
(docs/lifecycle.md).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Literal

from aimem_common.models import Scope

MAX_HANDOFFS = 200


def list_handoffs(
    conn: sqlite3.Connection,
    scope: Scope,
    *,
    viewer: str | None = None,
    status: Literal["open", "accepted", "expired", "superseded", "any"] = "open",
    limit: int = 50,
    include_body: bool = True,
) -> list[dict[str, Any]]:
    """Return handoffs of ``scope``, oldest first by event time, len ≤ ``limit`` (≤ 200). Read-only.

    Args:
        viewer: the caller's actor name; when given only its own, shared, automatic (they
            belong to their place, whoever wrote them) and owner-less handoffs are listed.
            ``None`` (root, ``any_owner``) lists all.
        status: filter; ``"any"`` lists every state.
        include_body: ``False`` drops ``body`` (the content-free CLI listing).
    """
    limit = max(1, min(limit, MAX_HANDOFFS))
    sql = "SELECT * FROM handoffs WHERE project_id = ?"
    args: list[Any] = [scope.project_id]
    if status != "any":
        sql += " AND status = ?"
        args.append(status)
    if viewer is not None:
        sql += " AND (owner IS NULL OR owner = ? OR shared = 1 OR automatic = 1)"
        args.append(viewer)
    sql += " ORDER BY coalesce(event_at, created_at), created_at, id LIMIT ?"
    args.append(limit)
    out = []
    for r in conn.execute(sql, args):
        d = {k: r[k] for k in r.keys() if k not in ("workspace_id", "project_id")}
        d["automatic"], d["shared"] = bool(d["automatic"]), bool(d["shared"])
        d.update(workspace=scope.workspace, project=scope.project)
        if not include_body:
            d.pop("body")
        out.append(d)
    return out
