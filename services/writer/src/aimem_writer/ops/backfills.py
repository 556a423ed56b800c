"""Backfill-on-start ops.

``backfill.claim`` and ``backfill.finish`` (docs/lifecycle.md "Backfill on start").

A claim succeeds once per project, and only while the project has nothing yet: no live
page and no session other than the live one whose start asks. The row it writes
(``project_backfills``, state ``running``) is the durable marker that refuses every later
claim, across restarts and from any machine. ``finish`` stores what the import did.
"""

from __future__ import annotations

from aimem_common.commands import Envelope
from aimem_common.commands.backfills import BackfillClaim, BackfillFinish
from aimem_common.errors import NotFoundError
from aimem_common.read.backfills import public_row

from aimem_writer.registry import handler
from aimem_writer.tx import Tx


@handler("backfill.claim")
def backfill_claim(tx: Tx, env: Envelope, cmd: BackfillClaim) -> dict:
    """Claim the project's backfill. Result ``{claimed, reason?, backfill}``: ``reason`` is
    ``already`` (a backfill was claimed before; ``backfill`` is that one) or ``not_empty``
    (the project holds pages or other sessions; nothing is recorded, so nothing is claimed
    later either: a project that has something is never backfilled)."""
    scope = tx.scope(create=True)
    row = tx.conn.execute("SELECT * FROM project_backfills WHERE project_id = ?", (scope.project_id,)).fetchone()
    if row is not None:
        return {"claimed": False, "reason": "already", "backfill": public_row(row)}
    other = tx.conn.execute(
        "SELECT 1 FROM sessions WHERE project_id = ? AND session_id != ? LIMIT 1",
        (scope.project_id, cmd.session_id or "")).fetchone()
    pages = tx.conn.execute("SELECT 1 FROM pages WHERE project_id = ? AND is_latest = 1 LIMIT 1",
                            (scope.project_id,)).fetchone()
    if other is not None or pages is not None:
        return {"claimed": False, "reason": "not_empty", "backfill": None}
    tx.conn.execute(
        "INSERT INTO project_backfills(project_id, workspace_id, agent, session_id, state, claimed_at)"
        " VALUES (?, ?, ?, ?, 'running', ?)",
        (scope.project_id, scope.workspace_id, cmd.agent, cmd.session_id, tx.now))
    tx.audit("backfill.claim", scope.project, {"agent": cmd.agent, "session_id": cmd.session_id}, scope=scope)
    row = tx.conn.execute("SELECT * FROM project_backfills WHERE project_id = ?", (scope.project_id,)).fetchone()
    return {"claimed": True, "backfill": public_row(row)}


@handler("backfill.finish")
def backfill_finish(tx: Tx, env: Envelope, cmd: BackfillFinish) -> dict:
    """Record the outcome of the project's backfill. Result ``{backfill}``.

    Raises:
        NotFoundError: ``backfill_not_found`` when the project never claimed one.
    """
    scope = tx.scope()
    cur = tx.conn.execute(
        "UPDATE project_backfills SET state = ?, finished_at = ?, files = ?, sessions = ?, events = ?,"
        " new_events = ?, truncated = ?, error = ? WHERE project_id = ?",
        (cmd.state, tx.now, cmd.files, cmd.sessions, cmd.events, cmd.new_events, int(cmd.truncated),
         cmd.error, scope.project_id))
    if cur.rowcount == 0:
        raise NotFoundError(f"project {scope.workspace}/{scope.project} has no backfill", code="backfill_not_found")
    tx.audit("backfill.finish", scope.project, {"state": cmd.state, "events": cmd.events}, scope=scope)
    row = tx.conn.execute("SELECT * FROM project_backfills WHERE project_id = ?", (scope.project_id,)).fetchone()
    return {"backfill": public_row(row)}
