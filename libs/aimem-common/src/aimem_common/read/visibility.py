"""What one reader may see: the projects its grants let it read, and one answer for the rest.

The one place of the read layer that knows a reader's readable scopes. Every read that can
reach across projects (backlinks, the link graph, link and entity neighbours, message
counterparts, a session's rows stored elsewhere) takes a ``Readable`` and shows only what
it ``sees``; every read route resolves its project with ``resolve_readable``, so an unknown
project and one the reader may not read answer the same ``404 not_found`` (a non-root
reader cannot tell which projects exist).

Sync functions of a read connection (``ReaderPool.run``), like the rest of ``read/``.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aimem_common.errors import NotFoundError
from aimem_common.models import Scope
from aimem_common.read import scopes

if TYPE_CHECKING:
    from aimem_common.auth import Principal


@dataclass(frozen=True, slots=True)
class Readable:
    """The project ids one reader may read; ``project_ids=None`` = every project (root)."""

    project_ids: frozenset[str] | None

    @property
    def everything(self) -> bool:
        """True for an unrestricted reader (root, or anyone on a server with auth off)."""
        return self.project_ids is None

    def sees(self, project_id: str | None) -> bool:
        """Return True when the reader may see rows of ``project_id`` (``None``: no project, False)."""
        if project_id is None:
            return False
        return self.project_ids is None or project_id in self.project_ids

    def where(self, column: str) -> tuple[str, list[Any]]:
        """Return ``(" AND <column> IN (...)", args)`` (``("", [])`` for everything).

        A reader of no project gets a clause no row matches.
        """
        if self.project_ids is None:
            return "", []
        if not self.project_ids:
            return " AND 0", []
        ids = sorted(self.project_ids)
        return f" AND {column} IN ({','.join('?' * len(ids))})", ids


EVERYTHING = Readable(None)


def only(scope: Scope) -> Readable:
    """Return the ``Readable`` of one project (a reader of ``scope`` alone)."""
    return Readable(frozenset({scope.project_id}))


def readable_scopes(conn: sqlite3.Connection, principal: "Principal") -> list[Scope]:
    """Return every existing project ``principal`` may read, as ``Scope``s (by workspace, name)."""
    return [s for s in scopes.all_scopes(conn) if principal.can_read(s.workspace, s.project)]


def readable(conn: sqlite3.Connection, principal: "Principal | None") -> Readable:
    """Return what ``principal`` may read (``None`` or root: ``EVERYTHING``).

    Grants name workspaces and projects (or ``*``); this turns them into the ids of the
    projects that exist now.
    """
    if principal is None or principal.is_root:
        return EVERYTHING
    return Readable(frozenset(s.project_id for s in readable_scopes(conn, principal)))


def not_found(workspace: str, project: str) -> NotFoundError:
    """Return the one 404 of a project a reader cannot see (unknown or not readable)."""
    return NotFoundError(f"project {workspace}/{project} not found", code="not_found",
                         data={"workspace": workspace, "project": project})


def resolve_readable(conn: sqlite3.Connection, principal: "Principal", workspace: str, project: str) -> Scope:
    """Return the ``Scope`` of ``workspace``/``project`` (names) for a reader.

    Root (and anyone with auth off) gets ``scopes.resolve`` (``workspace_not_found`` /
    ``project_not_found``). A non-root reader gets the same ``not_found`` for a project
    that does not exist and for one its grants do not cover, so a 404 tells it nothing
    about which projects exist.

    Raises:
        NotFoundError: as above.
    """
    if principal.is_root:
        return scopes.resolve(conn, workspace, project)
    scope = scopes.find(conn, workspace, project) if principal.can_read(workspace, project) else None
    if scope is None:
        raise not_found(workspace, project)
    return scope
