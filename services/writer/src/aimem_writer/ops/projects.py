"""Project and session lifecycle op handlers.

``project.purge``, ``workspace.purge``, ``session.purge``, ``project.rename``,
``workspace.rename``, and the purge plans the moves reuse.

Moves (``project.move``, ``session.move``) live in ``ops/moves.py``; page restore and
checkpoints in ``ops/checkpoints.py``; users, keys and grants in ``ops/users.py``. Every handler
runs on the writer thread inside the batch transaction (see ``aimem_writer.tx``).

Previews: a destructive op with ``dry_run`` calls the same ``*_plan`` function the
confirmed run uses to decide what to delete and returns its counts without touching a row,
a file, or the audit log; the confirmed run executes that plan and reports the deleted
row counts, which equal the preview's because both run in one transaction's snapshot.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from aimem_common.db.trigram import pages_tri_insert_sql, rebuild_observations_tri
from aimem_common.errors import (
    AimemError,
    ConflictError,
    NotFoundError,
    UnprocessableError,
)
from aimem_common.read import scopes
from aimem_common.models import Scope, validate_name
from aimem_common.commands import Envelope
from aimem_common.commands.admin import (
    HandoffExpireAll,
    ProjectPurge,
    ProjectRename,
    SessionPurge,
    WorkspacePurge,
    WorkspaceRename,
)
from aimem_common.wikifmt import META_FILE, render_meta

from aimem_writer.forget import forget_stored_text
from aimem_writer.ops import workstreams
from aimem_writer.ops.profile import purge_entries
from aimem_writer.page_store import PageInput
from aimem_writer.registry import handler
from aimem_writer.tombstones import record as record_tombstone, scrub_ledgers
from aimem_writer.tx import Tx

LIVE_WINDOW_S = 300  # an unended session with an event this recent counts as live


# -- shared helpers (also used by ops/moves.py) ------------------------------------------
def forget_cached_scopes(tx: Tx) -> None:
    """Drop the batch's name→id scope cache: names were renamed, moved or deleted."""
    for cache in (getattr(tx, "_batch_scopes", None), getattr(tx, "new_scopes", None)):
        if cache is not None:
            cache.by_name.clear()


VACUUM_PENDING = "pending"  # a compaction's reply until the VACUUM after its commit has run


def compact(tx: Tx) -> dict[str, Any]:
    """Rebuild the FTS indexes now; the settlement VACUUMs after the commit.

    An FTS5 'rebuild' drops the deleted rows' tokens from the index segments; VACUUM then
    releases the freed pages (it cannot run inside the batch transaction). Returns
    ``{"fts_rebuilt": True, "vacuum": "pending"}``; after the commit the settlement replaces
    ``vacuum`` with what the VACUUM did (``settlement.vacuum_requests``).
    """
    tx.conn.execute("INSERT INTO observations_fts(observations_fts) VALUES ('rebuild')")
    # The page indexes hold live versions only ('rebuild' would read every version of the
    # content table): empty them and re-insert what their triggers would have indexed.
    tx.conn.execute("INSERT INTO pages_fts(pages_fts) VALUES ('delete-all')")
    tx.conn.execute("INSERT INTO pages_fts(rowid, title, body, project_id)"
                    " SELECT id, title, body, project_id FROM pages WHERE is_latest = 1")
    tx.conn.execute("INSERT INTO pages_tri(pages_tri) VALUES ('delete-all')")
    tx.conn.execute(pages_tri_insert_sql())  # padded as its triggers index (migration 12)
    rebuild_observations_tri(tx.conn)  # contentless as pages_tri: no 'rebuild' (migration 13)
    return {"fts_rebuilt": True, "vacuum": VACUUM_PENDING}


def _ids(rows: list[sqlite3.Row], key: str = "id") -> list[Any]:
    return [r[key] for r in rows]


def _in(ids: list[Any]) -> str:
    return ",".join("?" * len(ids)) or "NULL"


def live_sessions(conn: sqlite3.Connection, project_id: str, now: str) -> list[str]:
    """Return ids of the project's unended sessions with an event in the last LIVE_WINDOW_S."""
    cutoff = (_parse(now) - timedelta(seconds=LIVE_WINDOW_S)).isoformat()
    rows = conn.execute(
        "SELECT session_id, last_event_at FROM sessions WHERE project_id = ? AND ended_at IS NULL",
        (project_id,),
    ).fetchall()
    return [r["session_id"] for r in rows if _parse(r["last_event_at"]).isoformat() >= cutoff]


def _parse(ts: str) -> datetime:
    try:
        dt = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return datetime.min.replace(tzinfo=UTC)
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def project_tables(conn: sqlite3.Connection) -> list[str]:
    """Return every table with both ``workspace_id`` and ``project_id`` columns (re-stamps)."""
    out = []
    for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE '%VIRTUAL%'"
    ).fetchall():
        cols = {r[1] for r in conn.execute(f"PRAGMA table_info({name})").fetchall()}
        if {"workspace_id", "project_id"} <= cols:
            out.append(name)
    return out


# -- project.purge -------------------------------------------------------------------------
@dataclass(slots=True)
class ProjectPlan:
    """What purging one project deletes (ids decided once, counts derived from them)."""

    scope: Scope
    session_ids: list[str]
    counts: dict[str, int] = field(default_factory=dict)
    collateral_obs_ids: list[int] = field(default_factory=list)
    collateral_handoff_ids: list[int] = field(default_factory=list)


def project_plan(conn: sqlite3.Connection, scope: Scope) -> ProjectPlan:
    """Count everything a purge of ``scope`` deletes, including the cross-project rows."""
    pid = scope.project_id
    sids = _ids(conn.execute("SELECT session_id FROM sessions WHERE project_id = ?", (pid,)).fetchall(), "session_id")
    q = lambda sql: conn.execute(sql, (pid,)).fetchone()[0]  # noqa: E731
    counts = {
        "pages_deleted": q("SELECT count(*) FROM pages WHERE project_id = ? AND is_latest = 1"),
        "page_versions_deleted": q("SELECT count(*) FROM pages WHERE project_id = ?"),
        "sessions_deleted": len(sids),
        "observations_deleted": q("SELECT count(*) FROM observations WHERE project_id = ?"),
        "handoffs_deleted": q("SELECT count(*) FROM handoffs WHERE project_id = ?"),
        "embeddings_deleted": q(
            "SELECT count(*) FROM page_embeddings WHERE page_id IN (SELECT id FROM pages WHERE project_id = ?)"
        ),
        "links_deleted": q("SELECT count(*) FROM links WHERE project_id = ?"),
        "workstreams_deleted": q("SELECT count(*) FROM workstreams WHERE project_id = ?"),
        "workstream_events_deleted": q("SELECT count(*) FROM workstream_events WHERE project_id = ?"),
        "managed_runs_deleted": q("SELECT count(*) FROM managed_runs WHERE project_id = ?"),
        "messages_deleted": conn.execute(
            "SELECT count(*) FROM agent_messages WHERE from_project_id = ? OR to_project_id = ?", (pid, pid)
        ).fetchone()[0],
    }
    plan = ProjectPlan(scope, sids, counts)
    if sids:
        # Another project's observations of these sessions go too, unless that project has its
        # own sessions row for the same id (then the rows are that session's).
        plan.collateral_obs_ids = _ids(conn.execute(
            f"SELECT o.id FROM observations o WHERE o.session_id IN ({_in(sids)}) AND o.project_id != ?"
            " AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.project_id = o.project_id"
            " AND s.session_id = o.session_id)",
            (*sids, pid),
        ).fetchall())
        plan.collateral_handoff_ids = _ids(conn.execute(
            f"SELECT id FROM handoffs WHERE project_id != ? AND (from_session_id IN ({_in(sids)})"
            f" OR accepted_session_id IN ({_in(sids)}))",
            (pid, *sids, *sids),
        ).fetchall())
    counts["collateral_observations_deleted"] = len(plan.collateral_obs_ids)
    counts["collateral_handoffs_denulled"] = len(plan.collateral_handoff_ids)
    return plan


def execute_project_purge(tx: Tx, plan: ProjectPlan) -> dict[str, int]:
    """Delete what ``plan`` names (one cascade + the collateral rows); return deleted counts."""
    conn, pid, sids = tx.conn, plan.scope.project_id, plan.session_ids
    n_obs_coll = 0
    if plan.collateral_obs_ids:
        n_obs_coll = conn.execute(
            f"DELETE FROM observations WHERE id IN ({_in(plan.collateral_obs_ids)})", plan.collateral_obs_ids
        ).rowcount
    n_ho_coll = 0
    if plan.collateral_handoff_ids:
        ids = plan.collateral_handoff_ids
        conn.execute(
            f"UPDATE handoffs SET from_session_id = NULL WHERE id IN ({_in(ids)})"
            f" AND from_session_id IN ({_in(sids)})", (*ids, *sids))
        conn.execute(
            f"UPDATE handoffs SET accepted_session_id = NULL WHERE id IN ({_in(ids)})"
            f" AND accepted_session_id IN ({_in(sids)})", (*ids, *sids))
        n_ho_coll = len(ids)
    q = lambda sql, args=(pid,): conn.execute(sql, args).fetchone()[0]  # noqa: E731
    deleted = {
        "pages_deleted": q("SELECT count(*) FROM pages WHERE project_id = ? AND is_latest = 1"),
        "page_versions_deleted": q("SELECT count(*) FROM pages WHERE project_id = ?"),
        "embeddings_deleted": q(
            "SELECT count(*) FROM page_embeddings WHERE page_id IN (SELECT id FROM pages WHERE project_id = ?)"),
        "links_deleted": q("SELECT count(*) FROM links WHERE project_id = ?"),
    }
    # page_embeddings has no project FK; it cascades through page_id. The rest cascades from
    # projects (ON DELETE CASCADE), firing the FTS delete triggers row by row.
    # Ledger rows explicitly, and their raw JSONL segments after the commit (workstreams and
    # managed runs then cascade).
    deleted["workstream_events_deleted"] = workstreams.purge_project_ledger(tx, pid)
    deleted["workstreams_deleted"] = q("SELECT count(*) FROM workstreams WHERE project_id = ?")
    deleted["managed_runs_deleted"] = q("SELECT count(*) FROM managed_runs WHERE project_id = ?")
    deleted["observations_deleted"] = conn.execute("DELETE FROM observations WHERE project_id = ?", (pid,)).rowcount
    deleted["handoffs_deleted"] = conn.execute("DELETE FROM handoffs WHERE project_id = ?", (pid,)).rowcount
    deleted["sessions_deleted"] = conn.execute("DELETE FROM sessions WHERE project_id = ?", (pid,)).rowcount
    deleted["messages_deleted"] = conn.execute(
        "DELETE FROM agent_messages WHERE from_project_id = ? OR to_project_id = ?", (pid, pid)).rowcount
    conn.execute("DELETE FROM pages WHERE project_id = ?", (pid,))
    conn.execute("DELETE FROM projects WHERE id = ?", (pid,))
    deleted["collateral_observations_deleted"] = n_obs_coll
    deleted["collateral_handoffs_denulled"] = n_ho_coll
    tx.wiki.purge_rel(f"{plan.scope.workspace_id}/{pid}", tx.cmd_id)
    forget_cached_scopes(tx)
    return deleted


@handler("project.purge")
def project_purge(tx: Tx, env: Envelope, cmd: ProjectPurge) -> dict:
    scope = tx.scope()
    live = live_sessions(tx.conn, scope.project_id, tx.now)
    if live and not cmd.force:
        raise ConflictError(
            f"project {scope.workspace}/{scope.project} has {len(live)} live session(s); finish them or pass force",
            code="live_session", data={"sessions": live[:20]},
        )
    workstreams.refuse_live_lease(workstreams.live_leases(tx.conn, tx.now, project_id=scope.project_id),
                                  f"project {scope.workspace}/{scope.project}", "purge", cmd.force)
    plan = project_plan(tx.conn, scope)
    label = f"{scope.workspace}/{scope.project}"
    base = {"label": label, "workspace": scope.workspace, "project": scope.project,
            "files_deleted": [], "files_failed": []}
    if cmd.dry_run:
        return {**base, **plan.counts, "profile_entries_deleted": purge_entries(
            tx.conn, project_ids=[scope.project_id], dry_run=True), "dry_run": True}
    stated_here = purge_entries(tx.conn, project_ids=[scope.project_id])  # what the user said there
    deleted = execute_project_purge(tx, plan)
    deleted["profile_entries_deleted"] = stated_here
    forgotten = forget_stored_text(tx, session_ids=plan.session_ids, project_ids=[scope.project_id],
                                   places=[(scope.workspace, scope.project)], hint=f"project {label}")
    # Tombstones (same transaction): the names refuse events from before the purge, each
    # session id refuses its late events wherever they land (aimem_writer.tombstones).
    tid = record_tombstone(tx, "project", scope, removed=deleted)
    for sid in plan.session_ids:
        record_tombstone(tx, "session", scope, removed={}, session_id=sid, parent_id=tid)
    out = {**base, **deleted, "dry_run": False, "files_deleted": [f"{scope.workspace_id}/{scope.project_id}"],
           "tombstone_id": tid, "forgotten": forgotten}
    if cmd.compact:
        out["compact"] = compact(tx)
    tx.audit("project.purge", label, {**deleted, "project_id": scope.project_id, "forced": cmd.force}, scope=scope)
    tx.emit("project.purged", {"workspace_id": scope.workspace_id, "project_id": scope.project_id})
    return out


# -- workspace.purge -----------------------------------------------------------------------
@handler("workspace.purge")
def workspace_purge(tx: Tx, env: Envelope, cmd: WorkspacePurge) -> dict:
    """Purge every project of a workspace and the workspace itself (one transaction).

    The dry run decides from the same plans, so its counts equal the confirmed run's.

    Raises:
        NotFoundError: no such workspace (``not_found``).
        ConflictError: ``live_session`` in one of its projects (unless ``force``).
    """
    wid = scopes.workspace_id(tx.conn, cmd.workspace)
    if wid is None:
        raise NotFoundError(f"workspace {cmd.workspace!r} not found", data={"workspace": cmd.workspace})
    projects = scopes.projects_of(tx.conn, wid)
    live = {p.project: ids for p in projects if (ids := live_sessions(tx.conn, p.project_id, tx.now))}
    if live and not cmd.force:
        raise ConflictError(f"workspace {cmd.workspace} has live sessions in {sorted(live)}; finish them or pass force",
                            code="live_session", data={"projects": {k: v[:20] for k, v in live.items()}})
    leases = [r for p in projects for r in workstreams.live_leases(tx.conn, tx.now, project_id=p.project_id)]
    workstreams.refuse_live_lease(leases, f"workspace {cmd.workspace}", "purge", cmd.force)
    plans = [project_plan(tx.conn, p) for p in projects]
    base = {"workspace": cmd.workspace, "projects": sorted(p.project for p in projects), "files_deleted": [],
            "files_failed": []}
    pids = [p.project_id for p in projects]
    if cmd.dry_run:
        return {**base, **_sum_counts(pl.counts for pl in plans), "projects_deleted": len(plans),
                "profile_entries_deleted": purge_entries(tx.conn, project_ids=pids, dry_run=True), "dry_run": True}
    stated_here = purge_entries(tx.conn, project_ids=pids)
    deleted = [execute_project_purge(tx, pl) for pl in plans]
    total = {**_sum_counts(deleted), "projects_deleted": len(plans), "profile_entries_deleted": stated_here}
    forgotten = forget_stored_text(tx, session_ids=[sid for pl in plans for sid in pl.session_ids], project_ids=pids,
                                   places=[(cmd.workspace, None)], hint=f"workspace {cmd.workspace}")
    tid = record_tombstone(tx, "workspace", Scope(cmd.workspace, "", wid, ""), removed=total, workspace_only=True)
    for pl, d in zip(plans, deleted):
        ptid = record_tombstone(tx, "project", pl.scope, removed=d, parent_id=tid)
        for sid in pl.session_ids:
            record_tombstone(tx, "session", pl.scope, removed={}, session_id=sid, parent_id=ptid)
    tx.conn.execute("DELETE FROM workspaces WHERE id = ?", (wid,))
    tx.wiki.purge_rel(wid, tx.cmd_id)
    forget_cached_scopes(tx)
    out = {**base, **total, "dry_run": False, "files_deleted": [wid], "tombstone_id": tid, "forgotten": forgotten}
    if cmd.compact:
        out["compact"] = compact(tx)
    tx.audit("workspace.purge", cmd.workspace, {**total, "workspace_id": wid, "forced": cmd.force})
    tx.emit("workspace.purged", {"workspace_id": wid, "workspace": cmd.workspace})
    return out


def _sum_counts(counts) -> dict[str, int]:
    """Add up count dicts key by key (a workspace purge's projects)."""
    out: dict[str, int] = {}
    for c in counts:
        for k, n in c.items():
            out[k] = out.get(k, 0) + n
    return out


# -- handoff.expire_all --------------------------------------------------------------------
@handler("handoff.expire_all")
def handoff_expire_all(tx: Tx, env: Envelope, cmd: HandoffExpireAll) -> dict:
    """Expire the project's open handoffs (``older_than_days``: opened that long ago or more).
    Result ``{expired: [ids], count, dry_run}``; the dry run lists the same ids."""
    scope = tx.scope(create=False)
    rows = tx.conn.execute("SELECT id, created_at FROM handoffs WHERE project_id = ? AND status = 'open' ORDER BY id",
                           (scope.project_id,)).fetchall()
    if cmd.older_than_days is not None:  # compared as instants: stored stamps vary in precision
        cutoff = _parse(tx.now) - timedelta(days=cmd.older_than_days)
        rows = [r for r in rows if _parse(r["created_at"]) <= cutoff]
    ids = [r["id"] for r in rows]
    out = {"workspace": scope.workspace, "project": scope.project, "expired": ids, "count": len(ids),
           "dry_run": cmd.dry_run}
    if cmd.dry_run or not ids:
        return out
    tx.conn.execute(f"UPDATE handoffs SET status = 'expired', closed_at = ? WHERE id IN ({_in(ids)})",
                    (tx.now, *ids))
    tx.audit("handoff.expire_all", f"{scope.workspace}/{scope.project}",
             {"ids": ids, "older_than_days": cmd.older_than_days}, scope=scope)
    for hid in ids:
        tx.emit("handoff.cancelled", {"handoff_id": hid})
    return out


# -- session.purge -------------------------------------------------------------------------
def session_plan(conn: sqlite3.Connection, scope: Scope, sid: str) -> dict[str, Any]:
    """Decide what purging session ``sid`` of ``scope`` deletes (ids and counts).

    Raises:
        NotFoundError: the session is not in this project (nothing is looked at elsewhere).
    """
    pid = scope.project_id
    row = conn.execute("SELECT id FROM sessions WHERE project_id = ? AND session_id = ?", (pid, sid)).fetchone()
    if row is None:
        raise NotFoundError(f"session not found in {scope.workspace}/{scope.project}", data={"session_id": sid})
    obs = _ids(conn.execute("SELECT id FROM observations WHERE project_id = ? AND session_id = ?", (pid, sid)).fetchall())
    coll_obs = _ids(conn.execute(
        "SELECT o.id FROM observations o WHERE o.session_id = ? AND o.project_id != ? AND NOT EXISTS"
        " (SELECT 1 FROM sessions s WHERE s.project_id = o.project_id AND s.session_id = o.session_id)",
        (sid, pid)).fetchall())
    authored = _ids(conn.execute(
        "SELECT id FROM handoffs WHERE project_id = ? AND from_session_id = ?", (pid, sid)).fetchall())
    denull = _ids(conn.execute(
        "SELECT id FROM handoffs WHERE (project_id != ? AND (from_session_id = ? OR accepted_session_id = ?))"
        " OR (project_id = ? AND accepted_session_id = ? AND (from_session_id IS NULL OR from_session_id != ?))",
        (pid, sid, sid, pid, sid, sid)).fetchall())
    pages = conn.execute(
        "SELECT id, path, is_latest FROM pages WHERE project_id = ? AND session_id = ?", (pid, sid)).fetchall()
    page_ids = _ids(pages)
    emb = conn.execute(
        f"SELECT count(*) FROM page_embeddings WHERE page_id IN ({_in(page_ids)})", page_ids).fetchone()[0]
    jobs = conn.execute(
        "SELECT count(*) FROM session_consolidation_jobs WHERE project_id = ? AND session_id = ?", (pid, sid)
    ).fetchone()[0]
    runs = conn.execute(
        "SELECT count(*) FROM auto_improve_runs WHERE project_id = ? AND session_id = ?", (pid, sid)).fetchone()[0]
    run_ids = workstreams.session_runs(conn, pid, sid)
    return {
        "row_id": row["id"], "obs": obs, "coll_obs": coll_obs, "authored": authored, "denull": denull, "run_ids": run_ids,
        "page_ids": page_ids, "removed_paths": sorted({p["path"] for p in pages if p["is_latest"]}),
        "counts": {
            "observations_deleted": len(obs),
            "handoffs_deleted": len(authored),
            "pages_deleted": sum(1 for p in pages if p["is_latest"]),
            "page_versions_deleted": len(page_ids),
            "embeddings_deleted": emb,
            "consolidation_jobs_deleted": jobs,
            "auto_improve_runs_deleted": runs,
            "workstream_events_deleted": workstreams.count_run_events(conn, run_ids),
            "collateral_observations_deleted": len(coll_obs),
            "collateral_handoffs_denulled": sum(
                1 for h in denull if conn.execute("SELECT project_id FROM handoffs WHERE id = ?", (h,)).fetchone()[0] != pid
            ),
        },
    }


@handler("session.purge")
def session_purge(tx: Tx, env: Envelope, cmd: SessionPurge) -> dict:
    scope = tx.scope()
    sid = cmd.session_id
    plan = session_plan(tx.conn, scope, sid)
    workstreams.refuse_live_lease(workstreams.live_leases(tx.conn, tx.now, run_ids=plan["run_ids"]),
                                  f"session {sid}", "purge", cmd.force)
    base = {"workspace": scope.workspace, "project": scope.project, "session_id": sid,
            "removed_paths": plan["removed_paths"], "files_deleted": [], "files_failed": []}
    if cmd.dry_run:
        return {**base, **plan["counts"], "profile_entries_deleted": purge_entries(tx.conn, session_id=sid,
                                                                                   dry_run=True), "dry_run": True}
    conn, pid = tx.conn, scope.project_id
    d: dict[str, int] = {"profile_entries_deleted": purge_entries(conn, session_id=sid)}
    scrub_ledgers(tx, sid)  # the hook ledgers keep an excerpt of every event
    ids = plan["page_ids"]
    d["embeddings_deleted"] = conn.execute(
        f"SELECT count(*) FROM page_embeddings WHERE page_id IN ({_in(ids)})", ids).fetchone()[0]
    conn.execute(f"UPDATE sessions SET summary_page_id = NULL WHERE summary_page_id IN ({_in(ids)})", ids)
    conn.execute(f"UPDATE pages SET supersedes = NULL WHERE supersedes IN ({_in(ids)})", ids)
    d["pages_deleted"] = conn.execute(
        f"SELECT count(*) FROM pages WHERE id IN ({_in(ids)}) AND is_latest = 1", ids).fetchone()[0]
    d["page_versions_deleted"] = conn.execute(f"DELETE FROM pages WHERE id IN ({_in(ids)})", ids).rowcount
    d["workstream_events_deleted"] = workstreams.purge_run_events(tx, plan["run_ids"])  # and their segments
    d["observations_deleted"] = conn.execute(
        f"DELETE FROM observations WHERE id IN ({_in(plan['obs'])})", plan["obs"]).rowcount
    d["collateral_observations_deleted"] = conn.execute(
        f"DELETE FROM observations WHERE id IN ({_in(plan['coll_obs'])})", plan["coll_obs"]).rowcount
    d["handoffs_deleted"] = conn.execute(
        f"DELETE FROM handoffs WHERE id IN ({_in(plan['authored'])})", plan["authored"]).rowcount
    den = plan["denull"]
    conn.execute(f"UPDATE handoffs SET from_session_id = NULL WHERE id IN ({_in(den)}) AND from_session_id = ?",
                 (*den, sid))
    conn.execute(f"UPDATE handoffs SET accepted_session_id = NULL WHERE id IN ({_in(den)})"
                 " AND accepted_session_id = ?", (*den, sid))
    d["collateral_handoffs_denulled"] = plan["counts"]["collateral_handoffs_denulled"]
    d["consolidation_jobs_deleted"] = conn.execute(
        "DELETE FROM session_consolidation_jobs WHERE project_id = ? AND session_id = ?", (pid, sid)).rowcount
    d["auto_improve_runs_deleted"] = conn.execute(
        "DELETE FROM auto_improve_runs WHERE project_id = ? AND session_id = ?", (pid, sid)).rowcount
    conn.execute("DELETE FROM sessions WHERE id = ?", (plan["row_id"],))
    for path in plan["removed_paths"]:
        still = conn.execute(
            "SELECT 1 FROM pages WHERE project_id = ? AND path = ? AND is_latest = 1", (pid, path)).fetchone()
        if still is None:
            tx.wiki.purge_rel(tx.wiki.rel(scope, path), tx.cmd_id)
    forgotten = forget_stored_text(tx, session_ids=[sid], hint=f"session {sid}")
    tid = record_tombstone(tx, "session", scope, removed=d, session_id=sid)  # late events: refused and counted
    out = {**base, **d, "dry_run": False, "files_deleted": list(plan["removed_paths"]), "tombstone_id": tid,
           "forgotten": forgotten}
    if cmd.compact:
        out["compact"] = compact(tx)
    tx.audit("session.purge", sid, d, scope=scope)
    tx.emit("session.purged", {"session_id": sid, "paths": plan["removed_paths"]})
    return out


# -- renames ---------------------------------------------------------------------------------
def _check_new_name(value: str, what: str) -> str:
    try:
        return validate_name(value, what)
    except AimemError as exc:
        raise UnprocessableError(exc.message, data={"reason": "invalid_name"}) from exc


@handler("project.rename")
def project_rename(tx: Tx, env: Envelope, cmd: ProjectRename) -> dict:
    scope = tx.scope()
    to = _check_new_name(cmd.to, "project")
    if to == scope.project:
        raise UnprocessableError(f"project is already named {to!r}", data={"reason": "same_name"})
    if scopes.find(tx.conn, scope.workspace, to) is not None:
        raise UnprocessableError(f"name taken: {scope.workspace}/{to} exists", data={"reason": "name_taken"})
    workstreams.refuse_live_lease(workstreams.live_leases(tx.conn, tx.now, project_id=scope.project_id),
                                  f"project {scope.workspace}/{scope.project}", "rename", cmd.force)
    tx.conn.execute("UPDATE projects SET name = ? WHERE id = ?", (to, scope.project_id))
    tx.wiki.write_rel(
        f"{scope.workspace_id}/{scope.project_id}/{META_FILE}",
        render_meta("project", id=scope.project_id, name=to, workspace_id=scope.workspace_id,
                    workspace=scope.workspace, **scopes.manifest_keys(tx.conn, scope.project_id)),
    )
    forget_cached_scopes(tx)
    pages = tx.conn.execute(
        "SELECT count(*) FROM pages WHERE project_id = ? AND is_latest = 1", (scope.project_id,)).fetchone()[0]
    tx.audit("project.rename", f"{scope.workspace}/{to}", {"from": scope.project, "to": to}, scope=scope)
    tx.emit("project.renamed", {"from": scope.project, "to": to, "project_id": scope.project_id})
    return {"workspace": scope.workspace, "from": scope.project, "to": to, "project_id": scope.project_id,
            "pages": pages}


@handler("workspace.rename")
def workspace_rename(tx: Tx, env: Envelope, cmd: WorkspaceRename) -> dict:
    wid = scopes.workspace_id(tx.conn, cmd.workspace)
    if wid is None:
        raise NotFoundError(f"workspace {cmd.workspace!r} not found", data={"workspace": cmd.workspace})
    to = _check_new_name(cmd.to, "workspace")
    if to == cmd.workspace:
        raise UnprocessableError(f"workspace is already named {to!r}", data={"reason": "same_name"})
    if scopes.workspace_id(tx.conn, to) is not None:
        raise UnprocessableError(f"name taken: workspace {to!r} exists", data={"reason": "name_taken"})
    tx.conn.execute("UPDATE workspaces SET name = ? WHERE id = ?", (to, wid))
    tx.wiki.write_rel(f"{wid}/{META_FILE}", render_meta("workspace", id=wid, name=to))
    projects = scopes.projects_of(tx.conn, wid)
    for p in projects:
        tx.wiki.write_rel(f"{wid}/{p.project_id}/{META_FILE}",
                          render_meta("project", id=p.project_id, name=p.project, workspace_id=wid, workspace=to,
                                      **scopes.manifest_keys(tx.conn, p.project_id)))
    forget_cached_scopes(tx)
    tx.audit("workspace.rename", to, {"from": cmd.workspace, "to": to, "workspace_id": wid})
    tx.emit("workspace.renamed", {"from": cmd.workspace, "to": to, "workspace_id": wid})
    return {"from": cmd.workspace, "to": to, "workspace_id": wid, "manifests_refreshed": len(projects) + 1}
