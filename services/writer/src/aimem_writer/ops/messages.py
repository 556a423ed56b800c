"""Agent messages across projects: ``message.send``, ``message.pop`` (claim once), ``message.cancel``.

The one table that crosses project isolation; every read is keyed by the recipient
coordinate (inbox) or the sender's (outbox). The recipient's pending inbox is capped at
``INBOX_DEPTH_CAP``: a send beyond it is refused with ``inbox_full`` (409).
"""

from __future__ import annotations

from aimem_common.errors import ConflictError, NotFoundError
from aimem_common.commands import Envelope
from aimem_common.commands.messages import INBOX_DEPTH_CAP, MessageCancel, MessagePop, MessageSend

from aimem_writer.registry import handler
from aimem_writer.tx import Tx

FIELDS = ("id", "from_actor", "subject", "body", "status", "created_at", "closed_at", "claimed_by")


def public(tx: Tx, row) -> dict:
    d = {k: row[k] for k in FIELDS}
    for side in ("from", "to"):
        s = tx.scope_by_ids(row[f"{side}_workspace_id"], row[f"{side}_project_id"])
        d[f"{side}_workspace"], d[f"{side}_project"] = s.workspace, s.project
    return d


@handler("message.send")
def message_send(tx: Tx, env: Envelope, cmd: MessageSend) -> dict:
    """Queue a message for another project (which must exist). Result ``{message: {...}}``.

    Raises:
        NotFoundError: sender or recipient project unknown.
        ConflictError: ``inbox_full`` — the recipient has ``INBOX_DEPTH_CAP`` pending messages.
    """
    sender = tx.scope()
    to = tx.resolve_scope(cmd.to_workspace, cmd.to_project, create=False)
    depth = tx.conn.execute("SELECT count(*) FROM agent_messages WHERE to_project_id = ? AND status = 'pending'",
                            (to.project_id,)).fetchone()[0]
    if depth >= INBOX_DEPTH_CAP:
        raise ConflictError(f"inbox of {to.workspace}/{to.project} is full ({INBOX_DEPTH_CAP} pending)",
                            code="inbox_full", data={"pending": depth, "cap": INBOX_DEPTH_CAP})
    mid = tx.conn.execute(
        "INSERT INTO agent_messages(from_workspace_id, from_project_id, to_workspace_id, to_project_id, from_actor,"
        " subject, body, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?)",
        (sender.workspace_id, sender.project_id, to.workspace_id, to.project_id, tx.actor, cmd.subject, cmd.body,
         tx.now),
    ).lastrowid
    row = tx.conn.execute("SELECT * FROM agent_messages WHERE id = ?", (mid,)).fetchone()
    tx.audit("message.send", str(mid), {"to": f"{to.workspace}/{to.project}"}, scope=sender)
    tx.emit("message.sent", {"message_id": mid, "to_workspace": to.workspace, "to_project": to.project})
    return {"message": public(tx, row)}


@handler("message.pop")
def message_pop(tx: Tx, env: Envelope, cmd: MessagePop) -> dict:
    """Claim the oldest pending inbox message (or ``message_id``). Result ``{message: {...}|null}``.

    Raises:
        NotFoundError: ``message_id`` is not in this project's inbox.
        ConflictError: ``message_not_pending`` — it was already claimed or cancelled.
    """
    scope = tx.scope()
    if cmd.message_id is not None:
        row = tx.conn.execute("SELECT * FROM agent_messages WHERE id = ? AND to_project_id = ?",
                              (cmd.message_id, scope.project_id)).fetchone()
        if row is None:
            raise NotFoundError(f"message {cmd.message_id} not found in this inbox", data={"message_id": cmd.message_id})
        if row["status"] != "pending":
            raise ConflictError(f"message {cmd.message_id} is {row['status']}", code="message_not_pending",
                                data={"message_id": cmd.message_id, "status": row["status"]})
    else:
        row = tx.conn.execute("SELECT * FROM agent_messages WHERE to_project_id = ? AND status = 'pending'"
                              " ORDER BY id LIMIT 1", (scope.project_id,)).fetchone()
        if row is None:
            return {"message": None}
    tx.conn.execute("UPDATE agent_messages SET status = 'claimed', closed_at = ?, claimed_by = ? WHERE id = ?"
                    " AND status = 'pending'", (tx.now, tx.actor, row["id"]))
    row = tx.conn.execute("SELECT * FROM agent_messages WHERE id = ?", (row["id"],)).fetchone()
    tx.audit("message.pop", str(row["id"]), None, scope=scope)
    return {"message": public(tx, row)}


@handler("message.cancel")
def message_cancel(tx: Tx, env: Envelope, cmd: MessageCancel) -> dict:
    """Cancel pending outbox messages (one, or all). Result ``{cancelled: [ids]}``.

    Raises:
        NotFoundError: ``message_id`` is not in this project's outbox.
    """
    scope = tx.scope()
    if cmd.message_id is not None:
        row = tx.conn.execute("SELECT id, status FROM agent_messages WHERE id = ? AND from_project_id = ?",
                              (cmd.message_id, scope.project_id)).fetchone()
        if row is None:
            raise NotFoundError(f"message {cmd.message_id} not found in this outbox",
                                data={"message_id": cmd.message_id})
        ids = [row["id"]] if row["status"] == "pending" else []
    else:
        ids = [r[0] for r in tx.conn.execute(
            "SELECT id FROM agent_messages WHERE from_project_id = ? AND status = 'pending'", (scope.project_id,))]
    for mid in ids:
        tx.conn.execute("UPDATE agent_messages SET status = 'cancelled', closed_at = ? WHERE id = ?", (tx.now, mid))
    if ids:
        tx.audit("message.cancel", ",".join(map(str, ids)), None, scope=scope)
    return {"cancelled": ids}
