"""``SqlSeeder``: populate a migrated DB with plain SQL the way the writer stores pages.

Test support only (read-side unit tests, the golden set, the latency benchmark): it mirrors
what a ``page.write`` stores (row, links, entities) so read functions can be exercised
without NATS. Loaded by path (``load_support``) because test dirs are not packages.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from aimem_common.db.connect import open_writer
from aimem_common.models import Scope, kind_for_path, tier_for

_LINK_RE = re.compile(r"\[\[([^\[\]|]+)(?:\|[^\]]*)?\]\]")


class SqlSeeder:
    """Insert workspaces, projects, pages (+links, entities), sessions, observations."""

    def __init__(self, db_path: Path):
        self.conn = open_writer(db_path)
        self.clock = datetime(2026, 1, 1, tzinfo=UTC)

    def tick(self) -> str:
        self.clock += timedelta(seconds=1)
        return self.clock.isoformat().replace("+00:00", "Z")

    def scope(self, workspace: str, project: str) -> Scope:
        c = self.conn
        row = c.execute("SELECT id FROM workspaces WHERE name = ?", (workspace,)).fetchone()
        ws_id = row[0] if row else uuid.uuid4().hex
        if not row:
            c.execute("INSERT INTO workspaces(id, name, created_at) VALUES (?, ?, ?)", (ws_id, workspace, self.tick()))
        row = c.execute("SELECT id FROM projects WHERE workspace_id = ? AND name = ?", (ws_id, project)).fetchone()
        pj_id = row[0] if row else uuid.uuid4().hex
        if not row:
            c.execute("INSERT INTO projects(id, workspace_id, name, created_at) VALUES (?, ?, ?, ?)",
                      (pj_id, ws_id, project, self.tick()))
        return Scope(workspace, project, ws_id, pj_id)

    def page(self, scope: Scope, path: str, body: str, **fm) -> int:
        c = self.conn
        title = fm.get("title") or next(
            (ln[2:].strip() for ln in body.splitlines() if ln.startswith("# ")), path.rsplit("/", 1)[-1][:-3]
        )
        kind = kind_for_path(path)
        tier = tier_for(kind, fm.get("tier"))
        now = self.tick()
        old = c.execute("SELECT id, created_at FROM pages WHERE project_id = ? AND path = ? AND is_latest = 1",
                        (scope.project_id, path)).fetchone()
        if old:
            c.execute("UPDATE pages SET is_latest = 0, retired_reason = 'superseded', superseded_at = ? WHERE id = ?",
                      (now, old[0]))
        pinned = bool(fm.get("pinned")) or kind.value == "slot"
        cur = c.execute(
            "INSERT INTO pages(workspace_id, project_id, path, title, body, frontmatter, kind, tier, tags, pinned,"
            " expires_at, session_id, supersedes, content_hash, created_at, updated_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (scope.workspace_id, scope.project_id, path, title, body, json.dumps(fm), kind.value, tier.value,
             json.dumps(fm.get("tags", [])), int(pinned), fm.get("expires_at"), fm.get("session_id"),
             old[0] if old else None, hashlib.sha256(body.encode()).hexdigest(), old[1] if old else now, now),
        )
        pid = cur.lastrowid
        if old:
            c.execute("UPDATE links SET to_page_id = ? WHERE to_page_id = ?", (pid, old[0]))
        for target in _LINK_RE.findall(body):
            ws = pj = None
            tpath = target
            if ":" in target:
                sc, tpath = target.split(":", 1)
                ws, pj = sc.split("/", 1) if "/" in sc else (None, sc)
            if not tpath.endswith(".md"):
                tpath += ".md"
            if pj:
                trow = c.execute(
                    "SELECT p.id FROM pages p JOIN projects pj ON pj.id = p.project_id JOIN workspaces w"
                    " ON w.id = p.workspace_id WHERE w.name = ? AND pj.name = ? AND p.path = ? AND p.is_latest = 1",
                    (ws or scope.workspace, pj, tpath)).fetchone()
            else:
                trow = c.execute("SELECT id FROM pages WHERE project_id = ? AND path = ? AND is_latest = 1",
                                 (scope.project_id, tpath)).fetchone()
            c.execute(
                "INSERT INTO links(workspace_id, project_id, from_page_id, to_workspace, to_project, to_path,"
                " to_page_id) VALUES (?,?,?,?,?,?,?)",
                (scope.workspace_id, scope.project_id, pid, ws if pj else None, pj, tpath, trow[0] if trow else None))
        c.execute(
            "UPDATE links SET to_page_id = ? WHERE to_page_id IS NULL AND to_path = ? AND"
            " ((to_project IS NULL AND project_id = ?) OR to_project = ?)",
            (pid, path, scope.project_id, scope.project))
        for name in fm.get("entities", []):
            norm = " ".join(name.casefold().split())
            c.execute("INSERT INTO entities(workspace_id, project_id, name, display_name) VALUES (?,?,?,?)"
                      " ON CONFLICT(project_id, name) DO NOTHING", (scope.workspace_id, scope.project_id, norm, name))
            eid = c.execute("SELECT id FROM entities WHERE project_id = ? AND name = ?",
                            (scope.project_id, norm)).fetchone()[0]
            c.execute("INSERT OR IGNORE INTO entity_page_links(entity_id, page_id) VALUES (?, ?)", (eid, pid))
        return pid

    def observation(self, scope: Scope, session_id: str, kind: str, body: str, title: str = "", agent: str = "claude-code") -> int:
        c = self.conn
        now = self.tick()
        c.execute(
            "INSERT INTO sessions(workspace_id, project_id, session_id, agent, started_at, last_event_at,"
            " observation_count) VALUES (?,?,?,?,?,?,0) ON CONFLICT(project_id, session_id) DO UPDATE SET"
            " last_event_at = excluded.last_event_at",
            (scope.workspace_id, scope.project_id, session_id, agent, now, now))
        c.execute("UPDATE sessions SET observation_count = observation_count + 1 WHERE project_id = ? AND session_id = ?",
                  (scope.project_id, session_id))
        return c.execute(
            "INSERT INTO observations(workspace_id, project_id, session_id, kind, agent, title, body, occurred_at,"
            " created_at) VALUES (?,?,?,?,?,?,?,?,?)",
            (scope.workspace_id, scope.project_id, session_id, kind, agent, title, body, now, now)).lastrowid

    def end_session(self, scope: Scope, session_id: str) -> None:
        self.conn.execute("UPDATE sessions SET ended_at = ?, ended_observation_count = observation_count"
                          " WHERE project_id = ? AND session_id = ?", (self.tick(), scope.project_id, session_id))

    def close(self) -> None:
        self.conn.close()
