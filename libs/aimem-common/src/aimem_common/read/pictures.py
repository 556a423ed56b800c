"""Reads behind the web's pictures: activity per day, a session's strip, handoff chains, the link graph.

Shapes (every name and title is agent data: the caller escapes it)::

    Activity = {"days": [str], "agents": [str], "since", "until",
                "cells": {(day, agent): {"sessions": int, "observations": int}},
                "max_sessions": int, "max_observations": int}
    StripMark = {"id", "index", "kind", "category", "title", "tool_name", "occurred_at"}
        (category: prompt | tool | failure | compaction | other)
    Chains = {"chains": [[HandoffLink]], "open": int, "stale": int, "superseded": int}
    Graph = {"nodes": [{"id", "path", "title", "kind", "workspace", "project", "hop", "degree",
             "center": bool}], "edges": [{"from", "to", "kind"}], "left_out": int, "total": int}

Sync functions over a read connection (``ReaderPool.run``), like the rest of ``read/``.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from aimem_common.errors import NotFoundError
from aimem_common.models import Scope
from aimem_common.read import visibility
from aimem_common.read.visibility import Readable

if TYPE_CHECKING:
    from aimem_common.auth import Principal

MAX_DAYS = 90
MAX_STRIP = 2000
MAX_GRAPH = 300
STALE_DAYS = 7
_PROMPT = ("user-prompt",)
_TOOL = ("pre-tool-use", "post-tool-use", "permission-request")
_COMPACT = ("pre-compact", "post-compaction")


def _day(ts: str | None) -> str:
    return (ts or "")[:10]


def activity(conn: sqlite3.Connection, scope: Scope, *, days: int = 28, now: datetime | None = None) -> dict[str, Any]:
    """Return the ``Activity`` of ``scope``: sessions active and observations made per UTC day and
    agent over the ``days`` days ending today (``now``), oldest day first."""
    days = max(1, min(days, MAX_DAYS))
    until = (now or datetime.now(UTC)).date()
    since = until - timedelta(days=days - 1)
    day_list = [(since + timedelta(days=i)).isoformat() for i in range(days)]
    cells: dict[tuple[str, str], dict[str, int]] = {}

    def cell(d: str, agent: str) -> dict[str, int]:
        return cells.setdefault((d, agent), {"sessions": 0, "observations": 0})

    for r in conn.execute("SELECT agent, started_at, last_event_at FROM sessions"
                          " WHERE project_id = ? AND last_event_at >= ?", (scope.project_id, since.isoformat())):
        first = max(_parse_day(r["started_at"]) or since, since)
        last = min(_parse_day(r["last_event_at"]) or until, until)
        d = first
        while d <= last:
            cell(d.isoformat(), r["agent"])["sessions"] += 1
            d += timedelta(days=1)
    for r in conn.execute("SELECT substr(occurred_at, 1, 10) AS day, agent, count(*) AS n FROM observations"
                          " WHERE project_id = ? AND occurred_at >= ? GROUP BY 1, 2",
                          (scope.project_id, since.isoformat())):
        if r["day"] <= until.isoformat():
            cell(r["day"], r["agent"])["observations"] += r["n"]
    agents = sorted({a for _, a in cells})
    per_day_s = {d: sum(cells.get((d, a), {}).get("sessions", 0) for a in agents) for d in day_list}
    per_day_o = {d: sum(cells.get((d, a), {}).get("observations", 0) for a in agents) for d in day_list}
    return {"days": day_list, "agents": agents, "since": day_list[0], "until": day_list[-1], "cells": cells,
            "max_sessions": max(per_day_s.values(), default=0), "max_observations": max(per_day_o.values(), default=0),
            "totals": {"sessions": per_day_s, "observations": per_day_o}}


def _parse_day(ts: str | None) -> date | None:
    try:
        return date.fromisoformat(_day(ts))
    except ValueError:
        return None


def sessions_on_day(conn: sqlite3.Connection, scope: Scope, day: str, *, agent: str | None = None,
                    limit: int = 200) -> list[dict[str, Any]]:
    """Return the ``SessionSummary`` list of sessions of ``scope`` active on UTC ``day``
    (``YYYY-MM-DD``; started on or before it, last event on or after it), ``agent``'s only
    when given, newest last event first."""
    from aimem_common.read.sessions import _SESSION_SQL, _session

    sql = (_SESSION_SQL + " WHERE s.project_id = ? AND s.last_event_at >= ? AND substr(s.started_at, 1, 10) <= ?")
    args: list[Any] = [scope.project_id, day, day]
    if agent:
        sql += " AND s.agent = ?"
        args.append(agent)
    sql += " ORDER BY s.last_event_at DESC, s.id DESC LIMIT ?"
    args.append(max(1, min(limit, 500)))
    return [_session(r, scope) for r in conn.execute(sql, args)]


def category(kind: str, title: str, body: str) -> str:
    """Return the strip category of an observation: prompt, tool, failure, compaction or other."""
    if kind in _PROMPT:
        return "prompt"
    if kind == "post-tool-use" and (title.endswith(" failed") or " failed:" in title or body.startswith("error:")
                                    or "\nerror:" in body):
        return "failure"
    if kind in _TOOL:
        return "tool"
    if kind in _COMPACT:
        return "compaction"
    return "other"


def session_strip(conn: sqlite3.Connection, scope: Scope, session_id: str, *,
                  limit: int = MAX_STRIP) -> dict[str, Any]:
    """Return ``{"marks": [StripMark], "total": int, "left_out": int}``: the first ``limit``
    observations of one session of ``scope`` in arrival order (``index`` 0-based).

    Raises:
        NotFoundError: ``session_not_found``.
    """
    if conn.execute("SELECT 1 FROM sessions WHERE project_id = ? AND session_id = ?",
                    (scope.project_id, session_id)).fetchone() is None:
        raise NotFoundError(f"session {session_id!r} not found in {scope.workspace}/{scope.project}",
                            code="session_not_found", data={"session_id": session_id})
    limit = max(1, min(limit, MAX_STRIP))
    rows = conn.execute(
        "SELECT id, kind, title, tool_name, occurred_at, substr(body, 1, 400) AS head FROM observations"
        " WHERE project_id = ? AND session_id = ? ORDER BY id LIMIT ?", (scope.project_id, session_id, limit + 1),
    ).fetchall()
    marks = [{"id": r["id"], "index": i, "kind": r["kind"], "category": category(r["kind"], r["title"] or "", r["head"] or ""),
              "title": r["title"], "tool_name": r["tool_name"], "occurred_at": r["occurred_at"]}
             for i, r in enumerate(rows[:limit])]
    total = len(marks) if len(rows) <= limit else conn.execute(
        "SELECT count(*) FROM observations WHERE project_id = ? AND session_id = ?",
        (scope.project_id, session_id)).fetchone()[0]
    return {"marks": marks, "total": total, "left_out": total - len(marks)}


def handoff_chains(conn: sqlite3.Connection, scope: Scope, *, viewer: str | None = None, limit: int = 100,
                   now: datetime | None = None, stale_days: int = STALE_DAYS) -> dict[str, Any]:
    """Return the ``Chains`` of ``scope``'s handoffs (``viewer`` as ``handoffs.list_handoffs``).

    A chain links a handoff to the next one opened by the session that claimed it
    (``accepted_session_id`` = the next one's ``from_session_id``); a superseded handoff
    joins the chain of the one it was folded into, just before it. Each link: the
    handoff's ``id``, ``title``, ``status``, ``from_agent``, ``from_session_id``,
    ``accepted_by``, ``accepted_session_id``, ``superseded_by``, ``at`` (event time) and
    ``stale`` (open for more than ``stale_days``). Chains are ordered by their first link.
    Only the newest ``limit`` handoffs by event time are drawn (``shown`` of ``total``).
    """
    from aimem_common.read.handoffs import MAX_HANDOFFS, list_handoffs

    limit = max(1, min(limit, MAX_HANDOFFS))
    where = " AND (owner IS NULL OR owner = ? OR shared = 1 OR automatic = 1)" if viewer is not None else ""
    args: list[Any] = [scope.project_id] + ([viewer] if viewer is not None else [])
    total = conn.execute(f"SELECT count(*) FROM handoffs WHERE project_id = ?{where}", args).fetchone()[0]
    rows = list_handoffs(conn, scope, viewer=viewer, status="any", limit=MAX_HANDOFFS, include_body=False)
    if total > len(rows):  # the oldest come first: read from the newest end instead
        rows = _newest_handoffs(conn, scope, viewer, MAX_HANDOFFS)
    rows = rows[-limit:]
    cutoff = ((now or datetime.now(UTC)) - timedelta(days=stale_days)).isoformat()
    links = []
    for h in rows:
        at = h.get("event_at") or h["created_at"]
        links.append({"id": h["id"], "title": h["title"], "status": h["status"], "automatic": h["automatic"],
                      "from_agent": h["from_agent"] or h["owner"] or "?", "from_session_id": h["from_session_id"],
                      "to_agent": h["to_agent"], "accepted_by": h["accepted_by"],
                      "accepted_session_id": h["accepted_session_id"], "superseded_by": h["superseded_by"],
                      "at": at, "stale": h["status"] == "open" and _norm(at) < _norm(cutoff)})
    by_id = {link["id"]: link for link in links}
    by_from: dict[str, list[dict]] = {}
    for link in links:
        if link["from_session_id"]:
            by_from.setdefault(link["from_session_id"], []).append(link)
    # each link's successor: the handoff it was folded into, else the one its claimer opened next
    nxt: dict[int, int] = {}
    for link in links:
        if link["status"] == "superseded" and link["superseded_by"] in by_id:
            nxt[link["id"]] = link["superseded_by"]
        elif link["accepted_session_id"]:
            after = [c for c in by_from.get(link["accepted_session_id"], []) if c["id"] != link["id"]]
            if after:
                nxt[link["id"]] = after[0]["id"]
    has_prev = set(nxt.values())
    chains, seen = [], set()
    for link in links:
        if link["id"] in has_prev or link["id"] in seen:
            continue
        chain, cur = [], link["id"]
        while cur is not None and cur not in seen:
            seen.add(cur)
            chain.append(by_id[cur])
            cur = nxt.get(cur)
        chains.append(chain)
    for link in links:  # a cycle (bad data): shown as a chain of its own
        if link["id"] not in seen:
            seen.add(link["id"])
            chains.append([link])
    return {"chains": chains, "shown": len(links), "total": total,
            "open": sum(1 for x in links if x["status"] == "open"),
            "stale": sum(1 for x in links if x["stale"]),
            "superseded": sum(1 for x in links if x["status"] == "superseded")}


def _newest_handoffs(conn: sqlite3.Connection, scope: Scope, viewer: str | None, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` handoffs of ``scope`` (as ``list_handoffs`` rows), oldest first."""
    sql = "SELECT * FROM handoffs WHERE project_id = ?"
    args: list[Any] = [scope.project_id]
    if viewer is not None:
        sql += " AND (owner IS NULL OR owner = ? OR shared = 1 OR automatic = 1)"
        args.append(viewer)
    sql += " ORDER BY coalesce(event_at, created_at) DESC, created_at DESC, id DESC LIMIT ?"
    out = []
    for r in conn.execute(sql, (*args, limit)):
        d = {k: r[k] for k in r.keys() if k not in ("workspace_id", "project_id", "body")}
        d["automatic"], d["shared"] = bool(d["automatic"]), bool(d["shared"])
        out.append(d)
    return out[::-1]


def _norm(ts: str) -> str:
    return ts.replace("Z", "+00:00")[:19]


# -- the link graph ---------------------------------------------------------------------

def _node(r: sqlite3.Row, hop: int) -> dict[str, Any]:
    return {"id": r["id"], "path": r["path"], "title": r["title"], "kind": r["kind"], "workspace": r["ws_name"],
            "project": r["pj_name"], "hop": hop, "degree": 0, "center": hop == 0}


_NODE_SQL = ("SELECT p.id, p.path, p.title, p.kind, w.name AS ws_name, pj.name AS pj_name FROM pages p"
             " JOIN projects pj ON pj.id = p.project_id JOIN workspaces w ON w.id = p.workspace_id")


def _neighbours(conn: sqlite3.Connection, ids: list[int], vis: Readable, cap: int) -> list[tuple[int, int, str]]:
    """Return ``(known, other, kind)`` for pages ``ids`` and the live visible pages next to them:
    ``link`` (known links to other), ``backlink`` (other links to known), ``entity`` (shared);
    at most ``cap`` rows of each kind (a hub's thousand backlinks would not be drawn anyway)."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    where, args = vis.where("t.project_id")
    out = []
    # CROSS JOIN: start from the few given pages (else SQLite scans every live page of the project)
    for r in conn.execute(f"SELECT l.from_page_id AS a, l.to_page_id AS b FROM links l CROSS JOIN pages t ON t.id ="
                          f" l.to_page_id AND t.is_latest = 1 WHERE l.from_page_id IN ({marks}){where} LIMIT ?", (*ids, *args, cap)):
        out.append((r["a"], r["b"], "link"))
    for r in conn.execute(f"SELECT l.to_page_id AS a, l.from_page_id AS b FROM links l CROSS JOIN pages t ON t.id ="
                          f" l.from_page_id AND t.is_latest = 1 WHERE l.to_page_id IN ({marks}){where} LIMIT ?", (*ids, *args, cap)):
        out.append((r["a"], r["b"], "backlink"))
    for r in conn.execute(f"SELECT DISTINCT e1.page_id AS a, e2.page_id AS b FROM entity_page_links e1"
                          f" CROSS JOIN entity_page_links e2 ON e2.entity_id = e1.entity_id AND e2.page_id != e1.page_id"
                          f" CROSS JOIN pages t ON t.id = e2.page_id AND t.is_latest = 1"
                          f" WHERE e1.page_id IN ({marks}){where} LIMIT ?", (*ids, *args, cap)):
        out.append((r["a"], r["b"], "entity"))
    return out


def page_graph(conn: sqlite3.Connection, scope: Scope, path: str, *, hops: int = 1, max_nodes: int = MAX_GRAPH,
               reader: "Principal | None" = None) -> dict[str, Any]:
    """Return the ``Graph`` around the live page ``path`` of ``scope``: its links, backlinks and
    pages sharing an entity (``hops`` 1 or 2), pages of projects ``reader`` may not read left
    out (``reader`` None: this project only); at most ``max_nodes`` nodes, nearest hops first,
    the others found counted in ``left_out``; ``more``: the walk stopped before the last hop
    (full), so pages further out were not even looked for.

    Raises:
        NotFoundError: ``page_not_found``.
    """
    vis = visibility.only(scope) if reader is None else visibility.readable(conn, reader)
    row = conn.execute(_NODE_SQL + " WHERE p.project_id = ? AND p.path = ? AND p.is_latest = 1",
                       (scope.project_id, path)).fetchone()
    if row is None:
        raise NotFoundError(f"page {path!r} not found", code="page_not_found", data={"path": path})
    max_nodes = max(1, min(max_nodes, MAX_GRAPH))
    hop_of = {row["id"]: 0}
    edges: set[tuple[int, int, str]] = set()
    frontier = [row["id"]]
    found = {row["id"]}
    stopped = False
    for hop in range(1, max(1, min(hops, 2)) + 1):
        nxt: list[int] = []
        room = max_nodes - len(found)
        if room <= 0:
            stopped = True  # full: pages further out are not looked for
            break
        for a, b, kind in _neighbours(conn, frontier, vis, cap=2 * max_nodes if hop == 1 else room + max_nodes):
            if kind == "entity":
                edges.add((min(a, b), max(a, b), kind))
            else:
                edges.add((b, a, "link") if kind == "backlink" else (a, b, "link"))
            if b not in found:
                found.add(b)
                nxt.append(b)
        for b in sorted(nxt):
            hop_of.setdefault(b, hop)
        frontier = nxt
    keep = sorted(hop_of, key=lambda i: (hop_of[i], i))[:max_nodes]
    return {**_assemble(conn, keep, hop_of, edges, total=len(hop_of)), "more": stopped}


def project_graph(conn: sqlite3.Connection, scope: Scope, *, max_nodes: int = 150) -> dict[str, Any]:
    """Return the ``Graph`` of ``scope``'s most connected live pages (resolved links inside the
    project, either way): the ``max_nodes`` of highest degree; ``hop`` is the degree rank ring
    (0 for the most connected), ``left_out`` counts the connected pages not drawn.

    The degrees are the writer's (``page_degrees``, kept by triggers as links and pages
    change: migration 22), so the top pages are read from an index rather than counted."""
    max_nodes = max(1, min(max_nodes, MAX_GRAPH))
    pid = scope.project_id
    ranked = conn.execute("SELECT page_id, degree FROM page_degrees WHERE project_id = ? AND degree > 0"
                          " ORDER BY degree DESC, page_id LIMIT ?", (pid, max_nodes)).fetchall()
    total = conn.execute("SELECT count(*) FROM page_degrees WHERE project_id = ? AND degree > 0",
                         (pid,)).fetchone()[0]
    deg = {r[0]: r[1] for r in ranked}
    keep = [r[0] for r in ranked]
    marks = ",".join("?" * len(keep))
    kept = set(keep)
    edges = {(a, b, "link") for a, b in conn.execute(
        f"SELECT from_page_id, to_page_id FROM links WHERE from_page_id IN ({marks})", keep)
        if b in kept and a != b} if keep else set()
    hop_of = {}
    ring, cap, start = 0, 1, 0
    while start < len(keep):  # ring k holds 1, 8, 16, 24 … nodes
        for i in keep[start:start + cap]:
            hop_of[i] = ring
        start += cap
        ring += 1
        cap = 8 * ring
    out = _assemble(conn, keep, hop_of, edges, total=total)
    for n in out["nodes"]:
        n["degree"] = deg[n["id"]]
        n["center"] = False
    return out


def graph_version(conn: sqlite3.Connection, scope: Scope) -> int:
    """Return the version of ``scope``'s link graph: the writer counts it up whenever a page of
    the project goes live or stops being live, or a link between two of its live pages is
    added, removed or repointed (migration 22), so a drawing of the project's links can be
    kept until it changes; 0 for a project without pages."""
    row = conn.execute("SELECT version FROM link_graph_versions WHERE project_id = ?", (scope.project_id,)).fetchone()
    return int(row[0]) if row else 0


def _assemble(conn: sqlite3.Connection, keep: list[int], hop_of: dict[int, int],
              edges: set[tuple[int, int, str]], *, total: int) -> dict[str, Any]:
    kept = set(keep)
    nodes: dict[int, dict[str, Any]] = {}
    for start in range(0, len(keep), 500):
        chunk = keep[start:start + 500]
        for r in conn.execute(_NODE_SQL + f" WHERE p.id IN ({','.join('?' * len(chunk))})", chunk):
            nodes[r["id"]] = _node(r, hop_of[r["id"]])
    out_edges = sorted({(a, b, k) for a, b, k in edges if a in kept and b in kept and a != b})
    for a, b, _ in out_edges:
        nodes[a]["degree"] += 1
        nodes[b]["degree"] += 1
    return {"more": False, "nodes": [nodes[i] for i in keep if i in nodes],
            "edges": [{"from": a, "to": b, "kind": k} for a, b, k in out_edges],
            "left_out": total - len(nodes), "total": total}
