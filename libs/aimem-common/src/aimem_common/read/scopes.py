"""Resolve workspace/project *names* to their stable ids; reads fail closed.

A read never creates a scope (only writer ops may): a missing workspace or project is a
``NotFoundError`` (code ``workspace_not_found`` / ``project_not_found``), never an empty
result that could hide a typo. Sync functions taking a read connection; run them through
``ReaderPool.run``.
"""

from __future__ import annotations

import sqlite3

from aimem_common.errors import BadRequestError, NotFoundError
from aimem_common.models import Scope


def _row_scope(row: sqlite3.Row) -> Scope:
    return Scope(
        workspace=row["ws_name"], project=row["pj_name"], workspace_id=row["ws_id"], project_id=row["pj_id"]
    )


_SCOPE_SQL = """
SELECT w.id AS ws_id, w.name AS ws_name, p.id AS pj_id, p.name AS pj_name
FROM projects p JOIN workspaces w ON w.id = p.workspace_id
"""


def resolve(conn: sqlite3.Connection, workspace: str, project: str) -> Scope:
    """Return the ``Scope`` of ``workspace``/``project`` (names).

    Raises:
        NotFoundError: ``workspace_not_found`` or ``project_not_found``.
    """
    row = conn.execute(_SCOPE_SQL + " WHERE w.name = ? AND p.name = ?", (workspace, project)).fetchone()
    if row is not None:
        return _row_scope(row)
    if conn.execute("SELECT 1 FROM workspaces WHERE name = ?", (workspace,)).fetchone() is None:
        raise NotFoundError(f"workspace {workspace!r} not found", code="workspace_not_found",
                            data={"workspace": workspace})
    raise NotFoundError(f"project {workspace}/{project} not found", code="project_not_found",
                        data={"workspace": workspace, "project": project})


def resolve_ref(conn: sqlite3.Connection, ref: str, *, default_workspace: str) -> Scope:
    """Resolve ``"project"`` (in ``default_workspace``) or ``"workspace/project"``.

    Raises:
        BadRequestError: more than one ``/`` or an empty part (``invalid_scope``).
        NotFoundError: as ``resolve``.
    """
    parts = ref.split("/")
    if len(parts) == 1 and parts[0]:
        return resolve(conn, default_workspace, parts[0])
    if len(parts) == 2 and all(parts):
        return resolve(conn, parts[0], parts[1])
    raise BadRequestError(f"invalid scope {ref!r}: use 'project' or 'workspace/project'", code="invalid_scope")


def by_project_id(conn: sqlite3.Connection, project_id: str) -> Scope:
    """Return the ``Scope`` of a project id.

    Raises:
        NotFoundError: ``project_not_found``.
    """
    row = conn.execute(_SCOPE_SQL + " WHERE p.id = ?", (project_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"project id {project_id!r} not found", code="project_not_found")
    return _row_scope(row)


def all_scopes(conn: sqlite3.Connection) -> list[Scope]:
    """Return every project as a ``Scope``, ordered by workspace then project name."""
    return [_row_scope(r) for r in conn.execute(_SCOPE_SQL + " ORDER BY w.name, p.name")]


def list_workspaces(conn: sqlite3.Connection) -> list[dict]:
    """Return ``[{"workspace", "workspace_id", "projects": [{"project", "project_id"}]}]``.

    Ordered by name; a workspace without projects is listed with ``projects: []``.
    """
    out: dict[str, dict] = {}
    for w in conn.execute("SELECT id, name FROM workspaces ORDER BY name"):
        out[w["id"]] = {"workspace": w["name"], "workspace_id": w["id"], "projects": []}
    for p in conn.execute("SELECT id, workspace_id, name FROM projects ORDER BY name"):
        if p["workspace_id"] in out:
            out[p["workspace_id"]]["projects"].append({"project": p["name"], "project_id": p["id"]})
    return list(out.values())
