"""Purge tombstones on the writer side.

Written in the purge's transaction, consulted by every op that could bring purged data back
(``aimem_common.read.tombstones`` holds the lookups and the rules).

A refused command is dropped and counted on the tombstone that refused it (``refused_events``,
``refused`` by op, ``last_refused_at``) in the same transaction that would have stored it; its
text is stored nowhere. Runs on the writer thread.
"""

from __future__ import annotations

import json
from typing import Any

from aimem_common.models import Scope
from aimem_common.read.tombstones import refusing_tombstone, session_tombstone

from aimem_writer.tx import Tx


def record(tx: Tx, kind: str, scope: Scope, *, removed: dict[str, Any], session_id: str | None = None,
           parent_id: int | None = None, workspace_only: bool = False) -> int:
    """Insert one live tombstone for what this command purged; return its id.

    ``workspace_only`` records a workspace purge (no project). ``removed`` is the purge's
    deleted counts (JSON, no text of what was removed).
    """
    row = {"kind": kind, "workspace_id": scope.workspace_id,
           "project_id": None if workspace_only else scope.project_id, "session_id": session_id,
           "workspace": scope.workspace, "project": None if workspace_only else scope.project,
           "purged_at": tx.now, "actor": tx.actor, "cmd_id": tx.cmd_id, "removed": removed}
    tid = insert(tx.conn, row, parent_id=parent_id)
    # The wiki keeps the ids too (no text), so a rebuild from it (``aimem reindex``) restores them.
    tx.wiki.append_rel(PURGES_FILE, json.dumps(row, sort_keys=True) + "\n")
    return tid


PURGES_FILE = "_purges.jsonl"  # at the wiki root: one line per tombstone or lift (ids, names, counts)


def insert(conn, row: dict[str, Any], *, parent_id: int | None = None) -> int:
    """Insert one tombstone row (``record``'s fields); return its id."""
    return conn.execute(
        "INSERT INTO purge_tombstones(kind, workspace_id, project_id, session_id, workspace, project, parent_id,"
        " purged_at, actor, cmd_id, removed, lifted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (row["kind"], row["workspace_id"], row.get("project_id"), row.get("session_id"), row["workspace"],
         row.get("project"), parent_id, row["purged_at"], row.get("actor") or "?", row.get("cmd_id"),
         json.dumps(row.get("removed") or {}, sort_keys=True), row.get("lifted_at")),
    ).lastrowid


def note_lift(tx: Tx, where: str, args: tuple, ids: list[int]) -> None:
    """Record a lift in the wiki's purge file (``restore``/``reindex`` replay it)."""
    tx.wiki.append_rel(PURGES_FILE, json.dumps({"lift": {"where": where, "args": list(args)}, "at": tx.now,
                                                 "ids": ids}) + "\n")


def restore_from_wiki(conn, root) -> int:
    """Recreate the tombstones (and lifts) recorded in ``<wiki>/_purges.jsonl``; return how many
    tombstones are live. Direct-disk (``reindex``), inside its transaction."""
    from pathlib import Path

    path = Path(root) / PURGES_FILE
    if not path.is_file():
        return 0
    for line in path.read_text("utf-8").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if "lift" in item:
            lift = item["lift"]
            conn.execute(f"UPDATE purge_tombstones SET lifted_at = ?, lifted_by = 'reindex' WHERE lifted_at IS NULL"
                         f" AND {LIFT_WHERE.get(lift.get('where'), '0')}", tuple(lift.get("args") or ()))
        elif isinstance(item, dict) and item.get("kind") in ("session", "project", "workspace"):
            insert(conn, item)
    return conn.execute("SELECT count(*) FROM purge_tombstones WHERE lifted_at IS NULL").fetchone()[0]


# The lift targets (``purge.lift``): named, never SQL from the file.
LIFT_WHERE = {
    "session": "session_id = ?",
    "project": "kind = 'project' AND workspace = ? AND project = ?",
    "workspace": "kind = 'workspace' AND workspace = ?",
}


def refusal(tx: Tx, session_id: str | None, at: str) -> int | None:
    """Return the id of the live tombstone that refuses an event of ``session_id`` that
    happened at ``at`` (ISO UTC) under the envelope's scope names; None when it may be stored."""
    ref = tx.env.scope
    if ref is None:
        return session_tombstone(tx.conn, session_id) if session_id else None
    return refusing_tombstone(tx.conn, session_id or "", ref.workspace, ref.project, at)


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
