"""``Tx``: what an op handler gets — one command's view of the batch transaction.

Handlers run on the single writer thread, synchronously, inside the batch's
``BEGIN IMMEDIATE`` transaction (and their own ``SAVEPOINT`` when ``batch.py`` re-applies a
batch in which a command failed): raising an ``AimemError`` rolls back exactly that command
(rows, staged wiki files, events, audit rows) and answers it with the error; the rest of
the batch commits.

API (all on the writer thread; never keep a ``Tx`` after the handler returns):

``tx.conn``
    The ``sqlite3.Connection`` (rows are ``sqlite3.Row``). Use plain SQL; never
    ``COMMIT``/``ROLLBACK``/``BEGIN`` — the batch owns the transaction.
``tx.now``
    ISO-8601 UTC timestamp of the batch (``2026-11-30T10:00:00.123456Z``), one value for
    every command of a batch.
``tx.actor`` / ``tx.cmd_id`` / ``tx.op`` / ``tx.env`` / ``tx.settings``
    The envelope's actor, command id, op name, the envelope itself, the writer ``Settings``.
``tx.scope(create=None) -> Scope``
    Resolve the envelope's ``scope`` names to ids. ``create=None`` follows the op's
    ``creates_scope`` flag in the catalogue. ``create=True`` creates the workspace and
    project (and stages their ``_meta.md`` manifests) when missing; otherwise a missing one
    raises ``NotFoundError``. A command without ``scope`` raises ``BadRequestError``
    (``missing_scope``).
``tx.resolve_scope(workspace, project, create=False, *, root=, origin=, explicit=) -> Scope``
    The same for any other names (message recipients, cross-project moves). Identity keys
    (``root``/``origin``, sent by the hook client) find the project by repository instead
    of by name; a second repository wanting a taken name gets ``name-2`` (the returned
    scope carries the actual name).
``tx.scope_by_ids(workspace_id, project_id) -> Scope``
    Look a scope up by its ids (``NotFoundError`` when absent).
``tx.wiki`` (``aimem_writer.wiki.WikiStage``)
    Stage file effects, applied atomically after COMMIT and committed to git by the
    debounced checkpoint: ``write(scope, path, text)``, ``delete(scope, path)``,
    ``write_rel(rel, text)``, ``delete_rel(rel)`` (a whole ``<ws_id>/<pj_id>`` tree for
    purges), ``append_ledger(scope, "YYYY-MM", text)``. Keys are
    ``<workspace_id>/<project_id>/<path>``. Symlinks out of the wiki are refused at stage
    time (``invalid_path``).
``tx.pages`` (``aimem_writer.page_store.PageStore``)
    ``write(scope, page, evidence=..., session_id=...) -> dict`` where ``page`` is an
    ``aimem_common.commands.pages.PageWrite`` or ``aimem_writer.page_store.PageInput``: versioning
    (supersession keeps history), preconditions (``precondition_failed`` with
    ``current_page_id``), frontmatter validation, FTS (triggers), links (deferred
    resolution, cross-project), entities, evidence, the staged file, audit and a
    ``page.changed`` event. Returns ``{page_id, path, title, kind, tier, version,
    supersedes, created, changed, workspace, project}``.
    ``delete(scope, path, reason="deleted") -> {deleted, page_id}`` (idempotent; staged
    unlink; incoming links become unresolved). ``get(scope, path) -> Row | None`` (live
    version). ``index_text(scope, path, text) -> dict`` indexes a file's text without
    rewriting it (watcher, reindex, restore).
``tx.emit(kind, data)``
    Queue an event for ``aimem.evt.<kind>``; published only after COMMIT, dropped if the
    command fails. ``workspace``/``project`` names are added when missing.
``tx.audit(op, target, detail=None, scope=None)``
    Insert an ``audit_log`` row (``at``, actor, op, scope ids, target, JSON detail, cmd_id).
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aimem_common import locations
from aimem_common.config import Settings
from aimem_common.errors import BadRequestError, NotFoundError
from aimem_common.models import Scope, validate_name
from aimem_common.read import scopes
from aimem_common.commands import Envelope
from aimem_common.commands.envelope import OP_CREATES_SCOPE
from aimem_common.wikifmt import META_FILE, render_meta

from aimem_writer.page_store import PageStore
from aimem_writer.wiki import WikiStage


def utc_now() -> str:
    """Return the current time as ISO-8601 UTC with a ``Z`` suffix, always with microseconds
    (fixed width, like the stored event times: ``wikifmt.event_timestamp``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(slots=True)
class Event:
    """An event queued by a command: published on ``aimem.evt.<kind>`` after COMMIT."""

    kind: str
    data: dict[str, Any]


@dataclass(slots=True)
class ScopeCache:
    """Scopes resolved in the current batch, by names and by ids (committed commands only)."""

    by_name: dict[tuple[str, str], Scope] = field(default_factory=dict)

    def merge(self, other: "ScopeCache") -> None:
        self.by_name.update(other.by_name)


class Tx:
    """One command's handle on the batch transaction (see the module docstring)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        env: Envelope,
        *,
        now: str,
        settings: Settings,
        wiki: WikiStage,
        scopes: ScopeCache,
    ):
        self.conn = conn
        self.env = env
        self.now = now
        self.settings = settings
        self.wiki = wiki
        self.events: list[Event] = []
        self._batch_scopes = scopes
        self.new_scopes = ScopeCache()
        self._pages = None
        self._scope: Scope | None = None

    # -- identity ---------------------------------------------------------------
    @property
    def actor(self) -> str:
        return self.env.actor

    @property
    def cmd_id(self) -> str:
        return self.env.cmd_id

    @property
    def op(self) -> str:
        return self.env.op

    @property
    def resolved_project_id(self) -> str | None:
        """The id of the project ``scope()`` resolved for this command (None: not called)."""
        return None if self._scope is None else self._scope.project_id

    @property
    def pages(self) -> PageStore:
        """The page store bound to this command (``aimem_writer.page_store.PageStore``)."""
        if self._pages is None:
            self._pages = PageStore(self)
        return self._pages

    # -- scopes -----------------------------------------------------------------
    def scope(self, create: bool | None = None) -> Scope:
        """Resolve the envelope's scope (see module docstring).

        ``create=None`` follows the op catalogue (``register(..., creates_scope=True)``).

        Raises:
            BadRequestError: the envelope has no ``scope`` (``missing_scope``).
            NotFoundError: workspace or project unknown and ``create`` is False.
        """
        if self.env.scope is None:
            raise BadRequestError(f"{self.op} needs a scope (workspace/project)", code="missing_scope")
        if create is None:
            create = OP_CREATES_SCOPE.get(self.op, False)
        ref = self.env.scope
        scope = self.resolve_scope(ref.workspace, ref.project, create=create, root=ref.root,
                                   origin=ref.origin, explicit=ref.explicit, repo_id=ref.repo_id)
        self._scope = scope
        return scope

    def resolve_scope(self, workspace: str, project: str, create: bool = False, *, root: str | None = None,
                      origin: str | None = None, explicit: bool = False, repo_id: str | None = None) -> Scope:
        """Resolve names (and identity keys) to a ``Scope``, creating it when ``create``.

        Without keys (or with ``explicit``, a name the user chose in a marker) the project is
        found by name; keys given then fill the project's unknown ones. With keys
        (``root``/``origin`` from the hook client) the project is the one holding them
        (``scopes.find_by_key``), else a keyless project of that name (older data, direct
        clients) adopts them, else a new project is created under the first free name
        (``api``, ``api-2``, …): two repositories sharing a folder name never merge. The
        returned ``Scope`` carries the actual name.

        ``root`` is stored and compared normalised (``aimem_common.locations``: one Windows
        folder is one root however it is spelled). ``repo_id`` (the repository's stable id)
        finds a moved checkout without an origin. A project found by its origin or id at a
        root it has not been seen at records that root as an alias (``project_roots``): its
        handoffs then reach every root of the project.

        Raises:
            BadRequestError: invalid names (``invalid_name``).
            NotFoundError: unknown workspace/project and not ``create``.
        """
        root = locations.normalize(root)
        keyed = not explicit and bool(root or origin or repo_id)
        key: tuple = (workspace, project) if not keyed else ("key", workspace, project, root, origin, repo_id)
        hit = self._batch_scopes.by_name.get(key) or self.new_scopes.by_name.get(key)
        if hit is not None:
            return hit
        found = scopes.lookup(self.conn, workspace, project, root=root, origin=origin, explicit=explicit,
                              repo_id=repo_id)
        if found is not None:
            if root or origin or repo_id:
                self._record_keys(found, root, origin, repo_id, alias=keyed)
            self._batch_scopes.by_name[key] = found
            return found
        validate_name(workspace, "workspace")
        validate_name(project, "project")
        ws_id = scopes.workspace_id(self.conn, workspace)
        if ws_id is None and not create:
            raise NotFoundError(f"workspace {workspace!r} not found", data={"workspace": workspace})
        if not create:
            raise NotFoundError(
                f"project {workspace}/{project} not found", data={"workspace": workspace, "project": project}
            )
        project = scopes.new_project_name(self.conn, workspace, project, keyed=keyed)
        scope = self._create(workspace, ws_id, project, root, origin, repo_id)
        self.new_scopes.by_name[key] = scope
        return scope

    def _record_keys(self, scope: Scope, root: str | None, origin: str | None, repo_id: str | None = None,
                     *, alias: bool = False) -> None:
        """Fill the project's unknown identity keys (never overwrite a known one) and record a
        new ``root`` as a root alias when the project is this repository: ``alias`` (found by
        its keys), or a marker-named project whose known origin or repository id is this
        event's (the same repository moved; another repository sharing the marker's name
        keeps its own root, so its handoffs stay apart)."""
        known_id = scopes.repo_id_of(self.conn, scope.project_id)
        changed: dict[str, str] = {}
        if repo_id and known_id is None:
            self.conn.execute("UPDATE projects SET repo_id = ? WHERE id = ?", (repo_id, scope.project_id))
            changed["repo_id"] = repo_id
        have = scopes.identity_keys(self.conn, scope.project_id)
        same_repo = alias or bool(repo_id and known_id == repo_id) or bool(origin and have["origin"] == origin)
        if same_repo and root and have["root"] and root not in scopes.project_roots(self.conn, scope.project_id):
            self.conn.execute("INSERT INTO project_roots(workspace_id, project_id, root, first_seen_at)"
                              " VALUES (?, ?, ?, ?)", (scope.workspace_id, scope.project_id, root, self.now))
            self.audit("project.alias", f"{scope.workspace}/{scope.project}", {"root": root, "first": have["root"]},
                       scope=scope)
            self.emit("project.aliased", {"workspace_id": scope.workspace_id, "project_id": scope.project_id,
                                          "root": root})
            changed["alias"] = root
        if (root and not have["root"]) or (origin and not have["origin"]):
            self.conn.execute("UPDATE projects SET root = coalesce(root, ?), origin = coalesce(origin, ?) WHERE id = ?",
                              (root, origin, scope.project_id))
            changed.update({k: v for k, v in (("root", root), ("origin", origin)) if v})
        if changed:
            self.wiki.write_rel(f"{scope.workspace_id}/{scope.project_id}/{META_FILE}", render_meta(
                "project", id=scope.project_id, name=scope.project, workspace_id=scope.workspace_id,
                workspace=scope.workspace, **scopes.manifest_keys(self.conn, scope.project_id)))
            if changed.keys() - {"alias"}:
                self.audit("project.keys", f"{scope.workspace}/{scope.project}",
                           {k: v for k, v in changed.items() if k != "alias"}, scope=scope)

    def _create(self, workspace: str, ws_id: str | None, project: str, root: str | None,
                origin: str | None, repo_id: str | None = None) -> Scope:
        """Insert the project (and its workspace when ``ws_id`` is None) with manifests."""
        if ws_id is None:
            wid = uuid.uuid4().hex
            self.conn.execute(
                "INSERT INTO workspaces(id, name, created_at) VALUES (?, ?, ?)", (wid, workspace, self.now)
            )
            self.wiki.write_rel(f"{wid}/{META_FILE}", render_meta("workspace", id=wid, name=workspace))
            self.audit("workspace.create", workspace, {"workspace_id": wid})
        else:
            wid = ws_id
        pid = uuid.uuid4().hex
        self.conn.execute(
            "INSERT INTO projects(id, workspace_id, name, created_at, root, origin, repo_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (pid, wid, project, self.now, root, origin, repo_id),
        )
        self.wiki.write_rel(
            f"{wid}/{pid}/{META_FILE}",
            render_meta("project", id=pid, name=project, workspace_id=wid, workspace=workspace, root=root,
                        origin=origin, repo_id=repo_id),
        )
        scope = Scope(workspace, project, wid, pid)
        self.audit("project.create", f"{workspace}/{project}",
                   {"project_id": pid, "root": root, "origin": origin}, scope=scope)
        self.emit("project.created", {"workspace": workspace, "project": project,
                                      "workspace_id": wid, "project_id": pid, "root": root, "origin": origin})
        return scope

    def scope_by_ids(self, workspace_id: str, project_id: str) -> Scope:
        """Return the scope with these ids.

        Raises:
            NotFoundError: no such project in that workspace.
        """
        scope = scopes.find_by_id(self.conn, project_id, workspace_id)
        if scope is None:
            raise NotFoundError(f"project id {project_id} not found", data={"project_id": project_id})
        return scope

    # -- side channels ------------------------------------------------------------
    def emit(self, kind: str, data: dict[str, Any]) -> None:
        """Queue an event for ``aimem.evt.<kind>`` (published after COMMIT, dropped on failure)."""
        if self._scope is not None:  # the resolved names (a keyed scope may be ``api-2``)
            data.setdefault("workspace", self._scope.workspace)
            data.setdefault("project", self._scope.project)
        elif self.env.scope is not None:
            data.setdefault("workspace", self.env.scope.workspace)
            data.setdefault("project", self.env.scope.project)
        data.setdefault("cmd_id", self.cmd_id)
        data.setdefault("at", self.now)
        self.events.append(Event(kind, data))

    def audit(self, op: str, target: str | None, detail: dict[str, Any] | None = None,
              scope: Scope | None = None) -> None:
        """Insert one ``audit_log`` row for this command (rolled back with it)."""
        self.conn.execute(
            "INSERT INTO audit_log(at, actor, op, workspace_id, project_id, target, detail, cmd_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.now, self.actor, op,
                scope.workspace_id if scope else None, scope.project_id if scope else None,
                target, json.dumps(detail, ensure_ascii=False) if detail is not None else None, self.cmd_id,
            ),
        )


TxFactory = Callable[[Envelope], Tx]
