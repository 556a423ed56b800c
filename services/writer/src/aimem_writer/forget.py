"""What a purge forgets beyond the rows it deletes: stored replies, dead letters, index segments, free pages.

A purge of a session, project or workspace must leave none of the purged text anywhere in
the store, nor in a later ``aimem backup`` (a copy of the file). Besides the domain rows the
purge ops delete, text outlives them in:

* ``ingest_keys.result`` — the stored reply a re-sent command gets again. ``handoff.accept``
  answers with the handoff's title and body, a page write or a profile entry may echo text.
  The reply of every command of a purged project (``ingest_keys.project_id``, migration 24)
  and every reply that names a purged session id (any JSON key ending in ``session_id``)
  is replaced by ``purged_reply``: a ``purged`` error (410). The key itself stays, so a
  re-sent command is still answered from the ledger and never applied again; it is told that
  what it answered was forgotten rather than given a reply with holes (a caller could not
  tell a stripped handoff from a real one, and which fields carry text differs by op).
  ``profile.add`` answers with the entry: its reply is forgotten with the entry (removed,
  purged, or its owner deleted: ``forget_profile_replies``).
* ``dead_letters.envelope`` — the whole command given up, kept for replay. Dead letters of
  a purged project (by name) or naming a purged session id are deleted: a replay would be
  refused by the tombstone anyway.
* FTS5 index segments — a deleted row's terms stay in older segments until they merge;
  ``'optimize'`` merges each index into one segment without them.
* free pages — the writer connection runs with ``PRAGMA secure_delete = ON`` (zeros over
  deleted content), and the WAL holding the pre-purge page images is checkpointed and
  truncated right after the purge commits (``truncate_wal``).

Runs on the writer thread inside the purge's transaction (``truncate_wal`` after COMMIT).
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Iterable

# The ledger SQL of forgetting lives with the rest of the ledger's (ledger.py); these are what a purge calls.
from aimem_writer.ledger import forget_dead_letters, forget_profile_replies, forget_replies
from aimem_writer.tx import Tx

log = logging.getLogger("aimem.writer.forget")

# The ops after whose COMMIT the WAL is truncated (they delete text a user asked to forget).
PURGE_OPS = frozenset({"session.purge", "project.purge", "workspace.purge", "user.delete", "profile.remove"})

_FTS5 = re.compile(r"\bUSING\s+fts5\s*\(", re.IGNORECASE)


def optimize_text_indexes(conn: sqlite3.Connection) -> int:
    """Merge every FTS5 index into one segment (drops deleted rows' terms); return how many."""
    names = [name for name, sql in conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'")
        if _FTS5.search(sql)]  # not the fts5vocab views over them
    for name in names:
        conn.execute(f'INSERT INTO "{name}"("{name}") VALUES (\'optimize\')')
    return len(names)


def forget_stored_text(tx: Tx, *, session_ids: Iterable[str], project_ids: Iterable[str] = (),
                       places: Iterable[tuple[str, str | None]] = (), hint: str) -> dict[str, int]:
    """Everything above for one purge, in its transaction; returns the counts for its reply."""
    sids = list(session_ids)
    return {
        "stored_replies_forgotten": forget_replies(tx.conn, session_ids=sids, project_ids=project_ids, hint=hint),
        "dead_letters_deleted": forget_dead_letters(tx.conn, session_ids=sids, places=places),
        "text_indexes_merged": optimize_text_indexes(tx.conn),
    }


def truncate_wal(conn: sqlite3.Connection) -> bool:
    """After a purge's COMMIT: copy the WAL into the file and truncate it, so the page images
    from before the purge are gone. Returns False when a reader kept it from finishing (the
    frames are then overwritten by later writes; logged)."""
    try:
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    except sqlite3.Error as exc:
        log.warning("WAL checkpoint after a purge failed: %r", exc)
        return False
    if busy:
        log.warning("WAL checkpoint after a purge was blocked by a reader; old frames remain until reused")
    return not busy
