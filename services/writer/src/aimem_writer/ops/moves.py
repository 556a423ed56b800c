"""Move op handlers: ``project.move`` and ``session.move``.

``project.move`` into a workspace without a same-named project is a lossless *true move*:
the project keeps its id, every row is re-stamped with the new ``workspace_id`` and its
directory's files are re-staged under ``<new_ws_id>/<project_id>/`` (then the old tree is
removed), so sessions, observations, handoffs and page history all travel. Into a
workspace that has a same-named project it is a *copy-purge merge*: the latest pages are
written into the existing project (``on_conflict`` decides same-path conflicts), then the
source is purged.

``session.move`` re-stamps one session (or every session touching a project) into another
project. Its dry run executes inside a SAVEPOINT and rolls back, so the counts are exact.

``session.reorg`` re-derives each session's project from where it ran (its ``cwd``, as the
caller resolves that directory today) and re-stamps the ones that differ, with the same
per-session step as ``session.move``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path, PurePosixPath
from typing import Any

from aimem_common.errors import ConflictError, NotFoundError, UnprocessableError
from aimem_common.read import scopes
from aimem_common.models import Scope
from aimem_common.commands import Envelope
from aimem_common.commands.admin import DEDUP_FROM_TOKEN, ProjectMove, SessionMove, SessionReorg
from aimem_common.wikifmt import META_FILE, render_meta

from aimem_writer.ops import workstreams
from aimem_writer.ops.projects import (
    execute_project_purge,
    forget_cached_scopes,
    live_sessions,
    project_plan,
    project_tables,
)
from aimem_writer.page_store import PageInput
from aimem_writer.registry import handler
from aimem_writer.tx import Tx

_TMP_PREFIX = ".aimem-tmp-"


# -- project.move ----------------------------------------------------------------------------
def _project_files(root: Path, rel_dir: str) -> list[tuple[str, str]]:
    """Return ``(relative path, text)`` of every regular file under ``root/rel_dir``."""
    base = root / rel_dir
    out: list[tuple[str, str]] = []
    if not base.is_dir():
        return out
    for dirpath, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for f in sorted(files):
            p = Path(dirpath) / f
            if f.startswith(_TMP_PREFIX) or p.is_symlink() or not p.is_file():
                continue
            try:
                out.append((p.relative_to(base).as_posix(), p.read_text("utf-8")))
            except UnicodeDecodeError:
                continue  # not a page; git history still has it
    return out


def _page_identity(row: sqlite3.Row) -> tuple:
    fm = json.loads(row["frontmatter"] or "{}")
    for k in ("created_at", "updated_at"):
        fm.pop(k, None)
    return (row["body"], row["title"], json.dumps(fm, sort_keys=True), row["tier"], row["pinned"])


def _dedup_path(conn: sqlite3.Connection, project_id: str, path: str, src_ws: str) -> str:
    p = PurePosixPath(path)
    stem = f"{p.stem}{DEDUP_FROM_TOKEN}{src_ws}"
    n = 1
    while True:
        name = f"{stem}.md" if n == 1 else f"{stem}-{n}.md"
        cand = str(p.with_name(name))
        if conn.execute(
            "SELECT 1 FROM pages WHERE project_id = ? AND path = ? AND is_latest = 1", (project_id, cand)
        ).fetchone() is None:
            return cand
        n += 1


def _true_move(tx: Tx, src: Scope, to_ws: str, dry_run: bool) -> dict[str, Any]:
    conn, pid = tx.conn, src.project_id
    dest_wid = scopes.workspace_id(conn, to_ws)
    moved = {
        "pages": conn.execute("SELECT count(*) FROM pages WHERE project_id = ? AND is_latest = 1", (pid,)).fetchone()[0],
        "page_versions": conn.execute("SELECT count(*) FROM pages WHERE project_id = ?", (pid,)).fetchone()[0],
        "sessions": conn.execute("SELECT count(*) FROM sessions WHERE project_id = ?", (pid,)).fetchone()[0],
        "observations": conn.execute("SELECT count(*) FROM observations WHERE project_id = ?", (pid,)).fetchone()[0],
        "handoffs": conn.execute("SELECT count(*) FROM handoffs WHERE project_id = ?", (pid,)).fetchone()[0],
    }
    base = {"moved_via": "true-move", "from": {"workspace": src.workspace, "project": src.project},
            "to": {"workspace": to_ws, "project": src.project}, "project_id": pid, "moved": moved,
            "would_create_workspace": dest_wid is None, "merged_into_existing": False, "source_purged": False}
    if dest_wid is not None and (tx.wiki.root / dest_wid / pid).exists():
        raise ConflictError(
            f"destination directory {dest_wid}/{pid} already exists on disk without a project row;"
            " reconcile it by hand", code="destination_exists")
    if dry_run:
        return {**base, "dry_run": True}
    if dest_wid is None:
        # A new workspace only (never a new project): resolve_scope would create both.
        import uuid

        new_wid = uuid.uuid4().hex
        conn.execute("INSERT INTO workspaces(id, name, created_at) VALUES (?, ?, ?)", (new_wid, to_ws, tx.now))
        tx.wiki.write_rel(f"{new_wid}/{META_FILE}", render_meta("workspace", id=new_wid, name=to_ws))
        tx.audit("workspace.create", to_ws, {"workspace_id": new_wid})
    else:
        new_wid = dest_wid
    old_rel, new_rel = f"{src.workspace_id}/{pid}", f"{new_wid}/{pid}"
    files = _project_files(tx.wiki.root, old_rel)
    conn.execute("UPDATE projects SET workspace_id = ? WHERE id = ?", (new_wid, pid))
    for table in project_tables(conn):
        conn.execute(f"UPDATE {table} SET workspace_id = ? WHERE project_id = ?", (new_wid, pid))
    conn.execute("UPDATE agent_messages SET from_workspace_id = ? WHERE from_project_id = ?", (new_wid, pid))
    conn.execute("UPDATE agent_messages SET to_workspace_id = ? WHERE to_project_id = ?", (new_wid, pid))
    conn.execute("UPDATE page_embeddings SET workspace_id = ? WHERE project_id = ?", (new_wid, pid))
    for rel, text in files:
        if rel == META_FILE:
            continue
        tx.wiki.write_rel(f"{new_rel}/{rel}", text)
    tx.wiki.write_rel(f"{new_rel}/{META_FILE}", render_meta(
        "project", id=pid, name=src.project, workspace_id=new_wid, workspace=to_ws,
        **scopes.manifest_keys(tx.conn, pid)))
    tx.wiki.delete_rel(old_rel)
    forget_cached_scopes(tx)
    return {**base, "dry_run": False, "files_moved": len(files)}


def _merge(tx: Tx, src: Scope, dest: Scope, on_conflict: str, dry_run: bool) -> dict[str, Any]:
    conn = tx.conn
    pages = conn.execute(
        "SELECT * FROM pages WHERE project_id = ? AND is_latest = 1 ORDER BY path", (src.project_id,)).fetchall()
    plan: list[tuple[sqlite3.Row, str]] = []
    conflicts: list[dict[str, str]] = []
    identical = 0
    for row in pages:
        there = conn.execute(
            "SELECT * FROM pages WHERE project_id = ? AND path = ? AND is_latest = 1", (dest.project_id, row["path"])
        ).fetchone()
        if there is None:
            plan.append((row, row["path"]))
        elif _page_identity(there) == _page_identity(row):
            identical += 1
        elif on_conflict == "overwrite":
            conflicts.append({"path": row["path"], "moved_to": row["path"]})
            plan.append((row, row["path"]))
        elif on_conflict == "duplicate":
            target = _dedup_path(conn, dest.project_id, row["path"], src.workspace)
            conflicts.append({"path": row["path"], "moved_to": target})
            plan.append((row, target))
        else:
            conflicts.append({"path": row["path"], "moved_to": ""})
    base = {"moved_via": "copy-purge", "from": {"workspace": src.workspace, "project": src.project},
            "to": {"workspace": dest.workspace, "project": dest.project}, "merged_into_existing": True,
            "on_conflict": on_conflict}
    if on_conflict == "block" and conflicts:
        paths = [c["path"] for c in conflicts]
        raise ConflictError(
            f"{len(paths)} page(s) differ at the same path in {dest.workspace}/{dest.project};"
            " re-run with on_conflict=overwrite or duplicate", code="move_conflict", data={"conflicts": paths})
    purge = project_plan(conn, src)
    if dry_run:
        return {**base, "dry_run": True, "pages_copied": len(plan), "pages_identical": identical,
                "conflicts": conflicts, "source_purge": purge.counts, "source_purged": False}
    copied = 0
    for row, target in plan:
        fm = json.loads(row["frontmatter"] or "{}")
        res = tx.pages.write(dest, PageInput(path=target, body=row["body"], title=row["title"], frontmatter=fm))
        emb = conn.execute("SELECT * FROM page_embeddings WHERE page_id = ?", (row["id"],)).fetchone()
        if emb is not None and res["changed"]:
            conn.execute(
                "INSERT OR REPLACE INTO page_embeddings(page_id, workspace_id, project_id, provider, model, dim,"
                " vector, content_hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (res["page_id"], dest.workspace_id, dest.project_id, emb["provider"], emb["model"], emb["dim"],
                 emb["vector"], emb["content_hash"], emb["created_at"]),
            )
        copied += 1
    deleted = execute_project_purge(tx, purge)
    return {**base, "dry_run": False, "pages_copied": copied, "pages_identical": identical,
            "conflicts": conflicts, "source_purge": deleted, "source_purged": True}


@handler("project.move")
def project_move(tx: Tx, env: Envelope, cmd: ProjectMove) -> dict:
    src = tx.scope()
    if cmd.to_workspace == src.workspace:
        raise UnprocessableError("source and destination workspace are the same; use rename-project",
                                 data={"reason": "same_workspace"})
    live = live_sessions(tx.conn, src.project_id, tx.now)
    if live and not cmd.force:
        raise ConflictError(
            f"project {src.workspace}/{src.project} has {len(live)} live session(s); pass force to move it anyway",
            code="live_session", data={"sessions": live[:20]})
    workstreams.refuse_live_lease(workstreams.live_leases(tx.conn, tx.now, project_id=src.project_id),
                                  f"project {src.workspace}/{src.project}", "move", cmd.force)
    dest = scopes.find(tx.conn, cmd.to_workspace, src.project)
    if dest is None:
        out = _true_move(tx, src, cmd.to_workspace, cmd.dry_run)
    else:
        out = _merge(tx, src, dest, cmd.on_conflict, cmd.dry_run)
    if not cmd.dry_run:
        detail = {k: out[k] for k in ("moved_via", "to") if k in out}
        detail["conflicts"] = out.get("conflicts", [])
        tx.audit("project.move", f"{src.workspace}/{src.project}", detail, scope=src)
        tx.emit("project.moved", {"project_id": src.project_id, "to_workspace": cmd.to_workspace,
                                  "moved_via": out["moved_via"]})
    return out


# -- session.move ----------------------------------------------------------------------------
_PER_SESSION_TABLES = ("observations", "session_consolidation_jobs", "auto_improve_runs")


def _scope_names(conn: sqlite3.Connection, project_id: str) -> dict[str, str]:
    s = scopes.find_by_id(conn, project_id)
    return {"workspace": s.workspace, "project": s.project} if s else {"workspace": "?", "project": "?"}


def _move_one(tx: Tx, sid: str, row: sqlite3.Row, dest: Scope | None, cmd: SessionMove,
              dry_run: bool) -> dict[str, Any]:
    """Move session ``sid`` (its ``sessions`` row is ``row``) into ``dest``.

    ``dest`` is None only in a dry run whose destination would be created.
    """
    conn = tx.conn
    src_pid = row["project_id"]
    dest_pid = dest.project_id if dest else None
    rehome = src_pid == dest_pid
    if not rehome and row["ended_at"] is None and not cmd.force:
        raise ConflictError("session is still open; pass force to move it anyway", code="session_open",
                            data={"session_id": sid})
    pending = conn.execute(
        "SELECT count(*) FROM session_consolidation_jobs WHERE session_id = ? AND status IN ('pending', 'leased')",
        (sid,)).fetchone()[0]
    if pending and not cmd.force:
        raise ConflictError("session has a pending consolidation job; pass force", code="consolidation_pending",
                            data={"session_id": sid})
    src_scope = tx.scope_by_ids(row["workspace_id"], src_pid)
    source_scopes = [
        {**_scope_names(conn, r["project_id"]), "observations": r["n"]}
        for r in conn.execute(
            "SELECT project_id, count(*) AS n FROM observations WHERE session_id = ? AND project_id IS NOT ?"
            " GROUP BY project_id ORDER BY project_id", (sid, dest_pid)).fetchall()
    ]
    summary = {
        "observations": conn.execute(
            "SELECT count(*) FROM observations WHERE session_id = ? AND project_id IS NOT ?", (sid, dest_pid)
        ).fetchone()[0],
        "handoffs": conn.execute(
            "SELECT count(*) FROM handoffs WHERE from_session_id = ? AND project_id IS NOT ?", (sid, dest_pid)
        ).fetchone()[0],
        "consolidation_jobs": conn.execute(
            "SELECT count(*) FROM session_consolidation_jobs WHERE session_id = ? AND project_id IS NOT ?",
            (sid, dest_pid)).fetchone()[0],
        "auto_improve_runs": conn.execute(
            "SELECT count(*) FROM auto_improve_runs WHERE session_id = ? AND project_id IS NOT ?", (sid, dest_pid)
        ).fetchone()[0],
        "page_versions_moved": 0,
        "pages_regenerated": 0,
    }
    page_rows = conn.execute(
        "SELECT id, path, is_latest FROM pages WHERE session_id = ? AND project_id = ?", (sid, src_pid)).fetchall()
    page_state = "none"
    if page_rows and rehome:
        page_state = "already in destination"
    elif page_rows:
        latest = [r for r in page_rows if r["is_latest"]]
        if cmd.pages == "move":
            for r in latest:
                clash = dest_pid and conn.execute(
                    "SELECT 1 FROM pages WHERE project_id = ? AND path = ? AND is_latest = 1", (dest_pid, r["path"])
                ).fetchone()
                on_disk = dest is not None and (tx.wiki.root / tx.wiki.rel(dest, r["path"])).exists()
                if clash or on_disk:
                    raise ConflictError(
                        f"destination already has {r['path']}; use pages=regenerate or resolve it first",
                        code="page_exists", data={"path": r["path"]})
            summary["page_versions_moved"] = len(page_rows)
            page_state = "moved"
        else:
            summary["pages_regenerated"] = len(latest)
            page_state = "regenerated"
    report = {
        "session_id": sid, "session_moved": not rehome,
        "from": {"workspace": src_scope.workspace, "project": src_scope.project},
        "to": {"workspace": dest.workspace, "project": dest.project} if dest else
              {"workspace": cmd.to_workspace or src_scope.workspace, "project": cmd.to_project},
        "summary": summary, "page": page_state, "cwd": row["cwd"], "source_scopes": source_scopes,
    }
    if row["cwd"] and PurePosixPath(row["cwd"]).name != report["to"]["project"]:
        report["cwd_warning"] = (f"new sessions in {row['cwd']} still resolve to project "
                                 f"{PurePosixPath(row['cwd']).name!r} by basename")
    if dest is None:
        return report
    # -- apply (also in a dry run: the caller rolls the savepoint back) ----------------------
    wid, pid = dest.workspace_id, dest.project_id
    if not rehome:
        conn.execute("UPDATE sessions SET workspace_id = ?, project_id = ? WHERE id = ?", (wid, pid, row["id"]))
    for table in _PER_SESSION_TABLES:
        conn.execute(f"UPDATE OR REPLACE {table} SET workspace_id = ?, project_id = ?"
                     " WHERE session_id = ? AND project_id != ?", (wid, pid, sid, pid))
    conn.execute("UPDATE handoffs SET workspace_id = ?, project_id = ? WHERE from_session_id = ? AND project_id != ?",
                 (wid, pid, sid, pid))
    if page_rows and not rehome:
        ids = [r["id"] for r in page_rows]
        marks = ",".join("?" * len(ids))
        latest = [r for r in page_rows if r["is_latest"]]
        if cmd.pages == "move":
            for table in ("pages", "links", "page_feedback", "page_evidence"):
                col = "id" if table == "pages" else ("from_page_id" if table == "links" else "page_id")
                conn.execute(f"UPDATE {table} SET workspace_id = ?, project_id = ? WHERE {col} IN ({marks})",
                             (wid, pid, *ids))
            conn.execute(f"UPDATE page_embeddings SET workspace_id = ?, project_id = ? WHERE page_id IN ({marks})",
                         (wid, pid, *ids))
            tx.pages.relink_entities(dest, ids)
            # Readers keep chunk vectors in memory with their page's project and load only rows
            # above the last id they saw: new ids make them reload these pages' rows.
            conn.execute(f"UPDATE page_chunk_embeddings SET id = id + (SELECT max(id) FROM page_chunk_embeddings)"
                         f" WHERE page_id IN ({marks})", ids)
            if not dry_run:
                for r in latest:
                    src_file = tx.wiki.root / tx.wiki.rel(src_scope, r["path"])
                    if src_file.is_file():
                        tx.wiki.write(dest, r["path"], src_file.read_text("utf-8"))
                    tx.wiki.delete(src_scope, r["path"])
        else:
            conn.execute(f"UPDATE pages SET is_latest = 0, retired_reason = 'moved', superseded_at = ?"
                         f" WHERE id IN ({marks}) AND is_latest = 1", (tx.now, *ids))
            conn.execute(f"UPDATE sessions SET summary_page_id = NULL WHERE summary_page_id IN ({marks})", ids)
            if not dry_run:
                for r in latest:
                    tx.wiki.delete(src_scope, r["path"])
    if not dry_run:
        tx.audit("session.move", sid, {"from": report["from"], "to": report["to"], "summary": summary,
                                       "page": page_state}, scope=dest)
        tx.emit("session.moved", {"session_id": sid, "to_workspace": dest.workspace, "to_project": dest.project})
    return report


def _session_row(conn: sqlite3.Connection, sid: str, prefer_pid: str | None = None) -> sqlite3.Row:
    rows = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (sid,)).fetchall()
    if not rows:
        raise NotFoundError("session not found", data={"session_id": sid})
    if len(rows) > 1:
        pick = [r for r in rows if r["project_id"] == prefer_pid]
        if len(pick) == 1:
            return pick[0]
        raise ConflictError("session id exists in several projects; purge or move the others first",
                            code="ambiguous_session", data={"session_id": sid, "projects": len(rows)})
    return rows[0]


@handler("session.move")
def session_move(tx: Tx, env: Envelope, cmd: SessionMove) -> dict:
    conn = tx.conn
    if cmd.session_id is not None:
        row = _session_row(conn, cmd.session_id)
        src_ws_name = _scope_names(conn, row["project_id"])["workspace"]
        sids = [(cmd.session_id, row)]
        batch = False
    else:
        src = tx.resolve_scope(cmd.from_workspace, cmd.from_project or "")
        src_ws_name = src.workspace
        batch = True
        found = conn.execute(
            "SELECT session_id FROM sessions WHERE project_id = ? UNION"
            " SELECT DISTINCT session_id FROM observations WHERE project_id = ? ORDER BY 1",
            (src.project_id, src.project_id)).fetchall()
        sids = []
        for r in found:
            try:
                sids.append((r["session_id"], _session_row(conn, r["session_id"], prefer_pid=src.project_id)))
            except NotFoundError:
                continue  # observations of a session without a row: nothing to anchor a move on
    to_ws = cmd.to_workspace or src_ws_name
    dry = cmd.dry_run
    would_create = False
    try:
        dest: Scope | None = tx.resolve_scope(to_ws, cmd.to_project)
    except NotFoundError:
        if not cmd.create:
            raise NotFoundError(f"destination {to_ws}/{cmd.to_project} not found (pass create)",
                                data={"workspace": to_ws, "project": cmd.to_project}) from None
        would_create = True
        dest = None if dry else tx.resolve_scope(to_ws, cmd.to_project, create=True)
    if batch and dest is not None and dest.project_id == src.project_id:
        raise UnprocessableError("source and destination project are the same", data={"reason": "same_project"})
    reports = []
    if dry:
        conn.execute("SAVEPOINT session_move_dry")
    try:
        for sid, row in sids:
            reports.append(_move_one(tx, sid, row, dest, cmd, dry))
    finally:
        if dry:
            conn.execute("ROLLBACK TO session_move_dry")
            conn.execute("RELEASE session_move_dry")
    if not dry:
        forget_cached_scopes(tx)
    extra = {"would_create_project": True} if (dry and would_create) else {}
    if not batch:
        return {**reports[0], "dry_run": dry, **extra}
    return {"dry_run": dry, **extra, "from": {"workspace": cmd.from_workspace, "project": cmd.from_project},
            "to": {"workspace": to_ws, "project": cmd.to_project}, "total": len(sids),
            "moved": sum(1 for r in reports if r["session_moved"]), "sessions": reports}



@handler("session.reorg")
def session_reorg(tx: Tx, env: Envelope, cmd: SessionReorg) -> dict:
    """Move every session of ``cmd.locations`` to the project its cwd resolves to now.

    The destination of a location is found exactly as a hook event from there would find
    it (``scopes.lookup``; a confirmed run creates a missing project through
    ``Tx.resolve_scope``, which also records a new root as an alias, as the hook does). A
    session is ``unchanged`` when it is there already, ``moved`` (or would be), or
    ``skipped`` with the writer's error code (``session_open`` without ``force``,
    ``page_exists``, ``consolidation_pending``); a skipped session is left as it was.
    """
    conn = tx.conn
    dry = cmd.dry_run
    default_ws = tx.settings.workspace_default
    only_pid = None
    if cmd.from_project is not None:
        only_pid = tx.resolve_scope(cmd.from_workspace or default_ws, cmd.from_project).project_id
    only_wid = scopes.workspace_id(conn, cmd.from_workspace) if cmd.from_workspace else None
    if cmd.from_workspace and only_wid is None:
        raise NotFoundError(f"workspace {cmd.from_workspace!r} not found", data={"workspace": cmd.from_workspace})
    moved: list[dict] = []
    skipped: list[dict] = []
    unchanged = 0
    created: list[dict] = []
    if dry:
        conn.execute("SAVEPOINT session_reorg_dry")
    try:
        for loc in cmd.locations:
            rows = [r for r in conn.execute("SELECT * FROM sessions WHERE cwd = ? ORDER BY started_at, id",
                                            (loc.cwd,)).fetchall()
                    if (only_pid is None or r["project_id"] == only_pid)
                    and (only_wid is None or r["workspace_id"] == only_wid)]
            if not rows:
                continue
            ws = loc.workspace or default_ws
            dest = scopes.lookup(conn, ws, loc.project, root=loc.root, origin=loc.origin, explicit=loc.explicit,
                                 repo_id=loc.repo_id)
            to = ({"workspace": dest.workspace, "project": dest.project} if dest else
                  {"workspace": ws, "project": loc.project if loc.explicit or not (loc.root or loc.origin or loc.repo_id)
                   else scopes.free_project_name(conn, ws, loc.project)})
            pending = [r for r in rows if dest is None or r["project_id"] != dest.project_id]
            unchanged += len(rows) - len(pending)
            if dest is None and pending:
                # A project this folder would create: probe first (with no destination the
                # per-session step only checks and counts), so a run whose every session is
                # skipped creates nothing.
                probes = [(row, _try_move(tx, row, None, cmd, True, loc.cwd, to, skipped)) for row in pending]
                pending = [row for row, report in probes if report is not None]
                if pending:
                    if to not in created:
                        created.append(dict(to))
                    if dry:
                        moved += [{**report, "to": to} for _, report in probes if report is not None]
                        continue
                    dest = tx.resolve_scope(ws, loc.project, create=True, root=loc.root, origin=loc.origin,
                                            explicit=loc.explicit, repo_id=loc.repo_id)
                    to = {"workspace": dest.workspace, "project": dest.project}
            for row in pending:
                report = _try_move(tx, row, dest, cmd, dry, loc.cwd, to, skipped)
                if report is not None:
                    moved.append({**report, "to": to})
    finally:
        if dry:
            conn.execute("ROLLBACK TO session_reorg_dry")
            conn.execute("RELEASE session_reorg_dry")
    if not dry and moved:
        forget_cached_scopes(tx)
    for report in moved:
        report.pop("cwd_warning", None)
    return {"dry_run": dry, "moved": len(moved), "unchanged": unchanged, "skipped": skipped,
            "created_projects": created, "sessions": moved,
            "summary": {k: sum(r["summary"][k] for r in moved) for k in
                        ("observations", "handoffs", "page_versions_moved", "pages_regenerated")}}


def _try_move(tx: Tx, row: sqlite3.Row, dest: Scope | None, cmd: SessionReorg, dry: bool, cwd: str,
              to: dict, skipped: list[dict]) -> dict | None:
    """One session's ``session.move`` step inside a savepoint: its report, or ``None`` after
    recording why it was skipped (the session then stays exactly as it was)."""
    conn = tx.conn
    conn.execute("SAVEPOINT session_reorg_one")
    try:
        step = SessionMove(session_id=row["session_id"], to_workspace=to["workspace"], to_project=to["project"],
                           pages=cmd.pages, force=cmd.force, dry_run=dry)
        return _move_one(tx, row["session_id"], row, dest, step, dry)
    except (ConflictError, UnprocessableError) as exc:
        conn.execute("ROLLBACK TO session_reorg_one")
        skipped.append({"session_id": row["session_id"], "cwd": cwd, "from": _scope_names(conn, row["project_id"]),
                        "to": to, "reason": exc.code, "message": exc.message})
        return None
    finally:
        conn.execute("RELEASE session_reorg_one")
