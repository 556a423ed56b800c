"""Page ops: ``page.write``, ``page.write_batch``, ``page.delete``, ``page.access``, ``page.feedback``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from aimem_common.errors import AimemError, NotFoundError
from aimem_common.commands import Envelope
from aimem_common.commands.pages import PageAccess, PageDelete, PageFeedback, PageWrite, PageWriteBatch
from aimem_common.wikifmt import normalize_timestamp

from aimem_writer.registry import handler
from aimem_writer.tx import Tx

# memory_feedback → salience: bounded nudges, never to zero (a page is forgotten by the
# sweep's retention, not by one vote).
SALIENCE_DELTA = {"helpful": 0.2, "not_helpful": -0.15, "stale": -0.25, "wrong": -0.4}
SALIENCE_MIN, SALIENCE_MAX = 0.05, 3.0


@handler("page.write")
def page_write(tx: Tx, env: Envelope, cmd: PageWrite) -> dict:
    """Create or supersede one page; result as ``PageStore.write``."""
    return tx.pages.write(tx.scope(create=True), cmd)


@handler("page.write_batch")
def page_write_batch(tx: Tx, env: Envelope, cmd: PageWriteBatch) -> dict:
    """Write 1–100 pages all or nothing (one failure fails the command; its SAVEPOINT undoes all).

    The error names the failing page: ``data.index`` and ``data.path``.
    """
    scope = tx.scope(create=True)
    out = []
    for i, page in enumerate(cmd.pages):
        try:
            out.append(tx.pages.write(scope, page))
        except AimemError as err:
            err.data = {**(err.data or {}), "index": i, "path": page.path}
            err.message = f"pages[{i}] ({page.path}): {err.message}"
            err.args = (err.message,)
            raise
    return {"pages": out}


@handler("page.delete")
def page_delete(tx: Tx, env: Envelope, cmd: PageDelete) -> dict:
    """Delete the live page (idempotent). Result ``{deleted, page_id, path}``."""
    return tx.pages.delete(tx.scope(create=False), cmd.path, reason="deleted",
                           expected_page_id=cmd.expected_page_id)


@handler("page.access")
def page_access(tx: Tx, env: Envelope, cmd: PageAccess) -> dict:
    """Bump access counters, at most once per ``query.access_bump_interval_s`` per page.

    Result ``{bumped: [page_id], skipped: int}``; ids that are not live pages (or not in the
    envelope's scope, when it has one) are skipped.
    """
    at = normalize_timestamp(cmd.at) if cmd.at else tx.now
    at_dt = datetime.fromisoformat(at.replace("Z", "+00:00"))
    cutoff = (at_dt - timedelta(seconds=tx.settings.query.access_bump_interval_s)).astimezone(UTC)
    cutoff_s = cutoff.isoformat().replace("+00:00", "Z")
    project_id = tx.scope(create=False).project_id if env.scope is not None else None
    bumped = []
    for pid in dict.fromkeys(cmd.page_ids):
        row = tx.conn.execute(
            "SELECT id, last_accessed_at, project_id FROM pages WHERE id = ? AND is_latest = 1", (pid,)
        ).fetchone()
        if row is None or (project_id and row["project_id"] != project_id):
            continue
        tx.conn.execute(
            "INSERT INTO page_access(page_id, actor, count, last_at) VALUES (?, ?, 1, ?)"
            " ON CONFLICT(page_id, actor) DO UPDATE SET count = count + 1, last_at = excluded.last_at",
            (pid, tx.actor, at),
        )
        if row["last_accessed_at"] is not None and row["last_accessed_at"] > cutoff_s:
            continue
        tx.conn.execute(
            "UPDATE pages SET access_count = access_count + 1, last_accessed_at = ? WHERE id = ?", (at, pid)
        )
        bumped.append(pid)
    return {"bumped": bumped, "skipped": len(cmd.page_ids) - len(bumped)}


@handler("page.feedback")
def page_feedback(tx: Tx, env: Envelope, cmd: PageFeedback) -> dict:
    """Record a quality signal and move the page's salience. Result ``{page_id, salience}``."""
    scope = tx.scope(create=False)
    row = tx.pages.get(scope, cmd.path)
    if row is None:
        raise NotFoundError(f"page {cmd.path!r} not found in {scope.workspace}/{scope.project}",
                            data={"path": cmd.path})
    base = row["salience"] if row["salience"] is not None else tx.settings.decay.salience_default
    salience = round(min(SALIENCE_MAX, max(SALIENCE_MIN, base + SALIENCE_DELTA[cmd.signal])), 4)
    tx.conn.execute(
        "INSERT INTO page_feedback(workspace_id, project_id, page_id, path, signal, reason, actor, salience_after,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (scope.workspace_id, scope.project_id, row["id"], cmd.path, cmd.signal, cmd.reason, tx.actor, salience,
         tx.now),
    )
    tx.conn.execute("UPDATE pages SET salience = ? WHERE id = ?", (salience, row["id"]))
    tx.audit("page.feedback", cmd.path, {"page_id": row["id"], "signal": cmd.signal, "salience": salience},
             scope=scope)
    tx.emit("page.feedback", {"path": cmd.path, "page_id": row["id"], "signal": cmd.signal, "salience": salience})
    return {"page_id": row["id"], "path": cmd.path, "signal": cmd.signal, "salience": salience}
