"""Reads of managed workstreams: runs, the unseen range of a harness, listings, search, audit.

Sync functions of a read connection (``ReaderPool.run``). Rows come back as plain dicts;
event text is the sanitised, redacted ledger text (still untrusted: fence it before
handing it to an agent).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from aimem_common.models import Scope
from aimem_common.read.text import fts_query, query_terms
from aimem_common.text import cap_utf8
from aimem_common.workstreams import MARKER_PREFIX, MAX_PACKET_EVENTS

WS_FIELDS = ("id", "name", "checkout_root", "last_seq", "created_at", "updated_at")
EVENT_FIELDS = ("seq", "harness", "run_id", "role", "text", "ts", "segment")
SEARCH_POOL = 1_000  # best FTS rows ranked before the project filter
PAGE_MAX_EVENTS = 200  # events in one page of a workstream read by an agent (MCP)
PAGE_MAX_BYTES = 64 * 1024  # UTF-8 bytes of event text in one such page
RUN_FIELDS = ("id", "harness", "cwd", "state", "started_at", "renewed_at", "lease_expires_at", "ended_at", "exit_code")


def _has_tables(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'workstreams'").fetchone() is not None


def run_with_workstream(conn: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    """Return the run ``run_id`` with its workstream and its harness cursor, or None.

    Shape: ``{run: {...RUN_FIELDS}, workstream: {...WS_FIELDS, workspace_id, project_id},
    delivered_seq: int}``.
    """
    if not _has_tables(conn):
        return None
    row = conn.execute("SELECT * FROM managed_runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    ws = conn.execute("SELECT * FROM workstreams WHERE id = ?", (row["workstream_id"],)).fetchone()
    cur = conn.execute("SELECT delivered_seq FROM workstream_harnesses WHERE workstream_id = ? AND harness = ?",
                       (ws["id"], row["harness"])).fetchone()
    return {"run": {k: row[k] for k in RUN_FIELDS},
            "workstream": {**{k: ws[k] for k in WS_FIELDS}, "workspace_id": ws["workspace_id"],
                           "project_id": ws["project_id"]},
            "delivered_seq": cur[0] if cur else 0}


def events_after(conn: sqlite3.Connection, workstream_id: str, after_seq: int, *,
                 limit: int = MAX_PACKET_EVENTS) -> list[dict[str, Any]]:
    """Return the newest ≤ ``limit`` events with ``seq > after_seq``, oldest first."""
    rows = conn.execute(f"SELECT {', '.join(EVENT_FIELDS)} FROM workstream_events WHERE workstream_id = ? AND seq > ?"
                        " ORDER BY seq DESC LIMIT ?", (workstream_id, after_seq, limit)).fetchall()
    return [dict(r) for r in reversed(rows)]


def events_from(conn: sqlite3.Connection, workstream_id: str, from_seq: int, *, limit: int) -> list[dict[str, Any]]:
    """Return ≤ ``limit`` events with ``seq >= from_seq``, oldest first (a timeline page)."""
    return [dict(r) for r in conn.execute(
        f"SELECT {', '.join(EVENT_FIELDS)} FROM workstream_events WHERE workstream_id = ? AND seq >= ?"
        " ORDER BY seq LIMIT ?", (workstream_id, from_seq, limit))]


def list_workstreams(conn: sqlite3.Connection, scope: Scope) -> list[dict[str, Any]]:
    """Return the project's workstreams, newest activity first, each with its harnesses and live run.

    Shape: ``{...WS_FIELDS, events, harnesses: [{harness, delivered_seq, last_run_at}],
    live_run: {...RUN_FIELDS}|null}``.
    """
    if not _has_tables(conn):
        return []
    out = []
    for ws in conn.execute("SELECT * FROM workstreams WHERE project_id = ? ORDER BY updated_at DESC, id",
                           (scope.project_id,)).fetchall():
        out.append(_summary(conn, ws))
    return out


def _project_workstream(conn: sqlite3.Connection, scope: Scope, workstream_id: str) -> sqlite3.Row | None:
    """Return the row of workstream ``workstream_id`` if it belongs to the scope's project, else None."""
    if not _has_tables(conn):
        return None
    return conn.execute("SELECT * FROM workstreams WHERE id = ? AND project_id = ?",
                        (workstream_id, scope.project_id)).fetchone()


def _summary(conn: sqlite3.Connection, ws: sqlite3.Row) -> dict[str, Any]:
    harnesses = [dict(r) for r in conn.execute(
        "SELECT harness, delivered_seq, last_run_at FROM workstream_harnesses WHERE workstream_id = ?"
        " ORDER BY last_run_at DESC", (ws["id"],))]
    live = conn.execute("SELECT * FROM managed_runs WHERE workstream_id = ? AND state = 'active'"
                        " AND lease_expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
                        " ORDER BY started_at DESC LIMIT 1", (ws["id"],)).fetchone()
    return {**{k: ws[k] for k in WS_FIELDS}, "events": ws["last_seq"], "harnesses": harnesses,
            "live_run": {k: live[k] for k in RUN_FIELDS} if live else None}


def agent_listing(conn: sqlite3.Connection, scope: Scope, *, limit: int = PAGE_MAX_EVENTS) -> list[dict[str, Any]]:
    """Return ≤ ``limit`` of the project's workstreams as an agent needs them, newest activity first.

    Shape: ``[{id, name, harnesses: [name, newest run first], runs: int, events: int,
    last_event_at: ISO-8601|null, updated_at}]``. No checkout path: where a repository lives
    on a user's machine is not handed out by a server.
    """
    if not _has_tables(conn):
        return []
    rows = conn.execute(
        "SELECT w.id, w.name, w.last_seq AS events, w.updated_at,"
        " (SELECT count(*) FROM managed_runs r WHERE r.workstream_id = w.id) AS runs,"
        " (SELECT e.ts FROM workstream_events e WHERE e.workstream_id = w.id AND e.seq = w.last_seq) AS last_event_at"
        " FROM workstreams w WHERE w.project_id = ? ORDER BY w.updated_at DESC, w.id LIMIT ?",
        (scope.project_id, limit)).fetchall()
    out = []
    for r in rows:
        harnesses = [h[0] for h in conn.execute(
            "SELECT harness FROM workstream_harnesses WHERE workstream_id = ? ORDER BY last_run_at DESC, harness",
            (r["id"],))]
        out.append({"id": r["id"], "name": r["name"], "harnesses": harnesses, "runs": r["runs"],
                    "events": r["events"], "last_event_at": r["last_event_at"], "updated_at": r["updated_at"]})
    return out


def events_page(conn: sqlite3.Connection, scope: Scope, workstream_id: str, *, after_seq: int = 0,
                limit: int = PAGE_MAX_EVENTS, max_bytes: int = PAGE_MAX_BYTES) -> dict[str, Any] | None:
    """Return one bounded page of a project's workstream events, oldest first, or None.

    The page holds the events with ``seq > after_seq``, at most ``limit`` of them
    (capped at ``PAGE_MAX_EVENTS``) and at most ``max_bytes`` UTF-8 bytes of text: the
    page stops before the event that would pass the byte budget; a first event alone
    over it is cut (``cap_utf8``, marked ``cut: true``) so a page always moves on.

    Shape: ``{workstream: {id, name, events}, events: [{...EVENT_FIELDS}], next_after_seq:
    int|null}``; ``next_after_seq`` is the ``after_seq`` of the next page, null at the end.
    None when the project has no workstream ``workstream_id`` (one of another project
    included, so an id reveals nothing outside the caller's scope).
    """
    ws = _project_workstream(conn, scope, workstream_id)
    if ws is None:
        return None
    limit = max(1, min(limit, PAGE_MAX_EVENTS))
    rows = conn.execute(f"SELECT {', '.join(EVENT_FIELDS)} FROM workstream_events WHERE workstream_id = ? AND seq > ?"
                        " ORDER BY seq LIMIT ?", (workstream_id, after_seq, limit))
    events: list[dict[str, Any]] = []
    used = 0
    for row in rows:
        ev = dict(row)
        size = len(ev["text"].encode("utf-8", "replace"))
        if used + size > max_bytes:
            if events:
                break
            ev["text"], ev["cut"], size = cap_utf8(ev["text"], max_bytes), True, max_bytes
        events.append(ev)
        used += size
    last = events[-1]["seq"] if events else None
    more = last is not None and conn.execute("SELECT 1 FROM workstream_events WHERE workstream_id = ? AND seq > ?"
                                             " LIMIT 1", (workstream_id, last)).fetchone() is not None
    return {"workstream": {"id": ws["id"], "name": ws["name"], "events": ws["last_seq"]}, "events": events,
            "next_after_seq": last if more else None}


def show(conn: sqlite3.Connection, scope: Scope, workstream_id: str, *, last: int = 50) -> dict[str, Any] | None:
    """Return one workstream of the project: summary, its runs (newest first, ≤ 50) and its last events."""
    ws = _project_workstream(conn, scope, workstream_id)
    if ws is None:
        return None
    runs = [{k: r[k] for k in RUN_FIELDS} for r in conn.execute(
        "SELECT * FROM managed_runs WHERE workstream_id = ? ORDER BY started_at DESC LIMIT 50", (ws["id"],))]
    return {**_summary(conn, ws), "runs": runs, "recent_events": events_after(conn, ws["id"], 0, limit=last)}


def search(conn: sqlite3.Connection, scope: Scope, query: str, *, limit: int = 20,
           workstream_id: str | None = None) -> list[dict[str, Any]]:
    """Full-text search of the project's ledgers (FTS5 rank order); each hit names its workstream.

    The FTS index is ranked first (``ORDER BY rank`` with a limit lets FTS5 keep only the
    best ``SEARCH_POOL`` rows), then joined to the rows and filtered to the project (and
    workstream): a store whose other projects hold most of the best matches may return
    fewer than ``limit`` hits.
    """
    match = fts_query(query_terms(query))
    if not match or not _has_tables(conn):
        return []
    sql = ("SELECT e.workstream_id, w.name AS workstream, " + ", ".join(f"e.{f}" for f in EVENT_FIELDS) +
           " FROM (SELECT rowid, rank FROM workstream_events_fts WHERE workstream_events_fts MATCH ?"
           " ORDER BY rank LIMIT ?) f JOIN workstream_events e ON e.id = f.rowid"
           " JOIN workstreams w ON w.id = e.workstream_id WHERE e.project_id = ?")
    args: list[Any] = [match, SEARCH_POOL, scope.project_id]
    if workstream_id:
        sql += " AND e.workstream_id = ?"
        args.append(workstream_id)
    sql += " ORDER BY f.rank, e.seq DESC LIMIT ?"
    args.append(limit)
    return [dict(r) for r in conn.execute(sql, args)]


def contaminated(conn: sqlite3.Connection, scope: Scope, *, limit: int = 100) -> list[dict[str, Any]]:
    """Return the project's ledger events whose text carries an origin marker (they should not exist)."""
    if not _has_tables(conn):
        return []
    rows = conn.execute("SELECT e.workstream_id, " + ", ".join(f"e.{f}" for f in EVENT_FIELDS) +
                        " FROM workstream_events e WHERE e.project_id = ? AND instr(e.text, ?) > 0"
                        " ORDER BY e.workstream_id, e.seq LIMIT ?", (scope.project_id, MARKER_PREFIX, limit))
    return [dict(r) for r in rows]
