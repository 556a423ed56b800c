"""What a purge forgets beyond the rows it deletes: stored replies, dead letters, index
segments and free pages.

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

import json
import logging
import re
import sqlite3
from collections.abc import Iterable

from aimem_common.bus.codec import reply_body
from aimem_common.errors import GoneError

from aimem_writer.ledger import reply_json
from aimem_writer.tx import Tx

log = logging.getLogger("aimem.writer.forget")

# The ops after whose COMMIT the WAL is truncated (they delete text a user asked to forget).
PURGE_OPS = frozenset({"session.purge", "project.purge", "workspace.purge", "user.delete", "profile.remove"})

# A JSON document (reply or envelope) naming one of the sessions in the JSON array bound to
# its one ``?`` under any key ending in ``session_id`` (session_id, from_session_id, …).
_NAMES_SESSION = (
    "json_valid({col}) AND EXISTS (SELECT 1 FROM json_tree({col}) t, json_each(?) s"
    " WHERE t.key LIKE '%session_id' AND t.type = 'text' AND t.atom = s.value)"
)
_FTS5 = re.compile(r"\bUSING\s+fts5\s*\(", re.IGNORECASE)
_PREFILTER_MAX = 50  # up to this many session ids, SQL narrows the rows by substring; more: one regex pass


def purged_reply(cmd_id: str, tombstone_hint: str) -> str:
    """The stored reply that replaces one naming purged data (JSON text of ``reply_body``)."""
    err = GoneError(f"the reply of this command held data that was purged ({tombstone_hint}); it is not kept",
                    data={"forgotten": True})
    return reply_json(reply_body(cmd_id, error=err))


def forget_replies(conn: sqlite3.Connection, *, session_ids: Iterable[str], project_ids: Iterable[str] = (),
                   hint: str) -> int:
    """Replace the stored replies of the purged projects' commands and of every command whose
    reply names a purged session; return how many rows were rewritten."""
    sids, pids = sorted(set(session_ids)), sorted(set(project_ids))
    n = 0
    if pids:
        rows = conn.execute(
            f"SELECT key, cmd_id FROM ingest_keys WHERE project_id IN ({','.join('?' * len(pids))})"
            " AND (result IS NULL OR json_extract(result, '$.error.code') IS NOT 'purged')", pids).fetchall()
        n += _rewrite(conn, rows, hint)
    if len(sids) > _PREFILTER_MAX:
        # Many sessions (a project's): one pass, a regex over the JSON text, then a parse of the hits.
        wanted = set(sids)
        quoted = re.compile("|".join(re.escape(json.dumps(sid, ensure_ascii=False)) for sid in sids))
        rows = [(key, cmd_id) for key, cmd_id, result in conn.execute(
            "SELECT key, cmd_id, result FROM ingest_keys WHERE result IS NOT NULL")
            if quoted.search(result) and _names_session(_loads(result), wanted)]
        n += _rewrite(conn, rows, hint)
    elif sids:
        # Every project: a handoff of the purged session may have been accepted elsewhere.
        prefilter = " OR ".join("instr(result, ?) > 0" for _ in sids)
        rows = conn.execute(
            f"SELECT key, cmd_id FROM ingest_keys WHERE result IS NOT NULL AND ({prefilter})"
            " AND json_extract(result, '$.error.code') IS NOT 'purged' AND " + _NAMES_SESSION.format(col="result"),
            (*sids, json.dumps(sids))).fetchall()
        n += _rewrite(conn, rows, hint)
    return n


def _loads(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def _names_session(doc, wanted: set[str]) -> bool:
    """Whether a parsed reply names one of ``wanted`` under a key ending in ``session_id``
    (what ``_NAMES_SESSION`` asks in SQL); a marker already written does not count."""
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict) and doc["error"].get("code") == "purged":
        return False
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                if isinstance(v, str):
                    if k.endswith("session_id") and v in wanted:
                        return True
                elif isinstance(v, (dict, list)):
                    stack.append(v)
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, (dict, list)))
    return False


def forget_profile_replies(conn: sqlite3.Connection, entry_ids: Iterable[int], *, hint: str) -> int:
    """Replace the stored replies of ``profile.add`` that answered with one of these entries
    (removed, purged with where they were stated, or their owner deleted); return how many."""
    ids = sorted(set(entry_ids))
    if not ids:
        return 0
    rows = conn.execute(
        "SELECT key, cmd_id FROM ingest_keys WHERE op = 'profile.add' AND json_valid(result)"
        " AND json_extract(result, '$.result.entry.id') IN (SELECT value FROM json_each(?))",
        (json.dumps(ids),)).fetchall()
    return _rewrite(conn, rows, hint)


def _rewrite(conn: sqlite3.Connection, rows: list, hint: str) -> int:
    for key, cmd_id in rows:
        conn.execute("UPDATE ingest_keys SET result = ? WHERE key = ?", (purged_reply(cmd_id, hint), key))
    return len(rows)


def forget_dead_letters(conn: sqlite3.Connection, *, session_ids: Iterable[str],
                        places: Iterable[tuple[str, str | None]] = ()) -> int:
    """Delete the dead letters of the purged places (``(workspace, project)`` names; project
    None = the whole workspace) and those whose envelope names a purged session."""
    n = 0
    for workspace, project in places:
        if project is None:
            n += conn.execute("DELETE FROM dead_letters WHERE workspace = ?", (workspace,)).rowcount
        else:
            n += conn.execute("DELETE FROM dead_letters WHERE workspace = ? AND project = ?",
                              (workspace, project)).rowcount
    sids = sorted(set(session_ids))
    if sids:
        n += conn.execute("DELETE FROM dead_letters WHERE " + _NAMES_SESSION.format(col="envelope"),
                          (json.dumps(sids),)).rowcount
    return n


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
