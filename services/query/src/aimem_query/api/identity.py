"""``/api/v1/projects/resolve``: which project a checkout's identity belongs to."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from aimem_common import locations
from aimem_common.models import validate_name
from aimem_common.read import scopes
from aimem_common.read.visibility import not_found
from aimem_query.deps import PrincipalDep, read

router = APIRouter(tags=["status"])


@router.get("/projects/resolve", summary="The project of a checkout's identity")
async def resolve_project(request: Request, principal: PrincipalDep, project: str, workspace: str = "default",
                          root: str | None = None, origin: str | None = None, repo_id: str | None = None,
                          named: str | None = None) -> dict[str, Any]:
    """Return the project the hooks' events from a checkout with this identity land in.

    Query: the fields the hook client sends with every event (``Identity.as_query``):
    ``project`` (the local name: the marker's, else the repository's folder), ``workspace``
    (default ``default``), ``root`` (the repository's top level), ``origin`` (normalised
    ``origin`` URL), ``repo_id`` (32 hex) and ``named=1`` (a marker named the project: it is
    found by name). Two repositories sharing a folder name are two projects (``api``,
    ``api-2``), so the CLI asks here instead of using the folder's name. Reads only.

    Returns ``{"workspace", "project", "project_id", "exists"}``: the project holding these
    keys (``exists`` true), else — an identity never seen — the name its first event would
    create (``project_id`` null; ``api-2`` when ``api`` is another repository's).

    Raises:
        BadRequestError: 400 ``invalid_name`` (workspace/project), ``invalid_field``
            (``root``/``origin`` not printable or too long, ``repo_id`` not 32 hex).
        NotFoundError: 404 ``not_found`` for a non-root caller whose grants do not cover
            the answer (the same answer as for a project that does not exist).
    """
    validate_name(workspace, "workspace")
    validate_name(project, "project")
    root = locations.normalize(scopes.key_field(root, "root", scopes.MAX_ROOT_CHARS))
    origin = scopes.key_field(origin, "origin", scopes.MAX_ORIGIN_CHARS)
    repo_id = scopes.repo_id_field(repo_id)
    scope, name = await read(request, scopes.assigned, workspace, project, root=root, origin=origin,
                             explicit=named == "1", repo_id=repo_id)
    if not principal.is_root and not principal.can_read(workspace, name):
        raise not_found(workspace, name)
    return {"workspace": workspace, "project": name, "project_id": scope.project_id if scope else None,
            "exists": scope is not None}
