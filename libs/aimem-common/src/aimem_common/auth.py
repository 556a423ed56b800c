"""Authentication and authorization shared by ``/api``, ``/admin``, ``/mcp`` and the hook routes.

Credentials (``Authorization: Bearer <token>``):

* the **root token** ``settings.auth.token`` (constant-time compare);
* **user API keys** ``aim_<random>``: stored as sha256 hex in ``api_keys``; the user's
  ``grants`` rows give per-project read/write (``workspace``/``project`` names or ``*``;
  write implies read); a user with ``is_root`` is root.

With **no root token configured** auth is off (the server binds loopback only,
``service.check_bind``): a caller without a credential is the unrestricted ``anonymous``
principal; a valid user key is still honoured so attribution works.

``/admin`` is root-only once any user exists; until then any caller the server lets in.

Use ``authenticate(conn, header, root_token=...)`` anywhere (the MCP gateway calls it per
tool call); FastAPI routes use the ``PrincipalDep`` / ``require_root`` dependencies, which
read ``read_pool`` (``ReaderPool``) and ``settings`` of the service context on ``app.state.ctx``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import Depends, Request

from aimem_common.errors import ForbiddenError, UnauthorizedError, UnavailableError

if TYPE_CHECKING:
    from aimem_common.readpool import ReaderPool

KEY_PREFIX = "aim_"
KEY_PREFIX_CHARS = 12  # stored in api_keys.prefix for listings ("aim_AbCdEfGh")


@dataclass(frozen=True, slots=True)
class Grant:
    """One ``grants`` row: names or ``*``; ``can_write`` implies read."""

    workspace: str
    project: str
    can_read: bool
    can_write: bool

    def covers(self, workspace: str, project: str) -> bool:
        """Return True when this grant names ``workspace``/``project`` (``*`` matches any)."""
        return self.workspace in ("*", workspace) and self.project in ("*", project)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling. ``name`` is the actor recorded on commands and audit rows.

    ``kind``: ``anonymous`` (auth off), ``root`` (root token or root user), ``user``.
    """

    kind: Literal["anonymous", "root", "user"]
    name: str
    user_id: int | None = None
    grants: tuple[Grant, ...] = ()

    @property
    def actor(self) -> str:
        """Alias of ``name`` (the value for ``Envelope.actor``)."""
        return self.name

    @property
    def is_root(self) -> bool:
        """True for root and for ``anonymous`` on a server with auth off (unrestricted)."""
        return self.kind in ("root", "anonymous")

    @property
    def is_real_root(self) -> bool:
        """True only for an actual root credential (root token or a root user's key)."""
        return self.kind == "root"

    def can_read(self, workspace: str, project: str) -> bool:
        """Return True when the principal may read ``workspace``/``project`` (names)."""
        return self.is_root or any(g.covers(workspace, project) and (g.can_read or g.can_write) for g in self.grants)

    def can_write(self, workspace: str, project: str) -> bool:
        """Return True when the principal may write ``workspace``/``project`` (names)."""
        return self.is_root or any(g.covers(workspace, project) and g.can_write for g in self.grants)

    def require_read(self, workspace: str, project: str) -> None:
        """Raise ``ForbiddenError`` unless ``can_read``."""
        if not self.can_read(workspace, project):
            raise ForbiddenError(f"{self.name} may not read {workspace}/{project}",
                                 data={"workspace": workspace, "project": project})

    def require_write(self, workspace: str, project: str) -> None:
        """Raise ``ForbiddenError`` unless ``can_write``."""
        if not self.can_write(workspace, project):
            raise ForbiddenError(f"{self.name} may not write {workspace}/{project}",
                                 data={"workspace": workspace, "project": project})


ANONYMOUS = Principal(kind="anonymous", name="anonymous")
ROOT = Principal(kind="root", name="root")


def hash_key(key: str) -> str:
    """Return the sha256 hex digest stored in ``api_keys.key_hash``."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_api_key() -> tuple[str, str, str]:
    """Generate a user API key; return ``(key, prefix, key_hash)``. Show ``key`` once only."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, key[:KEY_PREFIX_CHARS], hash_key(key)


def bearer(header: str | None) -> str | None:
    """Return the token of an ``Authorization: Bearer <token>`` header value, else None."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def users_exist(conn: sqlite3.Connection) -> bool:
    """Return True once any (enabled or disabled) user row exists."""
    return conn.execute("SELECT 1 FROM users LIMIT 1").fetchone() is not None


def principal_of_user(conn: sqlite3.Connection, user_id: int, name: str, is_root: bool) -> Principal:
    """Return the ``Principal`` of a user row: root, or a user with its ``grants`` rows."""
    if is_root:
        return Principal(kind="root", name=f"user:{name}", user_id=user_id)
    grants = tuple(
        Grant(g[0], g[1], bool(g[2]), bool(g[3]))
        for g in conn.execute(
            "SELECT workspace, project, can_read, can_write FROM grants WHERE user_id = ?", (user_id,)
        )
    )
    return Principal(kind="user", name=f"user:{name}", user_id=user_id, grants=grants)


def lookup_key_row(conn: sqlite3.Connection, key: str) -> sqlite3.Row | None:
    """Return ``(key_id, user_id, name, is_root)`` of a live API key (unknown, revoked or
    disabled: None)."""
    return conn.execute(
        "SELECT k.id AS key_id, u.id AS user_id, u.name, u.is_root FROM api_keys k JOIN users u ON u.id = k.user_id"
        " WHERE k.key_hash = ? AND k.revoked_at IS NULL AND u.disabled_at IS NULL",
        (hash_key(key),),
    ).fetchone()


def lookup_key(conn: sqlite3.Connection, key: str) -> Principal | None:
    """Return the principal of a live user API key, or None (unknown, revoked, disabled)."""
    row = lookup_key_row(conn, key)
    if row is None:
        return None
    return principal_of_user(conn, row[1], row[2], bool(row[3]))


def user_for_login(conn: sqlite3.Connection, name: str) -> sqlite3.Row | None:
    """Return ``(id, name, is_root, password_hash)`` of an enabled user (None otherwise)."""
    return conn.execute(
        "SELECT id, name, is_root, password_hash FROM users WHERE name = ? AND disabled_at IS NULL", (name,)
    ).fetchone()


def web_session(conn: sqlite3.Connection, token_hash: str, *, root_token: str | None, now: str) -> Principal | None:
    """Return the principal of a live web session, or None (unknown, expired, ended).

    A session ends with its user (row deleted or disabled), its API key (revoked), its
    expiry (``now``, RFC 3339 UTC, at or past ``expires_at``), or, for a root-token login,
    when the configured root token no longer has the fingerprint it was opened with.
    """
    row = conn.execute(
        "SELECT s.user_id, s.api_key_id, s.root_fp, s.expires_at, u.name, u.is_root, u.disabled_at,"
        " k.revoked_at FROM web_sessions s LEFT JOIN users u ON u.id = s.user_id"
        " LEFT JOIN api_keys k ON k.id = s.api_key_id WHERE s.token_hash = ?",
        (token_hash,),
    ).fetchone()
    if row is None or not _before(now, row["expires_at"]):
        return None
    if row["user_id"] is None:
        if root_token is None or not hmac.compare_digest(row["root_fp"] or "", hash_key(root_token)):
            return None
        return ROOT
    if row["name"] is None or row["disabled_at"] is not None:
        return None
    if row["api_key_id"] is not None and row["revoked_at"] is not None:
        return None
    return principal_of_user(conn, row["user_id"], row["name"], bool(row["is_root"]))


def _before(a: str, b: str) -> bool:
    """Return True when RFC 3339 time ``a`` is strictly before ``b``."""
    def parse(t: str) -> datetime:
        return datetime.fromisoformat(t.replace("Z", "+00:00"))

    return parse(a) < parse(b)


def authenticate(conn: sqlite3.Connection | None, header: str | None, *, root_token: str | None) -> Principal:
    """Return the ``Principal`` of an ``Authorization`` header value (sync, read-only).

    Args:
        conn: a read connection (``ReaderPool``); used for user keys only (None is fine for a
            header without one: ``authenticate_from_loop``).
        header: the raw ``Authorization`` header value, or None.
        root_token: ``settings.auth.token``; None = auth off.

    Raises:
        UnauthorizedError: auth is on and the credential is missing, unknown or revoked.
    """
    token = bearer(header)
    if root_token is None:
        if token and token.startswith(KEY_PREFIX):
            return lookup_key(conn, token) or ANONYMOUS
        return ANONYMOUS
    if token is None:
        raise UnauthorizedError("missing bearer token", code="unauthorized")
    if hmac.compare_digest(token.encode("utf-8"), root_token.encode("utf-8")):
        return ROOT
    if token.startswith(KEY_PREFIX):
        principal = lookup_key(conn, token)
        if principal is not None:
            return principal
    raise UnauthorizedError("unknown or revoked bearer token", code="unauthorized")


async def authenticate_from_loop(pool: "ReaderPool", header: str | None, *, root_token: str | None) -> Principal:
    """``authenticate`` for a caller on the event loop: the store is read (on a ``pool`` reader
    thread) only for a user API key (``aim_…``); the root token, a missing or unknown credential
    and auth off are decided in place, without the trip to a reader thread.

    Raises:
        UnauthorizedError: as ``authenticate``.
    """
    token = bearer(header)
    if token is None or not token.startswith(KEY_PREFIX):
        return authenticate(None, header, root_token=root_token)  # never reads the store for these
    return await pool.run(authenticate, header, root_token=root_token)


def check_admin(principal: Principal, has_users: bool) -> None:
    """Allow ``/admin``: root only once users exist, else anyone authenticated.

    Raises:
        UnauthorizedError: anonymous caller once users exist (auth off but users created).
        ForbiddenError: an authenticated non-root caller once users exist.
    """
    if not has_users or principal.is_real_root:
        return
    if principal.kind == "anonymous":
        raise UnauthorizedError("the admin API needs a root credential once users exist", code="unauthorized")
    raise ForbiddenError("the admin API needs a root credential", code="forbidden")


# -- FastAPI ------------------------------------------------------------------------------
def _app_state(request: Request, name: str) -> Any:
    """``name`` of the service context (``app.state.ctx``); 503 ``not_ready`` before it exists."""
    value = getattr(getattr(request.app.state, "ctx", None), name, None)
    if value is None:
        raise UnavailableError(f"service not ready ({name} missing)", code="not_ready")
    return value


async def get_principal(request: Request) -> Principal:
    """FastAPI dependency: authenticate the request (401 on a bad credential).

    Needs ``read_pool`` (``ReaderPool``) and ``settings`` on ``app.state.ctx``. The
    principal is also stored on ``request.state.principal``.
    """
    cached = getattr(request.state, "principal", None)
    if cached is not None:
        return cached
    settings = _app_state(request, "settings")
    pool = _app_state(request, "read_pool")
    principal = await authenticate_from_loop(pool, request.headers.get("authorization"), root_token=settings.auth.token)
    request.state.principal = principal
    return principal


async def require_root(request: Request) -> Principal:
    """FastAPI dependency of ``/admin`` routes: the principal, if ``check_admin`` allows it."""
    principal = await get_principal(request)
    has_users = await _app_state(request, "read_pool").run(users_exist)
    check_admin(principal, has_users)
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]
RootDep = Annotated[Principal, Depends(require_root)]
