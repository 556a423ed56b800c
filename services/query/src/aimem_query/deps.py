"""Dependencies of the ``/api/v1`` routes: reads off the loop, the caller, readable scopes.

Everything comes from ``app.state`` (built once in the lifespan, ``app.py``):
``settings``, ``read_pool`` (``ReaderPool``), ``bus`` (``Bus``), ``access``
(``AccessThrottle``). Nothing here is module-level state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request

from aimem_common.auth import Principal, get_principal
from aimem_common.config import Settings
from aimem_common.models import Scope, validate_name
from aimem_common.read import scopes

T = TypeVar("T")

PrincipalDep = Annotated[Principal, Depends(get_principal)]


def settings_of(request: Request) -> Settings:
    """Return the service settings (``app.state.settings``)."""
    return request.app.state.settings


async def read(request: Request, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run sync ``fn(conn, *args, **kwargs)`` on the reader pool (worker thread)."""
    return await request.app.state.read_pool.run(fn, *args, **kwargs)


async def readable_scope(request: Request, principal: Principal, workspace: str, project: str) -> Scope:
    """Validate names, check the read grant, then resolve (fail closed).

    The grant is checked on the *names* first so a caller without access cannot probe
    which projects exist (403 before 404).

    Raises:
        BadRequestError: invalid names. ForbiddenError: no read grant.
        NotFoundError: ``workspace_not_found`` / ``project_not_found``.
    """
    validate_name(workspace, "workspace")
    validate_name(project, "project")
    principal.require_read(workspace, project)
    return await read(request, scopes.resolve, workspace, project)
