"""What every ``/admin`` route needs: settings, reads, the bus, and the root check.

Everything comes from the app (``app.state``), built once in the query lifespan; nothing
here is module-level state. ``require_root`` is the auth gate of the whole router (the
shared rule of ``aimem_common.auth``: root only once users exist).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import Request

from aimem_common.bus import Bus
from aimem_common.config import Settings
from aimem_common import auth
from aimem_common.errors import NotFoundError, UnavailableError
from aimem_common.commands import make_envelope
from aimem_common.read import scopes

T = TypeVar("T")

LIFECYCLE_TIMEOUT_S = 300.0  # a purge with compact rewrites the whole DB


def _state(request: Request, name: str) -> Any:
    """Return ``name`` from ``app.state`` or from the lifespan's ``ctx`` (dict or object)."""
    value = getattr(request.app.state, name, None)
    if value is not None:
        return value
    ctx = getattr(request.app.state, "ctx", None)
    if isinstance(ctx, dict):
        value = ctx.get(name)
    elif ctx is not None:
        value = getattr(ctx, name, None)
    if value is None:
        raise UnavailableError(f"query service not ready ({name} missing)", code="not_ready")
    return value


def settings_of(request: Request) -> Settings:
    return _state(request, "settings")


def bus_of(request: Request) -> Bus:
    return _state(request, "bus")


async def read(request: Request, fn: Callable[..., T], *args: Any) -> T:
    """Run sync ``fn(conn, *args)`` on the service's ``ReaderPool`` (time budget, off the loop).

    Raises:
        UnavailableError: the pool is not built yet (``not_ready``) or the read ran past
            its budget (``query_timeout``).
    """
    return await _state(request, "read_pool").run(fn, *args)


async def require_root(request: Request) -> str:
    """FastAPI dependency of every ``/admin`` route: return the caller's actor name.

    Delegates to ``aimem_common.auth.require_root`` (root only once users exist).

    Raises:
        UnauthorizedError: no or unknown credential (401).
        ForbiddenError: a valid credential that is not root (403).
    """
    principal = await auth.require_root(request)
    request.state.admin_actor = principal.actor
    return principal.actor


async def send(
    request: Request,
    op: str,
    payload: dict[str, Any],
    *,
    workspace: str | None = None,
    project: str | None = None,
    timeout_s: float | None = LIFECYCLE_TIMEOUT_S,
) -> dict[str, Any]:
    """Send admin op ``op`` to the writer and wait for its result (read-your-write).

    Raises:
        BadRequestError: invalid payload or names (before anything is published).
        AimemError: whatever the writer answered (typed from its code).
        BusTimeoutError: no answer in ``timeout_s``.
    """
    actor = getattr(request.state, "admin_actor", "root")
    env = make_envelope(op, payload, workspace=workspace, project=project, actor=actor)
    return await bus_of(request).request(env, timeout_s=timeout_s)


def resolve_scope(conn: sqlite3.Connection, workspace: str, project: str) -> tuple[str, str]:
    """Return ``(workspace_id, project_id)`` of existing names (never creates).

    Raises:
        NotFoundError: the workspace or project does not exist (code ``not_found``).
    """
    scope = scopes.find(conn, workspace, project)
    if scope is None:
        raise NotFoundError(f"project {workspace}/{project} not found", code="not_found")
    return scope.workspace_id, scope.project_id
