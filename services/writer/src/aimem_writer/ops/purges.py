"""``purge.lift`` and ``purge.refused``.

The purge tombstones' own ops (the tombstones are written by the purges themselves,
``ops/projects.py``; see ``aimem_writer.tombstones``).
"""

from __future__ import annotations

from aimem_common.commands import Envelope
from aimem_common.commands.admin import PurgeLift, PurgeRefused
from aimem_common.errors import NotFoundError
from aimem_common.read.tombstones import session_tombstone

from aimem_writer.registry import handler
from aimem_writer.tombstones import LIFT_WHERE, count_refused, note_lift
from aimem_writer.tx import Tx


@handler("purge.lift")
def purge_lift(tx: Tx, env: Envelope, cmd: PurgeLift) -> dict:
    """Lift the live tombstones of a session id, a project or a workspace.

    Result ``{lifted: [ids], ...}``; what was purged stays purged.

    Raises:
        NotFoundError: ``no_tombstone`` — nothing live to lift there.
    """
    if cmd.session_id is not None:
        kind, args, target = "session", (cmd.session_id,), cmd.session_id
    elif env.scope is None:
        raise NotFoundError("purge.lift needs a session_id or a scope", code="no_tombstone")
    elif cmd.workspace_only:
        kind, args, target = "workspace", (env.scope.workspace,), env.scope.workspace
    else:
        kind, args = "project", (env.scope.workspace, env.scope.project)
        target = f"{env.scope.workspace}/{env.scope.project}"
    ids = [r[0] for r in tx.conn.execute(
        f"SELECT id FROM purge_tombstones WHERE lifted_at IS NULL AND {LIFT_WHERE[kind]}", args)]
    if not ids:
        raise NotFoundError(f"no live purge tombstone for {target}", code="no_tombstone",
                            data={"target": target})
    tx.conn.execute(f"UPDATE purge_tombstones SET lifted_at = ?, lifted_by = ? WHERE id IN ({','.join('?' * len(ids))})",
                    (tx.now, tx.actor, *ids))
    note_lift(tx, kind, args, ids)
    tx.audit("purge.lift", target, {"tombstones": ids})
    tx.emit("purge.lifted", {"target": target, "tombstones": ids})
    return {"lifted": ids, "target": target}


@handler("purge.refused")
def purge_refused(tx: Tx, env: Envelope, cmd: PurgeRefused) -> dict:
    """Count refusals another service made (ingress's 410s) on the session's live tombstone."""
    tid = session_tombstone(tx.conn, cmd.session_id)
    if tid is None:  # lifted in between: nothing to count on
        return {"counted": 0}
    count_refused(tx, tid, cmd.op, cmd.count)
    return {"counted": cmd.count, "tombstone_id": tid}
