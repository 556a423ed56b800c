"""Web-login handlers: ``user.passwd``, ``websession.create``, ``websession.delete``.

Only digests arrive here (``aimem_common.commands.web``). Each handler writes an audit row,
so the audit log shows who logged in, out, and changed a password.
"""

from __future__ import annotations

from aimem_common.commands import Envelope
from aimem_common.commands.web import UserPasswd, WebSessionCreate, WebSessionDelete
from aimem_common.errors import NotFoundError, UnauthorizedError

from aimem_writer.registry import handler
from aimem_writer.tx import Tx


def _user(tx: Tx, name: str) -> tuple[int, str | None]:
    row = tx.conn.execute("SELECT id, disabled_at FROM users WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise NotFoundError(f"user {name!r} not found", data={"user": name})
    return int(row["id"]), row["disabled_at"]


@handler("user.passwd")
def user_passwd(tx: Tx, env: Envelope, cmd: UserPasswd) -> dict:
    """Store the argon2id hash (or clear it) and end every web session of the user."""
    uid, _ = _user(tx, cmd.name)
    tx.conn.execute("UPDATE users SET password_hash = ?, password_changed_at = ? WHERE id = ?",
                    (cmd.password_hash, tx.now, uid))
    ended = tx.conn.execute("DELETE FROM web_sessions WHERE user_id = ?", (uid,)).rowcount
    tx.audit("user.passwd", cmd.name, {"user_id": uid, "cleared": cmd.password_hash is None, "sessions_ended": ended})
    return {"name": cmd.name, "sessions_ended": ended, "password_changed_at": tx.now}


@handler("websession.create")
def websession_create(tx: Tx, env: Envelope, cmd: WebSessionCreate) -> dict:
    """Insert the session row (its subject must still exist and be enabled)."""
    uid = None
    if cmd.user is not None:
        uid, disabled = _user(tx, cmd.user)
        if disabled is not None:
            raise UnauthorizedError(f"user {cmd.user!r} is disabled", code="unauthorized")
    tx.conn.execute("DELETE FROM web_sessions WHERE expires_at < ?", (tx.now,))
    tx.conn.execute(
        "INSERT INTO web_sessions(token_hash, user_id, api_key_id, root_fp, created_at, expires_at, client)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (cmd.token_hash, uid, cmd.api_key_id, cmd.root_fp, tx.now, cmd.expires_at, cmd.client),
    )
    method = "api_key" if cmd.api_key_id else ("password" if uid is not None else "root_token")
    tx.audit("web.login", cmd.user or "root", {"method": method, "expires_at": cmd.expires_at})
    return {"user_id": uid, "expires_at": cmd.expires_at}


@handler("websession.delete")
def websession_delete(tx: Tx, env: Envelope, cmd: WebSessionDelete) -> dict:
    """Delete the session row (logout)."""
    n = tx.conn.execute("DELETE FROM web_sessions WHERE token_hash = ?", (cmd.token_hash,)).rowcount
    if n:
        tx.audit("web.logout", tx.actor, None)
    return {"deleted": bool(n)}
