"""Cross-project message reads: a project's inbox or outbox (popping is a writer op).

``MessageRecord`` = ``{"id", "from_workspace", "from_project", "to_workspace",
"to_project", "from_actor", "subject", "body", "status", "created_at", "closed_at",
"claimed_by"}``. Bodies are untrusted input from another project.

The counterpart of a message (the sender of an inbox message, the addressee of an outbox
one) is named only when the reader may read that project; otherwise its
``*_workspace``/``*_project`` are ``None`` (``reader``: the ``Principal``; ``None`` = this
project only). The subject and body were written to (or by) this project, so they stay.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, Literal

from aimem_common.models import Scope
from aimem_common.read import visibility

if TYPE_CHECKING:
    from aimem_common.auth import Principal

MAX_MESSAGES = 200


def list_messages(
    conn: sqlite3.Connection,
    scope: Scope,
    *,
    box: Literal["inbox", "outbox"] = "inbox",
    status: Literal["pending", "claimed", "cancelled", "any"] = "pending",
    limit: int = 50,
    reader: "Principal | None" = None,
) -> list[dict[str, Any]]:
    """Return ``list[MessageRecord]`` addressed to (inbox) or sent by (outbox) ``scope``.

    Oldest first, len ≤ ``limit`` (≤ 200).
    """
    limit = max(1, min(limit, MAX_MESSAGES))
    col = "m.to_project_id" if box == "inbox" else "m.from_project_id"
    sql = (
        "SELECT m.id, m.from_project_id, m.to_project_id, fw.name AS from_workspace, fp.name AS from_project, tw.name AS to_workspace,"
        " tp.name AS to_project, m.from_actor, m.subject, m.body, m.status, m.created_at, m.closed_at,"
        " m.claimed_by FROM agent_messages m"
        " JOIN projects fp ON fp.id = m.from_project_id JOIN workspaces fw ON fw.id = fp.workspace_id"
        " JOIN projects tp ON tp.id = m.to_project_id JOIN workspaces tw ON tw.id = tp.workspace_id"
        f" WHERE {col} = ?"
    )
    args: list[Any] = [scope.project_id]
    if status != "any":
        sql += " AND m.status = ?"
        args.append(status)
    sql += " ORDER BY m.id LIMIT ?"
    args.append(limit)
    vis = visibility.only(scope) if reader is None else visibility.readable(conn, reader)
    other = "from" if box == "inbox" else "to"
    out = []
    for r in conn.execute(sql, args):
        d = {k: r[k] for k in r.keys() if k not in ("from_project_id", "to_project_id")}
        if not vis.sees(r[f"{other}_project_id"]):
            d[f"{other}_workspace"] = d[f"{other}_project"] = None
        out.append(d)
    return out
