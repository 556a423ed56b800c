"""User, API-key and grant op handlers.

``user.create``, ``user.delete``, ``apikey.create``, ``apikey.revoke``, ``grant.set``. Each
writes one audit row.
"""

from __future__ import annotations

import sqlite3

from aimem_common.commands import Envelope
from aimem_common.commands.admin import ApiKeyCreate, ApiKeyRevoke, GrantSet, UserCreate, UserDelete
from aimem_common.errors import ConflictError, NotFoundError

from aimem_writer.forget import forget_profile_replies
from aimem_writer.registry import handler
from aimem_writer.tx import Tx


def _user_id(tx: Tx, name: str) -> int:
    row = tx.conn.execute("SELECT id FROM users WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise NotFoundError(f"user {name!r} not found", data={"user": name})
    return int(row["id"])


@handler("user.create")
def user_create(tx: Tx, env: Envelope, cmd: UserCreate) -> dict:
    if tx.conn.execute("SELECT 1 FROM users WHERE name = ?", (cmd.name,)).fetchone():
        raise ConflictError(f"user {cmd.name!r} exists", data={"user": cmd.name})
    uid = tx.conn.execute(
        "INSERT INTO users(name, is_root, created_at) VALUES (?, ?, ?)", (cmd.name, int(cmd.is_root), tx.now)
    ).lastrowid
    tx.audit("user.create", cmd.name, {"user_id": uid, "is_root": cmd.is_root})
    return {"id": uid, "name": cmd.name, "is_root": cmd.is_root, "created_at": tx.now}


@handler("user.delete")
def user_delete(tx: Tx, env: Envelope, cmd: UserDelete) -> dict:
    uid = _user_id(tx, cmd.name)
    keys = tx.conn.execute("SELECT count(*) FROM api_keys WHERE user_id = ?", (uid,)).fetchone()[0]
    entries = [r[0] for r in tx.conn.execute("SELECT id FROM profile_entries WHERE user_id = ?", (uid,))]
    forget_profile_replies(tx.conn, entries, hint=f"user {cmd.name} deleted")  # the entries cascade below
    tx.conn.execute("DELETE FROM users WHERE id = ?", (uid,))
    tx.audit("user.delete", cmd.name, {"user_id": uid, "api_keys_deleted": keys})
    return {"deleted": True, "name": cmd.name, "api_keys_deleted": keys}


@handler("apikey.create")
def apikey_create(tx: Tx, env: Envelope, cmd: ApiKeyCreate) -> dict:
    uid = _user_id(tx, cmd.user)
    try:
        kid = tx.conn.execute(
            "INSERT INTO api_keys(user_id, name, prefix, key_hash, created_at) VALUES (?, ?, ?, ?, ?)",
            (uid, cmd.name, cmd.prefix, cmd.key_hash, tx.now),
        ).lastrowid
    except sqlite3.IntegrityError as exc:
        raise ConflictError("an identical key already exists") from exc
    tx.audit("apikey.create", cmd.prefix, {"key_id": kid, "user": cmd.user, "name": cmd.name})
    return {"id": kid, "user": cmd.user, "name": cmd.name, "prefix": cmd.prefix, "created_at": tx.now}


@handler("apikey.revoke")
def apikey_revoke(tx: Tx, env: Envelope, cmd: ApiKeyRevoke) -> dict:
    row = tx.conn.execute("SELECT id, prefix, revoked_at FROM api_keys WHERE id = ?", (cmd.key_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"API key {cmd.key_id} not found", data={"key_id": cmd.key_id})
    if row["revoked_at"] is not None:
        return {"id": cmd.key_id, "revoked": False, "revoked_at": row["revoked_at"]}
    tx.conn.execute("UPDATE api_keys SET revoked_at = ? WHERE id = ?", (tx.now, cmd.key_id))
    tx.audit("apikey.revoke", row["prefix"], {"key_id": cmd.key_id})
    return {"id": cmd.key_id, "revoked": True, "revoked_at": tx.now}


@handler("grant.set")
def grant_set(tx: Tx, env: Envelope, cmd: GrantSet) -> dict:
    uid = _user_id(tx, cmd.user)
    key = (uid, cmd.workspace, cmd.project)
    if cmd.remove:
        n = tx.conn.execute(
            "DELETE FROM grants WHERE user_id = ? AND workspace = ? AND project = ?", key).rowcount
        tx.audit("grant.remove", f"{cmd.user}@{cmd.workspace}/{cmd.project}", {"removed": bool(n)})
        return {"user": cmd.user, "workspace": cmd.workspace, "project": cmd.project, "removed": bool(n)}
    tx.conn.execute(
        "INSERT INTO grants(user_id, workspace, project, can_read, can_write) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT(user_id, workspace, project) DO UPDATE SET can_read = excluded.can_read,"
        " can_write = excluded.can_write",
        (*key, int(cmd.can_read), int(cmd.can_write)),
    )
    detail = {"can_read": cmd.can_read, "can_write": cmd.can_write}
    tx.audit("grant.set", f"{cmd.user}@{cmd.workspace}/{cmd.project}", detail)
    return {"user": cmd.user, "workspace": cmd.workspace, "project": cmd.project, **detail}
