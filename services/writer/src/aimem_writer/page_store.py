"""``PageStore`` (``tx.pages``): versioned page writes with their indexes, on the writer thread.

One write = retire the live version (``is_latest=0``, ``retired_reason='superseded'``),
insert the new version (FTS via the schema's triggers), its outgoing links (resolved now or
left ``to_page_id = NULL`` until the target lands), repoint incoming links, entities from
frontmatter ``entities``, evidence rows, the staged file, an audit row and a
``page.changed`` event — all inside the caller's transaction (DESIGN.md invariant 3).

``content_hash`` is the sha256 of the page rendered *without* the writer's timestamps, so
an identical rewrite is a no-op (``changed: false``) and the watcher can tell a hand edit
from the writer's own file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from aimem_common.read.tombstones import session_tombstone
from aimem_common.errors import GoneError, BadRequestError, PayloadTooLargeError, PreconditionFailedError
from aimem_common.read import scopes
from aimem_common.models import Scope, kind_for_path, tier_for, validate_page_path
from aimem_common.commands.pages import PageWrite
from aimem_common import wikifmt

if TYPE_CHECKING:
    import sqlite3

    from aimem_common.config import Settings

    from aimem_writer.wiki import WikiStage

WRITER_KEYS = wikifmt.WRITER_KEYS


@dataclass(slots=True)
class PageInput:
    """A page write from writer-side code (the same fields as the ``page.write`` payload)."""

    path: str
    body: str
    title: str | None = None
    frontmatter: dict[str, Any] = field(default_factory=dict)
    create_only: bool = False
    expected_page_id: int | None = None
    expires_at: str | None = None
    evidence: list[dict[str, str]] = field(default_factory=list)


class PageTx(Protocol):
    """What ``PageStore`` needs of the command's transaction (``aimem_writer.tx.Tx`` is one).

    A protocol rather than an import: ``tx.py`` builds the page store, so this module must
    not import ``tx.py`` back.
    """

    conn: "sqlite3.Connection"
    now: str
    settings: "Settings"
    wiki: "WikiStage"

    @property
    def actor(self) -> str: ...

    def audit(self, op: str, target: str | None, detail: dict[str, Any] | None = None,
              scope: Scope | None = None) -> None: ...

    def emit(self, kind: str, data: dict[str, Any]) -> None: ...


def _row_dict(row: "sqlite3.Row | None") -> dict[str, Any] | None:
    return dict(row) if row is not None else None


class PageStore:
    """Page operations bound to one command's ``Tx``."""

    def __init__(self, tx: PageTx):
        self.tx = tx
        self.conn = tx.conn

    # -- reads --------------------------------------------------------------------
    def get(self, scope: Scope, path: str) -> "sqlite3.Row | None":
        """Return the live version row of ``path`` in ``scope`` (None when absent)."""
        return self.conn.execute(
            "SELECT * FROM pages WHERE project_id = ? AND path = ? AND is_latest = 1", (scope.project_id, path)
        ).fetchone()

    # -- writes -------------------------------------------------------------------
    def write(
        self,
        scope: Scope,
        page: PageWrite | PageInput,
        *,
        evidence: list[dict[str, str]] | None = None,
        session_id: str | None = None,
        sync_file: bool = True,
    ) -> dict[str, Any]:
        """Create or supersede ``page.path`` in ``scope``.

        Args:
            scope: resolved scope (``tx.scope(create=True)``).
            page: payload; ``body`` may open with its own frontmatter (merged under
                ``page.frontmatter``).
            evidence: extra ``[{"kind": "session", "id": ...}]`` rows (plus ``page.evidence``).
            session_id: stamps ``pages.session_id`` (session summary pages).
            sync_file: stage the rendered file (False when indexing a file already on disk).

        Returns:
            ``{page_id, path, title, kind, tier, version, supersedes, created, changed,
            workspace, project}``.

        Raises:
            BadRequestError: ``invalid_path`` / ``invalid_frontmatter``.
            PayloadTooLargeError: body over ``writer.max_page_bytes``.
            PreconditionFailedError: ``create_only`` / ``expected_page_id`` did not hold;
                ``data.current_page_id`` is the live id (or None).
        """
        path = validate_page_path(page.path)
        body = page.body.replace("\r\n", "\n")
        fm: dict[str, Any] = {}
        if body.startswith("---\n") or body == "---":
            parsed = wikifmt.parse(body)
            fm.update(parsed.frontmatter)
            body = parsed.body
        fm.update(page.frontmatter or {})
        if page.expires_at is not None:
            fm["expires_at"] = page.expires_at
        timestamps = {k: fm.pop(k) for k in WRITER_KEYS if k in fm}
        return self._write(
            scope, path, body, fm, title=page.title, create_only=page.create_only,
            expected_page_id=page.expected_page_id,
            evidence=list(page.evidence or []) + list(evidence or []),
            session_id=session_id, sync_file=sync_file, keep_timestamps=None if sync_file else timestamps,
        )

    def index_text(self, scope: Scope, path: str, text: str) -> dict[str, Any]:
        """Index a page file's ``text`` as the new live version without rewriting the file.

        A text whose content hash equals the live version is a no-op (``changed: false``):
        this is how the watcher ignores the writer's own writes.
        """
        path = validate_page_path(path)
        parsed = wikifmt.parse(text)
        fm = dict(parsed.frontmatter)
        timestamps = {k: fm.pop(k) for k in WRITER_KEYS if k in fm}
        return self._write(
            scope, path, parsed.body, fm, title=None, create_only=False, expected_page_id=None,
            evidence=[], session_id=fm.get("session_id") if isinstance(fm.get("session_id"), str) else None,
            sync_file=False, keep_timestamps=timestamps,
        )

    def _write(
        self, scope: Scope, path: str, body: str, fm: dict[str, Any], *, title: str | None,
        create_only: bool, expected_page_id: int | None, evidence: list[dict[str, str]],
        session_id: str | None, sync_file: bool, keep_timestamps: dict[str, Any] | None,
    ) -> dict[str, Any]:
        tx = self.tx
        rel = tx.wiki.rel(scope, path)
        tx.wiki.check(rel)
        purged_sid = session_id or (fm.get("session_id") if isinstance(fm.get("session_id"), str) else None)
        if purged_sid and session_tombstone(tx.conn, purged_sid) is not None:
            # A purged session's page never comes back: a hand edit or sync restoring the file
            # (watcher), a rebuild (reindex), a restore from git history.
            raise GoneError(f"session {purged_sid} was purged; its page is not stored again",
                            data={"session_id": purged_sid, "path": path})
        if "\x00" in body:
            raise BadRequestError("page body contains NUL", code="invalid_body")
        cap = tx.settings.writer.max_page_bytes
        if len(body.encode("utf-8", "surrogatepass")) > cap:
            raise PayloadTooLargeError(f"page body larger than {cap} bytes", data={"max_bytes": cap})
        if body and not body.endswith("\n"):
            body += "\n"  # the file always ends in a newline; keep DB and disk identical
        fields = wikifmt.page_fields(fm)
        if fields.expires_at:
            fm["expires_at"] = fields.expires_at
        title = (title or "").strip() or wikifmt.extract_title(fm, body, path)
        fm = {"title": title, **{k: v for k, v in fm.items() if k != "title"}}
        if session_id:
            fm.setdefault("session_id", session_id)
        basis = wikifmt.render(fm, body)
        chash = wikifmt.content_hash(basis)

        cur = self.get(scope, path)
        cur_id = cur["id"] if cur is not None else None
        if create_only and cur is not None:
            raise PreconditionFailedError(
                f"page {path!r} already exists", data={"current_page_id": cur_id, "path": path}
            )
        if expected_page_id is not None and (expected_page_id or None) != cur_id:
            raise PreconditionFailedError(
                f"page {path!r} is at version id {cur_id}, not {expected_page_id}",
                data={"current_page_id": cur_id, "path": path},
            )
        kind = kind_for_path(path)
        tier = tier_for(kind, fields.tier)
        result_base = {"path": path, "title": title, "kind": str(kind), "tier": str(tier),
                       "workspace": scope.workspace, "project": scope.project}
        if cur is not None and cur["content_hash"] == chash:
            if session_id and cur["session_id"] is None:
                # Same text, written first without the stamp (a restore's /admin/pages on the
                # live lane overtakes the session end on the bulk lane): the session end still
                # stamps it, or the turns stream never folds the session's observations onto it.
                self.conn.execute("UPDATE pages SET session_id = ? WHERE id = ?", (session_id, cur_id))
            version = self._version_count(scope, path)
            return {**result_base, "page_id": cur_id, "version": version, "supersedes": cur["supersedes"],
                    "created": False, "changed": False}

        now = tx.now
        created_at = cur["created_at"] if cur is not None else now
        updated_at = now
        if keep_timestamps:
            created_at = _ts(keep_timestamps.get("created_at")) or created_at
            updated_at = _ts(keep_timestamps.get("updated_at")) or now
        pinned = fields.pinned or path.startswith("_slots/")
        salience = fields.salience if fields.salience is not None else (cur["salience"] if cur is not None else None)
        if cur is not None:
            self.conn.execute(
                "UPDATE pages SET is_latest = 0, retired_reason = 'superseded', superseded_at = ? WHERE id = ?",
                (now, cur_id),
            )
        new_id = self.conn.execute(
            "INSERT INTO pages(workspace_id, project_id, path, title, body, frontmatter, kind, tier, tags, pinned,"
            " salience, expires_at, access_count, last_accessed_at, session_id, is_latest, supersedes,"
            " content_hash, actor, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)",
            (
                scope.workspace_id, scope.project_id, path, title, body, wikifmt.dumps_json(fm), str(kind),
                str(tier), wikifmt.dumps_json(fields.tags), int(pinned), salience, fields.expires_at,
                cur["access_count"] if cur is not None else 0,
                cur["last_accessed_at"] if cur is not None else None,
                session_id or (cur["session_id"] if cur is not None else None),
                cur_id, chash, tx.actor, created_at, updated_at,
            ),
        ).lastrowid
        self._links(scope, new_id, path, body)
        self._incoming(scope, path, new_id, cur_id)
        self._entities(scope, new_id, fields.entities)
        for ev in evidence:
            kind_e, src = str(ev.get("kind") or "").strip(), str(ev.get("id") or "").strip()
            if kind_e and src:
                self.conn.execute(
                    "INSERT INTO page_evidence(workspace_id, project_id, page_id, source_kind, source_id, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (scope.workspace_id, scope.project_id, new_id, kind_e[:32], src[:256], now),
                )
        if sync_file:
            file_fm = {**fm, "created_at": created_at, "updated_at": updated_at}
            tx.wiki.write(scope, path, wikifmt.render(file_fm, body))
        version = self._version_count(scope, path)
        tx.audit("page.write", path, {"page_id": new_id, "supersedes": cur_id, "version": version}, scope=scope)
        tx.emit("page.changed", {"action": "written", "workspace": scope.workspace, "project": scope.project,
                                 "workspace_id": scope.workspace_id, "project_id": scope.project_id,
                                 "path": path, "page_id": new_id, "supersedes": cur_id, "kind": str(kind)})
        return {**result_base, "page_id": new_id, "version": version, "supersedes": cur_id,
                "created": cur is None, "changed": True}

    def delete(self, scope: Scope, path: str, reason: str = "deleted",
               expected_page_id: int | None = None) -> dict[str, Any]:
        """Retire the live version of ``path`` and stage the file's removal (idempotent).

        Returns ``{deleted: bool, page_id: int|None, path}``. Incoming links become
        unresolved (``to_page_id = NULL``) so lint reports them as dangling.

        Raises:
            PreconditionFailedError: ``expected_page_id`` is not the live page's id (0: a
                page exists); nothing is deleted.
        """
        path = validate_page_path(path)
        self.tx.wiki.check(self.tx.wiki.rel(scope, path))
        cur = self.get(scope, path)
        cur_id = cur["id"] if cur is not None else None
        if expected_page_id is not None and (expected_page_id or None) != cur_id:
            raise PreconditionFailedError(
                f"page {path!r} is at version id {cur_id}, not {expected_page_id}: nothing deleted",
                data={"current_page_id": cur_id, "expected_page_id": expected_page_id, "path": path},
            )
        if cur is None:
            return {"deleted": False, "page_id": None, "path": path}
        self.conn.execute(
            "UPDATE pages SET is_latest = 0, retired_reason = ?, superseded_at = ? WHERE id = ?",
            (reason, self.tx.now, cur["id"]),
        )
        self.conn.execute("UPDATE links SET to_page_id = NULL WHERE to_page_id = ?", (cur["id"],))
        self.tx.wiki.delete(scope, path)
        self.tx.audit("page.delete", path, {"page_id": cur["id"], "reason": reason}, scope=scope)
        self.tx.emit("page.changed", {"action": "deleted", "workspace": scope.workspace, "project": scope.project,
                                      "workspace_id": scope.workspace_id, "project_id": scope.project_id,
                                      "path": path, "page_id": cur["id"], "reason": reason})
        return {"deleted": True, "page_id": cur["id"], "path": path}

    # -- indexes ------------------------------------------------------------------
    def _version_count(self, scope: Scope, path: str) -> int:
        return int(self.conn.execute(
            "SELECT count(*) FROM pages WHERE project_id = ? AND path = ?", (scope.project_id, path)
        ).fetchone()[0])

    def _target_scope_ids(self, scope: Scope, ws: str | None, pj: str | None) -> tuple[str, str] | None:
        """Map a link's (workspace, project) names to ids; None when that scope does not exist."""
        if pj is None:
            return scope.workspace_id, scope.project_id
        target = scopes.find(self.conn, ws or scope.workspace, pj)
        return (target.workspace_id, target.project_id) if target else None

    def _links(self, scope: Scope, page_id: int, path: str, body: str) -> None:
        rows = []
        for link in wikifmt.extract_links(body, path):
            try:
                target_path = validate_page_path(link.path)
            except Exception:  # noqa: BLE001 - an unparseable target is simply not indexed
                continue
            ids = self._target_scope_ids(scope, link.workspace, link.project)
            to_id = None
            if ids is not None:
                hit = self.conn.execute(
                    "SELECT id FROM pages WHERE project_id = ? AND path = ? AND is_latest = 1", (ids[1], target_path)
                ).fetchone()
                to_id = hit[0] if hit else None
            to_ws = link.workspace if link.project is not None else None
            rows.append((scope.workspace_id, scope.project_id, page_id, to_ws, link.project, target_path, to_id,
                         link.kind, link.label))
        if rows:
            self.conn.executemany(
                "INSERT INTO links(workspace_id, project_id, from_page_id, to_workspace, to_project, to_path,"
                " to_page_id, link_kind, label) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def _incoming(self, scope: Scope, path: str, new_id: int, old_id: int | None) -> None:
        """Repoint links at the old version and resolve forward links waiting for ``path``."""
        if old_id is not None:
            self.conn.execute("UPDATE links SET to_page_id = ? WHERE to_page_id = ?", (new_id, old_id))
        self.conn.execute(
            "UPDATE links SET to_page_id = ? WHERE to_page_id IS NULL AND to_path = ? AND ("
            " (to_project IS NULL AND project_id = ?)"
            " OR (to_project = ? AND ((to_workspace IS NULL AND workspace_id = ?) OR to_workspace = ?)))",
            (new_id, path, scope.project_id, scope.project, scope.workspace_id, scope.workspace),
        )

    def relink_entities(self, dest: Scope, page_ids: list[int]) -> None:
        """Give pages that moved into ``dest`` (a ``session.move`` with ``pages=move``) the same
        entities there: each link to an entity of another project becomes a link to ``dest``'s
        entity of that name (created when missing). Entities are per project, and the entity
        stream finds pages through the searched scope's entities: a link left behind kept a
        moved page findable from its old project only."""
        marks = ",".join("?" * len(page_ids))
        stale = self.conn.execute(
            f"SELECT l.page_id, e.id, e.display_name FROM entity_page_links l JOIN entities e ON e.id = l.entity_id"
            f" WHERE l.page_id IN ({marks}) AND e.project_id != ?", (*page_ids, dest.project_id)).fetchall()
        for page_id, entity_id, display in stale:
            self.conn.execute("DELETE FROM entity_page_links WHERE entity_id = ? AND page_id = ?", (entity_id, page_id))
            self._entities(dest, page_id, [display])

    def _entities(self, scope: Scope, page_id: int, names: list[str]) -> None:
        seen: set[str] = set()
        for display in names:
            norm = wikifmt.normalize_entity(display)
            if not norm or norm in seen:
                continue
            seen.add(norm)
            self.conn.execute(
                "INSERT INTO entities(workspace_id, project_id, name, display_name) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(project_id, name) DO NOTHING",
                (scope.workspace_id, scope.project_id, norm, display.strip()[:256]),
            )
            eid = self.conn.execute(
                "SELECT id FROM entities WHERE project_id = ? AND name = ?", (scope.project_id, norm)
            ).fetchone()[0]
            self.conn.execute(
                "INSERT OR IGNORE INTO entity_page_links(entity_id, page_id) VALUES (?, ?)", (eid, page_id)
            )


def _ts(value: Any) -> str | None:
    """Return a frontmatter timestamp as ISO UTC, or None when unusable."""
    if value is None:
        return None
    try:
        return wikifmt.normalize_timestamp(value)
    except Exception:  # noqa: BLE001 - a bad hand-written timestamp falls back to now
        return None


def page_public(row: "sqlite3.Row") -> dict[str, Any]:
    """Render a page row for replies (no body)."""
    d = dict(row)
    d.pop("body", None)
    d["frontmatter"] = json.loads(d.get("frontmatter") or "{}")
    d["tags"] = json.loads(d.get("tags") or "[]")
    return d
