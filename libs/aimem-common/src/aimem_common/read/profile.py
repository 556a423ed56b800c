"""The one reader of profile memory: whose profile a caller holds, and its entries.

A profile is per person, across projects: the operator's (``user_id`` None: the root token,
or anyone on a server with auth off) or one user's (``users.id``; a root *user* has its own).
Only its owner reads it through the agent surfaces (the session-start context, the
``memory_profile`` tool); an admin reads any through ``/admin/profile``. A user key without
any grant holds no profile: it gets nothing and may store nothing. Sync functions of a read
connection (``ReaderPool.run``).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from aimem_common.errors import ForbiddenError

if TYPE_CHECKING:
    from aimem_common.auth import Principal

MAX_LIST = 100  # = commands.profile.MAX_ENTRIES_PER_OWNER: a listing shows a whole profile


def owner_of(principal: "Principal") -> int | None:
    """Return the profile owner of ``principal``: its user id, None for the operator."""
    return principal.user_id if principal.kind in ("user", "root") else None


def holds_profile(principal: "Principal", *, write: bool = False) -> bool:
    """Return True when ``principal`` has a profile to read (``write``: to change).

    The operator and root users always do; a user needs at least one grant (a write grant
    to change it), so a key granted nothing gets nothing.
    """
    if principal.is_root:
        return True
    return any(g.can_write or (g.can_read and not write) for g in principal.grants)


def user_holds_profile(conn: sqlite3.Connection, user_id: int) -> bool:
    """``holds_profile`` for a stored user, by id: a root user, or one with at least one grant
    (what the user's keys would be given; a user granted nothing never sees a profile)."""
    return conn.execute("SELECT 1 FROM users u WHERE u.id = ? AND (u.is_root = 1 OR EXISTS (SELECT 1 FROM grants g"
                        " WHERE g.user_id = u.id AND (g.can_read = 1 OR g.can_write = 1)))", (user_id,)).fetchone() \
        is not None


def require_profile(principal: "Principal", *, write: bool = False) -> int | None:
    """Return the owner of ``principal``'s profile (``owner_of``).

    Raises:
        ForbiddenError: ``forbidden`` — a user key without any grant (any write grant when
            ``write``).
    """
    if not holds_profile(principal, write=write):
        raise ForbiddenError(f"{principal.name} has no grant, so no profile memory", code="forbidden")
    return owner_of(principal)


def entries(conn: sqlite3.Connection, user_id: int | None, *, limit: int = MAX_LIST) -> list[dict[str, Any]]:
    """Return the profile entries of ``user_id`` (None: the operator), oldest first.

    Shape: ``[{"id", "body", "created_at", "created_by", "source_project", "source_workspace",
    "source_session_id"}]`` (source names None once that project is gone), at most ``limit``.
    """
    rows = conn.execute(
        "SELECT e.id, e.body, e.created_at, e.created_by, e.source_session_id, p.name AS project, w.name AS workspace"
        " FROM profile_entries e LEFT JOIN projects p ON p.id = e.source_project_id"
        " LEFT JOIN workspaces w ON w.id = p.workspace_id"
        " WHERE e.user_id IS ? ORDER BY e.id LIMIT ?", (user_id, limit)).fetchall()
    return [{"id": r["id"], "body": r["body"], "created_at": r["created_at"], "created_by": r["created_by"],
             "source_workspace": r["workspace"], "source_project": r["project"],
             "source_session_id": r["source_session_id"]} for r in rows]


def user_id_of(conn: sqlite3.Connection, name: str) -> int | None:
    """Return the id of the user named ``name`` (None when there is none)."""
    row = conn.execute("SELECT id FROM users WHERE name = ?", (name,)).fetchone()
    return int(row[0]) if row is not None else None


def user_names(conn: sqlite3.Connection) -> list[str]:
    """Return every user's name, sorted (the web's profile picker of a root login)."""
    return [r[0] for r in conn.execute("SELECT name FROM users ORDER BY name")]
