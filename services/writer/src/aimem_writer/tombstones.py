"""Purge tombstones on the writer side: written in the purge's transaction, consulted by
every op that could bring purged data back (``aimem_common.read.tombstones`` holds the
lookups and the rules).

A refused command is dropped and counted on the tombstone that refused it (``refused_events``,
``refused`` by op, ``last_refused_at``) in the same transaction that would have stored it; its
text is stored nowhere. Runs on the writer thread.
"""

from __future__ import annotations

import json
from typing import Any

from aimem_common.models import Scope
from aimem_common.read.tombstones import scope_tombstone, session_tombstone

from aimem_writer.tx import Tx


def record(tx: Tx, kind: str, scope: Scope, *, removed: dict[str, Any], session_id: str | None = None,
           parent_id: int | None = None, workspace_only: bool = False) -> int:
    """Insert one live tombstone for what this command purged; return its id.

    ``workspace_only`` records a workspace purge (no project). ``removed`` is the purge's
    deleted counts (JSON, no text of what was removed).
    """
    return tx.conn.execute(
        "INSERT INTO purge_tombstones(kind, workspace_id, project_id, session_id, workspace, project, parent_id,"
        " purged_at, actor, cmd_id, removed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (kind, scope.workspace_id, None if workspace_only else scope.project_id, session_id, scope.workspace,
         None if workspace_only else scope.project, parent_id, tx.now, tx.actor, tx.cmd_id,
         json.dumps(removed, sort_keys=True)),
    ).lastrowid


def refusal(tx: Tx, session_id: str | None, at: str) -> int | None:
    """Return the id of the live tombstone that refuses an event of ``session_id`` that
    happened at ``at`` (ISO UTC) under the envelope's scope names; None when it may be stored."""
    if session_id:
        tid = session_tombstone(tx.conn, session_id)
        if tid is not None:
            return tid
    ref = tx.env.scope
    if ref is None:
        return None
    return scope_tombstone(tx.conn, ref.workspace, ref.project, at)


def count_refused(tx: Tx, tombstone_id: int, op: str, n: int = 1) -> None:
    """Add ``n`` refused ``op`` commands to the tombstone's counters (this transaction)."""
    tx.conn.execute(
        "UPDATE purge_tombstones SET refused_events = refused_events + ?, last_refused_at = ?,"
        " refused = json_set(refused, '$.\"' || ? || '\"', coalesce(json_extract(refused, '$.\"' || ? || '\"'), 0) + ?)"
        " WHERE id = ?", (n, tx.now, op, op, n, tombstone_id))


def refuse(tx: Tx, session_id: str | None, at: str) -> int | None:
    """Check and count in one step: the refusing tombstone's id (counted), or None."""
    tid = refusal(tx, session_id, at)
    if tid is not None:
        count_refused(tx, tid, tx.op)
    return tid


def scrub_ledgers(tx: Tx, session_id: str) -> int:
    """Stage removing ``session_id``'s entries from the hook ledgers of every project that
    holds its observations (call before deleting them); returns how many projects."""
    places = tx.conn.execute("SELECT DISTINCT workspace_id, project_id FROM observations WHERE session_id = ?",
                             (session_id,)).fetchall()
    for wid, pid in places:
        tx.wiki.scrub_ledgers(wid, pid, session_id)
    return len(places)
