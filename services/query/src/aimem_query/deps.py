"""Dependencies of every query route (``/api/v1`` and ``/admin``).

The context, the caller, reads off the loop, readable scopes, writer round trips.

Everything comes from ``app.state.ctx`` (``QueryContext``, built once in the lifespan,
``app.py``); nothing here is module-level state. Routes take the ``Annotated`` aliases
(``CtxDep``, ``PrincipalDep``, ``RootDep``) or call the helpers with their ``request``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request

from aimem_common import admission, auth
from aimem_common.auth import Principal, get_principal
from aimem_common.bus import Bus
from aimem_common.commands import make_envelope
from aimem_common.config import Settings
from aimem_common.errors import NotFoundError
from aimem_common.models import Scope, validate_name
from aimem_common.read import scopes, visibility
from aimem_common.service import context_of
from aimem_query.context import QueryContext

T = TypeVar("T")

LIFECYCLE_TIMEOUT_S = 300.0  # a purge with compact rewrites the whole DB


def ctx_of(request: Request) -> QueryContext:
    """Return the running service's context.

    Raises:
        UnavailableError: ``not_ready`` (503) before the lifespan finished starting.
    """
    return context_of(request)


def settings_of(request: Request) -> Settings:
    """Return the service settings."""
    return ctx_of(request).settings


def bus_of(request: Request) -> Bus:
    """Return the connected bus."""
    return ctx_of(request).bus


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


CtxDep = Annotated[QueryContext, Depends(ctx_of)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
RootDep = Annotated[str, Depends(require_root)]


async def read(request: Request, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run sync ``fn(conn, *args, **kwargs)`` on the service's ``ReaderPool`` (time budget, off the loop).

    Raises:
        UnavailableError: the service is not ready (``not_ready``) or the read ran past its
            budget (``query_timeout``).
    """
    return await ctx_of(request).read_pool.run(fn, *args, **kwargs)


async def readable_scope(request: Request, principal: Principal, workspace: str, project: str) -> Scope:
    """Validate names, then resolve them for ``principal`` (fail closed).

    A non-root caller gets the same 404 ``not_found`` for a project that does not exist and
    for one it may not read (``visibility.resolve_readable``), so it cannot probe which
    projects exist.

    Raises:
        BadRequestError: invalid names.
        NotFoundError: unknown or unreadable (non-root: ``not_found``; root:
            ``workspace_not_found`` / ``project_not_found``).
    """
    validate_name(workspace, "workspace")
    validate_name(project, "project")
    return await read(request, visibility.resolve_readable, principal, workspace, project)


async def send(
    request: Request,
    op: str,
    payload: dict[str, Any],
    *,
    workspace: str | None = None,
    project: str | None = None,
    timeout_s: float | None = LIFECYCLE_TIMEOUT_S,
    actor: str | None = None,
) -> dict[str, Any]:
    """Send op ``op`` to the writer and wait for its result (read-your-write).

    ``actor`` defaults to the ``/admin`` caller (``require_root``); the web passes its user.

    Raises:
        BadRequestError: invalid payload or names (before anything is published).
        AdmissionRefusedError: an ``[admission]`` webhook refused a destructive op (409).
        AimemError: whatever the writer answered (typed from its code).
        BusTimeoutError: no answer in ``timeout_s``.
    """
    actor = actor or getattr(request.state, "admin_actor", "root")
    ctx = ctx_of(request)
    # [admission] webhooks, ahead of the writer (never inside its transaction).
    await admission.admit(ctx.settings, op, payload, workspace=workspace, project=project, actor=actor,
                          telemetry=ctx.telemetry)
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
