"""Store-wide or per-project counts, schema and software versions (``memory_status``)."""

from __future__ import annotations

import sqlite3
from importlib import metadata
from typing import Any

from aimem_common.db.connect import schema_version
from aimem_common.models import Scope
from aimem_common.read import scopes


def package_version(dist: str = "aimem-common") -> str:
    """Return the installed version of ``dist`` (``"unknown"`` when not installed)."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def counts(conn: sqlite3.Connection, scope: Scope | None = None) -> dict[str, int]:
    """Return row counts, store-wide or for one ``scope``.

    Keys: ``workspaces``, ``projects`` (store-wide only), ``pages`` (live),
    ``page_versions``, ``sessions``, ``sessions_open``, ``observations``, ``handoffs_open``,
    ``messages_pending`` (inbox), ``embeddings``, ``links``, ``entities``.
    """
    where, args = ("", ()) if scope is None else (" WHERE project_id = ?", (scope.project_id,))
    and_ = " AND " if scope is not None else " WHERE "

    def one(sql: str, a: tuple = args) -> int:
        return int(conn.execute(sql, a).fetchone()[0])

    out: dict[str, int] = {}
    if scope is None:
        out.update(scopes.counts(conn))
    out["pages"] = one("SELECT count(*) FROM pages" + where + and_ + "is_latest = 1")
    out["page_versions"] = one("SELECT count(*) FROM pages" + where)
    out["sessions"] = one("SELECT count(*) FROM sessions" + where)
    out["sessions_open"] = one("SELECT count(*) FROM sessions" + where + and_ + "ended_at IS NULL")
    out["observations"] = one("SELECT count(*) FROM observations" + where)
    out["handoffs_open"] = one("SELECT count(*) FROM handoffs" + where + and_ + "status = 'open'")
    msg_where = "" if scope is None else " WHERE to_project_id = ?"
    out["messages_pending"] = one(
        "SELECT count(*) FROM agent_messages" + msg_where + (" AND " if scope else " WHERE ") + "status = 'pending'"
    )
    out["embeddings"] = one("SELECT count(*) FROM page_embeddings" + where)
    out["links"] = one("SELECT count(*) FROM links" + where)
    out["entities"] = one("SELECT count(*) FROM entities" + where)
    return out


def status(conn: sqlite3.Connection, scope: Scope | None = None) -> dict[str, Any]:
    """Return ``{"counts": counts(...), "schema_version", "sqlite_version", "version",
    "db_bytes", "last_page_update": str|None}`` (``db_bytes`` = page_count × page_size); for
    one project also ``workspace``, ``project``, ``root``, ``origin`` and ``aliases`` (the other
    roots it has been seen at: a moved, renamed or second checkout; ``[]`` when none)."""
    page_count = conn.execute("PRAGMA page_count").fetchone()[0]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    where, args = ("", ()) if scope is None else (" WHERE project_id = ?", (scope.project_id,))
    last = conn.execute("SELECT max(updated_at) FROM pages" + where, args).fetchone()[0]
    out: dict[str, Any] = {
        "counts": counts(conn, scope),
        "schema_version": schema_version(conn),
        "sqlite_version": sqlite3.sqlite_version,
        "version": package_version(),
        "db_bytes": int(page_count) * int(page_size),
        "last_page_update": last,
    }
    if scope is not None and scope.project_id:
        keys = scopes.identity_keys(conn, scope.project_id)
        out.update(workspace=scope.workspace, project=scope.project, root=keys["root"], origin=keys["origin"],
                   aliases=scopes.root_aliases(conn, scope.project_id))
    elif scope is not None:
        out.update(workspace=scope.workspace, project=scope.project)
    return out


def status_of_projects(conn: sqlite3.Connection, allowed: list[Scope]) -> dict[str, Any]:
    """Return ``status`` restricted to the projects in ``allowed`` (what a scoped credential
    may read): ``counts`` summed over them (``projects``: how many, ``workspaces``: how many
    of theirs), ``last_page_update`` the newest among them, ``db_bytes`` None (the file is
    everyone's). An empty ``allowed`` gives zero counts."""
    total: dict[str, int] = {"workspaces": len({s.workspace_id for s in allowed}), "projects": len(allowed)}
    last: list[str] = []
    for scope in allowed:
        one = status(conn, scope)
        for key, value in one["counts"].items():
            total[key] = total.get(key, 0) + value
        if one["last_page_update"]:
            last.append(one["last_page_update"])
    base = status(conn, Scope(workspace="", project="", workspace_id="", project_id=""))  # zero counts, versions
    for key in ("workspace", "project"):
        base.pop(key, None)
    return {**base, "counts": {**base["counts"], **total}, "db_bytes": None,
            "last_page_update": max(last) if last else None}


def project_sizes(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Return ``[{"workspace", "project", "project_id", "pages" (live), "sessions", "root",
    "origin", "aliases"}]`` for every project, ordered by workspace then project name (``root`` /
    ``origin``: its identity keys, which tell ``api`` from ``api-2``; ``None`` when unknown;
    ``aliases``: the other roots it has been seen at)."""
    pages = dict(conn.execute(
        "SELECT project_id, count(*) FROM pages WHERE is_latest = 1 GROUP BY project_id").fetchall())
    sessions = dict(conn.execute("SELECT project_id, count(*) FROM sessions GROUP BY project_id").fetchall())
    keys = scopes.all_identity_keys(conn)
    return [
        {"workspace": s.workspace, "project": s.project, "project_id": s.project_id,
         "pages": pages.get(s.project_id, 0), "sessions": sessions.get(s.project_id, 0),
         **keys.get(s.project_id, {"root": None, "origin": None, "aliases": []})}
        for s in scopes.all_scopes(conn)
    ]


def projects_overview(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Return ``project_sizes`` plus each project's activity (the web's projects screen).

    Each: ``{"workspace", "project", "project_id", "pages", "sessions", "handoffs_open": int,
    "last_activity": str|None}`` (the newest page update or session event).
    """
    handoffs = dict(conn.execute(
        "SELECT project_id, count(*) FROM handoffs WHERE status = 'open' GROUP BY project_id").fetchall())
    last_page = dict(conn.execute("SELECT project_id, max(updated_at) FROM pages GROUP BY project_id").fetchall())
    last_event = dict(conn.execute(
        "SELECT project_id, max(last_event_at) FROM sessions GROUP BY project_id").fetchall())
    out = []
    for d in project_sizes(conn):
        pid = d["project_id"]
        last = [t for t in (last_page.get(pid), last_event.get(pid)) if t]
        out.append({**d, "handoffs_open": handoffs.get(pid, 0), "last_activity": max(last) if last else None})
    return out
