"""The one scope resolver: workspace/project names ↔ their stable ids.

Every lookup of the ``workspaces``/``projects`` tables is written here, once, as sync
functions taking *any* ``sqlite3.Connection``: the read side calls them through
``ReaderPool.run``; the writer calls them on its write connection inside its transaction
(creating a missing workspace or project stays in the writer, only the lookup is shared).
``tests/test_architecture.py`` fails on a copy of this SQL anywhere else.

Two families:

* ``find*`` / ``workspace_id`` return ``None`` for a missing scope (the caller decides the
  error: the writer's ops have their own codes);
* ``resolve*`` / ``by_project_id`` fail closed with ``NotFoundError`` (code
  ``workspace_not_found`` / ``project_not_found``) — a read never creates a scope and never
  turns a typo into an empty result.
"""

from __future__ import annotations

import re
import sqlite3

from aimem_common import locations
from aimem_common.errors import BadRequestError, NotFoundError
from aimem_common.models import Scope

MAX_ROOT_CHARS, MAX_ORIGIN_CHARS = 4096, 1024  # bounds of the identity keys a client sends
REPO_ID = re.compile(r"^[0-9a-f]{32}$")  # a repository's stable id: 32 lower-case hex digits


def _row_scope(row: sqlite3.Row | tuple) -> Scope:
    return Scope(workspace=row[1], project=row[3], workspace_id=row[0], project_id=row[2])


_SCOPE_SQL = """
SELECT w.id AS ws_id, w.name AS ws_name, p.id AS pj_id, p.name AS pj_name
FROM projects p JOIN workspaces w ON w.id = p.workspace_id
"""


def find(conn: sqlite3.Connection, workspace: str, project: str) -> Scope | None:
    """Return the ``Scope`` named ``workspace``/``project``, or ``None`` when either is missing."""
    row = conn.execute(_SCOPE_SQL + " WHERE w.name = ? AND p.name = ?", (workspace, project)).fetchone()
    return _row_scope(row) if row is not None else None


def find_by_id(conn: sqlite3.Connection, project_id: str, workspace_id: str | None = None) -> Scope | None:
    """Return the ``Scope`` of project id ``project_id`` (in ``workspace_id`` when given), or ``None``."""
    if workspace_id is None:
        row = conn.execute(_SCOPE_SQL + " WHERE p.id = ?", (project_id,)).fetchone()
    else:
        row = conn.execute(_SCOPE_SQL + " WHERE p.id = ? AND w.id = ?", (project_id, workspace_id)).fetchone()
    return _row_scope(row) if row is not None else None


def workspace_id(conn: sqlite3.Connection, workspace: str) -> str | None:
    """Return the id of the workspace named ``workspace``, or ``None``."""
    row = conn.execute("SELECT id FROM workspaces WHERE name = ?", (workspace,)).fetchone()
    return row[0] if row is not None else None


def find_by_key(conn: sqlite3.Connection, workspace: str, *, origin: str | None, root: str | None,
                repo_id: str | None = None) -> Scope | None:
    """Return the project of ``workspace`` with these identity keys, or ``None``.

    The normalised ``origin`` URL decides first (every clone and worktree of one repository
    shares it); then the repository's stable ``repo_id`` (a moved or renamed checkout
    without an origin keeps it); then the repository ``root`` — the project's first root or
    one of its aliases (``project_roots``) —, for a project whose origin and id are unknown
    on either side or equal. Two different origins (or two different ids) at one root are
    two projects. ``root`` is compared in its normalised form (``aimem_common.locations``).
    """
    root = locations.normalize(root)
    if origin:
        row = conn.execute(_SCOPE_SQL + " WHERE w.name = ? AND p.origin = ? ORDER BY p.created_at, p.id LIMIT 1",
                           (workspace, origin)).fetchone()
        if row is not None:
            return _row_scope(row)
    if repo_id:
        row = conn.execute(
            _SCOPE_SQL + " WHERE w.name = ? AND p.repo_id = ? AND (p.origin IS NULL OR ? IS NULL)"
            " ORDER BY p.created_at, p.id LIMIT 1", (workspace, repo_id, origin)).fetchone()
        if row is not None:
            return _row_scope(row)
    if root:
        row = conn.execute(
            _SCOPE_SQL + " WHERE w.name = ? AND (p.root = ? OR EXISTS (SELECT 1 FROM project_roots r"
            " WHERE r.project_id = p.id AND r.root = ?)) AND (p.origin IS NULL OR ? IS NULL)"
            " AND (p.repo_id IS NULL OR ? IS NULL OR p.repo_id = ?)"
            " ORDER BY p.created_at, p.id LIMIT 1", (workspace, root, root, origin, repo_id, repo_id)).fetchone()
        if row is not None:
            return _row_scope(row)
    return None


def find_unkeyed(conn: sqlite3.Connection, workspace: str, project: str) -> Scope | None:
    """Return the project named ``workspace``/``project`` when it has no identity keys yet
    (made before the keys existed, or by a client posting without the hook client)."""
    row = conn.execute(_SCOPE_SQL + " WHERE w.name = ? AND p.name = ? AND p.root IS NULL AND p.origin IS NULL"
                       " AND p.repo_id IS NULL", (workspace, project)).fetchone()
    return _row_scope(row) if row is not None else None


def lookup(conn: sqlite3.Connection, workspace: str, project: str, *, root: str | None = None,
           origin: str | None = None, explicit: bool = False, repo_id: str | None = None) -> Scope | None:
    """Return the project a hook event belongs to, or ``None`` when it does not exist yet.

    With identity keys (and no ``explicit`` name): the project holding them
    (``find_by_key``), else a keyless project named ``project`` (which the writer then
    keys). Otherwise by name. The writer creates what this does not find.
    """
    if not explicit and (root or origin or repo_id):
        return (find_by_key(conn, workspace, origin=origin, root=root, repo_id=repo_id)
                or find_unkeyed(conn, workspace, project))
    return find(conn, workspace, project)


def key_field(value: str | None, name: str, max_chars: int) -> str | None:
    """Check one identity key a client sent (``root``/``origin``) and return it as stored.

    Empty → ``None``; longer than ``max_chars`` or not printable → 400 ``invalid_field``;
    secrets in it are redacted (``aimem_common.redact``), so the value compared is the one
    the writer keeps. ``root`` still needs ``locations.normalize``.

    Raises:
        BadRequestError: ``invalid_field``.
    """
    if not value:
        return None
    if len(value) > max_chars or not value.isprintable():
        raise BadRequestError(f"{name} must be a printable string of ≤ {max_chars} chars", code="invalid_field")
    from aimem_common.redact import redact  # the redactor's tables load only where keys are checked

    return redact(value).text


def repo_id_field(value: str | None) -> str | None:
    """Check a client's ``repo_id``: ``None`` when empty, else 32 lower-case hex digits.

    Raises:
        BadRequestError: ``invalid_field``.
    """
    if not value:
        return None
    if not REPO_ID.match(value):
        raise BadRequestError("repo_id must be 32 lower-case hex digits", code="invalid_field")
    return value


def assigned(conn: sqlite3.Connection, workspace: str, project: str, *, root: str | None = None,
             origin: str | None = None, explicit: bool = False, repo_id: str | None = None) -> tuple[Scope | None, str]:
    """Return where a hook event with this identity lands: ``(scope, name)``.

    ``scope`` is the existing project (``lookup``: by identity keys, else a keyless project
    of that name, or by name when ``explicit`` or without keys) and ``name`` its name; for
    an identity not seen yet ``scope`` is ``None`` and ``name`` is the one the writer would
    create it under (``new_project_name``: ``api-2`` when ``api`` is another repository's).
    ``root`` is compared normalised. Reads only; creates nothing.
    """
    root = locations.normalize(root)
    found = lookup(conn, workspace, project, root=root, origin=origin, explicit=explicit, repo_id=repo_id)
    if found is not None:
        return found, found.project
    keyed = not explicit and bool(root or origin or repo_id)
    return None, new_project_name(conn, workspace, project, keyed=keyed)


def project_roots(conn: sqlite3.Connection, project_id: str) -> list[str]:
    """Return every root of a project: its first ``root``, then its aliases by first sighting
    (normalised locations; ``[]`` when none is known)."""
    row = conn.execute("SELECT root FROM projects WHERE id = ?", (project_id,)).fetchone()
    first = [row[0]] if row is not None and row[0] else []
    aliases = [r[0] for r in conn.execute(
        "SELECT root FROM project_roots WHERE project_id = ? ORDER BY first_seen_at, root", (project_id,))]
    return list(dict.fromkeys(first + aliases))


def root_aliases(conn: sqlite3.Connection, project_id: str) -> list[str]:
    """Return a project's root aliases: every root but its first (``project_roots``)."""
    return project_roots(conn, project_id)[1:]


def identity_keys(conn: sqlite3.Connection, project_id: str) -> dict[str, str | None]:
    """Return ``{"root", "origin"}`` of a project (``None`` values when unknown or absent)."""
    row = conn.execute("SELECT root, origin FROM projects WHERE id = ?", (project_id,)).fetchone()
    return {"root": row[0], "origin": row[1]} if row is not None else {"root": None, "origin": None}


def manifest_keys(conn: sqlite3.Connection, project_id: str) -> dict:
    """Return every identity key of a project for its manifest: ``{"root", "origin",
    "repo_id", "aliases": [root, ...]}`` (``wikifmt.render_meta`` keyword arguments)."""
    return {**identity_keys(conn, project_id), "repo_id": repo_id_of(conn, project_id),
            "aliases": root_aliases(conn, project_id)}


def repo_id_of(conn: sqlite3.Connection, project_id: str) -> str | None:
    """Return a project's repository id (``None`` when unknown)."""
    row = conn.execute("SELECT repo_id FROM projects WHERE id = ?", (project_id,)).fetchone()
    return row[0] if row is not None else None


def all_identity_keys(conn: sqlite3.Connection) -> dict[str, dict]:
    """Return ``{project_id: {"root", "origin", "aliases": [root, ...]}}`` for every project."""
    aliases: dict[str, list[str]] = {}
    for pid, root in conn.execute("SELECT project_id, root FROM project_roots ORDER BY first_seen_at, root"):
        aliases.setdefault(pid, []).append(root)
    out = {}
    for pid, root, origin in conn.execute("SELECT id, root, origin FROM projects"):
        out[pid] = {"root": root, "origin": origin, "aliases": [a for a in aliases.get(pid, []) if a != root]}
    return out


def free_project_name(conn: sqlite3.Connection, workspace: str, base: str) -> str:
    """Return ``base`` when no project of ``workspace`` has it, else the first free
    ``base-2``, ``base-3``, … (the readable name of a second repository with one folder name)."""
    taken = {r[0] for r in conn.execute(
        "SELECT p.name FROM projects p JOIN workspaces w ON w.id = p.workspace_id"
        " WHERE w.name = ? AND (p.name = ? OR p.name LIKE ? ESCAPE '\\')",
        (workspace, base, base.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "-%"))}
    if base not in taken:
        return base
    n = 2
    while f"{base[:120]}-{n}" in taken:
        n += 1
    return f"{base[:120]}-{n}"


def new_project_name(conn: sqlite3.Connection, workspace: str, project: str, *, keyed: bool) -> str:
    """Return the name the writer creates a missing project under: for an event with
    identity keys (and no explicit name) the first free one (``free_project_name``: the
    requested name is another repository's, so this one gets ``name-2``), else ``project``
    itself. Ingress asks the same before it lets a user API key create a project.
    """
    return free_project_name(conn, workspace, project) if keyed else project


def projects_of(conn: sqlite3.Connection, workspace_id: str) -> list[Scope]:
    """Return every project of the workspace with id ``workspace_id`` as a ``Scope`` (by name)."""
    return [_row_scope(r) for r in conn.execute(_SCOPE_SQL + " WHERE w.id = ? ORDER BY p.name", (workspace_id,))]


def resolve(conn: sqlite3.Connection, workspace: str, project: str) -> Scope:
    """Return the ``Scope`` of ``workspace``/``project`` (names).

    Raises:
        NotFoundError: ``workspace_not_found`` or ``project_not_found``.
    """
    scope = find(conn, workspace, project)
    if scope is not None:
        return scope
    if workspace_id(conn, workspace) is None:
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
    return resolve(conn, *split_ref(ref, default_workspace=default_workspace))


def split_ref(ref: str, *, default_workspace: str) -> tuple[str, str]:
    """Return ``(workspace, project)`` of ``"project"`` or ``"workspace/project"``.

    Raises:
        BadRequestError: more than one ``/`` or an empty part (``invalid_scope``).
    """
    parts = ref.split("/")
    if len(parts) == 1 and parts[0]:
        return default_workspace, parts[0]
    if len(parts) == 2 and all(parts):
        return parts[0], parts[1]
    raise BadRequestError(f"invalid scope {ref!r}: use 'project' or 'workspace/project'", code="invalid_scope")


def by_project_id(conn: sqlite3.Connection, project_id: str) -> Scope:
    """Return the ``Scope`` of a project id.

    Raises:
        NotFoundError: ``project_not_found``.
    """
    scope = find_by_id(conn, project_id)
    if scope is None:
        raise NotFoundError(f"project id {project_id!r} not found", code="project_not_found")
    return scope


def all_scopes(conn: sqlite3.Connection) -> list[Scope]:
    """Return every project as a ``Scope``, ordered by workspace then project name."""
    return [_row_scope(r) for r in conn.execute(_SCOPE_SQL + " ORDER BY w.name, p.name")]


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Return ``{"workspaces": n, "projects": n}`` (how many of each exist)."""
    return {
        "workspaces": conn.execute("SELECT count(*) FROM workspaces").fetchone()[0],
        "projects": conn.execute("SELECT count(*) FROM projects").fetchone()[0],
    }


def list_workspaces(conn: sqlite3.Connection) -> list[dict]:
    """Return ``[{"workspace", "workspace_id", "projects": [{"project", "project_id", "root",
    "origin", "aliases"}]}]`` (``root``/``origin``: the project's identity keys, ``None`` when
    unknown; ``aliases``: the other roots it has been seen at, ``[]`` when none).

    Ordered by name; a workspace without projects is listed with ``projects: []``.
    """
    out: dict[str, dict] = {}
    for w in conn.execute("SELECT id, name FROM workspaces ORDER BY name"):
        out[w[0]] = {"workspace": w[1], "workspace_id": w[0], "projects": []}
    keys = all_identity_keys(conn)
    for p in conn.execute("SELECT id, workspace_id, name, root, origin FROM projects ORDER BY name"):
        if p[1] in out:
            out[p[1]]["projects"].append({"project": p[2], "project_id": p[0], "root": p[3], "origin": p[4],
                                          "aliases": keys.get(p[0], {}).get("aliases", [])})
    return list(out.values())
