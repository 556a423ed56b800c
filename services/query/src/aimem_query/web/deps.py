"""What every ``/web`` screen needs: the signed-in user, a readable scope, writer commands.

Reads go through ``aimem_query.deps.read`` (the service's reader pool).

Grants are the API's (``aimem_common.auth``): reading a project needs its read grant,
changing pages, feedback, restores and cancelling handoffs/messages needs its write grant
(as the MCP write tools), and the store-wide screens (pending writes, audit log, store
counts) need root (as ``/admin``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from aimem_common.errors import ForbiddenError
from aimem_common.models import Scope
from aimem_query import deps
from aimem_query.deps import readable_scope
from aimem_query.web.render import Renderer
from aimem_query.web.session import WebUser, current_user, read_form

UserDep = Annotated[WebUser, Depends(current_user)]

WRITE_TIMEOUT_S = 30.0


def renderer(request: Request) -> Renderer:
    """Return the app's ``Renderer`` (built once by ``aimem_query.web.install``)."""
    return request.app.state.web_renderer


async def scope_for(request: Request, user: WebUser, workspace: str, project: str, *, write: bool = False) -> Scope:
    """Check the write grant on the names (``write``: 403), then resolve the project for reading.

    A non-root user gets the same 404 ``not_found`` for a project that does not exist and
    for one it may not read (``deps.readable_scope``).

    Raises:
        ForbiddenError: with ``write``, no write grant (checked on the names, whether or not
            the project exists).
        NotFoundError: no such workspace or project, or one the user may not read.
    """
    if write:
        user.principal.require_write(workspace, project)
    return await readable_scope(request, user.principal, workspace, project)


def require_root(user: WebUser) -> None:
    """Raise ``ForbiddenError`` unless the user may use the admin screens."""
    if not user.principal.is_root:
        raise ForbiddenError("this screen needs a root login (as the admin API)", code="forbidden")


async def form(request: Request, user: WebUser) -> dict[str, str]:
    """Read a CSRF-checked form of this user (see ``session.read_form``)."""
    return await read_form(request, user.csrf)


async def send(request: Request, user: WebUser, op: str, payload: dict[str, Any], *,
               workspace: str | None = None, project: str | None = None) -> dict[str, Any]:
    """Send ``op`` to the writer as this user and wait for the committed result.

    Raises:
        AimemError: the writer's typed error (e.g. ``PreconditionFailedError``), or
            ``BusTimeoutError``/``UnavailableError`` from the bus.
    """
    return await deps.send(request, op, payload, workspace=workspace, project=project, timeout_s=WRITE_TIMEOUT_S,
                           actor=user.name)
