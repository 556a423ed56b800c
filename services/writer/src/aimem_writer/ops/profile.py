"""Profile memory: ``profile.add`` and ``profile.remove`` (``aimem_common.commands.profile``).

A profile belongs to one owner (``user_id``; NULL = the operator) and is read by every
later session of that owner, in any project (``aimem_common.read.profile``). The envelope's
scope, when it names an existing project, is recorded as the source, so purging that
project, workspace or session removes what was stated there (``purge_entries``).
"""

from __future__ import annotations

import sqlite3

from aimem_common.commands import Envelope
from aimem_common.commands.profile import MAX_ENTRIES_PER_OWNER, ProfileAdd, ProfileRemove
from aimem_common.errors import ConflictError, NotFoundError
from aimem_common.read.profile import entries

from aimem_writer.forget import forget_profile_replies
from aimem_writer.registry import handler
from aimem_writer.tx import Tx


def _owner_label(user_id: int | None) -> str:
    return "operator" if user_id is None else f"user:{user_id}"


def _check_user(tx: Tx, user_id: int | None) -> None:
    if user_id is not None and tx.conn.execute("SELECT 1 FROM users WHERE id = ?", (user_id,)).fetchone() is None:
        raise NotFoundError(f"user {user_id} not found", data={"user_id": user_id})


@handler("profile.add")
def profile_add(tx: Tx, env: Envelope, cmd: ProfileAdd) -> dict:
    """Store one preference; an identical one already there is returned instead (no copy).

    Result: ``{"entry": {id, body, created_at, ...}, "created": bool}``.

    Raises:
        NotFoundError: the owner user does not exist.
        ConflictError: ``profile_full`` — the owner already has ``MAX_ENTRIES_PER_OWNER``.
    """
    _check_user(tx, cmd.user_id)
    same = tx.conn.execute("SELECT id FROM profile_entries WHERE user_id IS ? AND body = ?",
                           (cmd.user_id, cmd.body)).fetchone()
    if same is None:
        n = tx.conn.execute("SELECT count(*) FROM profile_entries WHERE user_id IS ?", (cmd.user_id,)).fetchone()[0]
        if n >= MAX_ENTRIES_PER_OWNER:
            raise ConflictError(f"the profile already holds {n} entries; remove one first", code="profile_full",
                                data={"entries": n, "cap": MAX_ENTRIES_PER_OWNER})
        source = None
        if env.scope is not None:
            try:
                source = tx.scope(create=False)
            except NotFoundError:  # stated outside any known project: kept without a source
                source = None
        eid = tx.conn.execute(
            "INSERT INTO profile_entries(user_id, body, source_project_id, source_session_id, created_by, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (cmd.user_id, cmd.body, source.project_id if source else None, cmd.session_id or None, tx.actor, tx.now),
        ).lastrowid
        tx.audit("profile.add", _owner_label(cmd.user_id), {"entry_id": eid, "user_id": cmd.user_id}, scope=source)
        tx.emit("profile.changed", {"user_id": cmd.user_id, "entry_id": eid, "action": "added"})
    else:
        eid = same[0]
    entry = next(e for e in entries(tx.conn, cmd.user_id) if e["id"] == eid)
    return {"entry": entry, "created": same is None}


@handler("profile.remove")
def profile_remove(tx: Tx, env: Envelope, cmd: ProfileRemove) -> dict:
    """Delete one preference of the owner. Result: ``{"removed": entry_id}``.

    Raises:
        NotFoundError: ``not_found`` — no such entry in this owner's profile (another
            owner's entry answers the same).
    """
    gone = tx.conn.execute("DELETE FROM profile_entries WHERE id = ? AND user_id IS ?",
                           (cmd.entry_id, cmd.user_id)).rowcount
    if not gone:
        raise NotFoundError(f"profile entry {cmd.entry_id} not found", code="not_found",
                            data={"entry_id": cmd.entry_id})
    forget_profile_replies(tx.conn, [cmd.entry_id], hint=f"profile entry {cmd.entry_id} removed")
    tx.audit("profile.remove", _owner_label(cmd.user_id), {"entry_id": cmd.entry_id, "user_id": cmd.user_id})
    tx.emit("profile.changed", {"user_id": cmd.user_id, "entry_id": cmd.entry_id, "action": "removed"})
    return {"removed": cmd.entry_id}


def purge_entries(conn: sqlite3.Connection, *, project_ids: list[str] | None = None, session_id: str | None = None,
                  dry_run: bool = False) -> int:
    """Delete (or, ``dry_run``, count) the profile entries stated in these projects or in
    this session (a purge forgets what was said there); return how many."""
    if project_ids is not None:
        if not project_ids:
            return 0
        where, args = f"source_project_id IN ({','.join('?' * len(project_ids))})", list(project_ids)
    else:
        where, args = "source_session_id = ?", [session_id]
    if dry_run:
        return conn.execute(f"SELECT count(*) FROM profile_entries WHERE {where}", args).fetchone()[0]
    ids = [r[0] for r in conn.execute(f"SELECT id FROM profile_entries WHERE {where}", args)]
    forget_profile_replies(conn, ids, hint="its profile entry was purged")  # the replies that echo them
    return conn.execute(f"DELETE FROM profile_entries WHERE {where}", args).rowcount
