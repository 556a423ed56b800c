"""``Seeder``: a migrated SQLite store filled row by row, for tests that need one without a writer.

It stores a page the way a ``page.write`` does (the live version retired as superseded,
outgoing ``[[links]]`` resolved or left dangling, incoming links repointed, frontmatter
``entities``), and also lets a test set what only time produces (ages, access counters,
retired versions) for the sweep, lint and decay rules. Tests only: it opens the file
read-write itself, which no service but the writer may do.

Timestamps: ``age_days=N`` (and the other ``*_days_ago``) count back from ``now`` (default
``NOW``); without them each write takes the next second of the seeder's clock, which starts
at ``clock_start`` (default ``CLOCK_START``; pass ``clock_start=NOW`` for pages "just written").
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aimem_common.db.connect import open_writer
from aimem_common.db.trigram import index_observation_tri
from aimem_common.models import Scope, kind_for_path, tier_for

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
CLOCK_START = datetime(2026, 1, 1, tzinfo=UTC)
_LINK_RE = re.compile(r"\[\[([^\[\]|]+)(?:\|[^\]]*)?\]\]")


def recount_degrees(conn) -> dict[int, int]:
    """Return ``{page id: degree}`` of every live page counted from ``links``: what the
    writer's ``page_degrees`` keeps (migration 22; a link counts once at each end when both
    ends are live pages of one project and differ; pages of degree 0 included). Reads every
    link of the store: a check for tests, not a read path."""
    out = {r[0]: 0 for r in conn.execute("SELECT id FROM pages WHERE is_latest = 1")}
    for a, b in conn.execute(
            "SELECT l.from_page_id, l.to_page_id FROM links l JOIN pages s ON s.id = l.from_page_id"
            " JOIN pages t ON t.id = l.to_page_id WHERE s.is_latest = 1 AND t.is_latest = 1"
            " AND s.project_id = t.project_id AND l.from_page_id != l.to_page_id"):
        out[a] += 1
        out[b] += 1
    return out


def kept_degrees(conn) -> dict[int, int]:
    """Return ``{page id: degree}`` as ``page_degrees`` holds them (compare with ``recount_degrees``)."""
    return {r[0]: r[1] for r in conn.execute("SELECT page_id, degree FROM page_degrees")}


def ago(days: float, now: datetime = NOW) -> str:
    """ISO timestamp ``days`` before ``now``."""
    return (now - timedelta(days=days)).isoformat()


class Seeder:
    """Insert workspaces, projects, pages (+links, entities), sessions and observations."""

    def __init__(self, db_path: Path, now: datetime = NOW, clock_start: datetime = CLOCK_START):
        self.path = Path(db_path)
        self.now = now
        self.conn = open_writer(self.path)  # migrated, autocommit
        self.clock = clock_start

    def tick(self) -> str:
        """The seeder clock's next second (ISO, ``Z``)."""
        self.clock += timedelta(seconds=1)
        return self.clock.isoformat().replace("+00:00", "Z")

    def _ago(self, days: float | None) -> str | None:
        return None if days is None else ago(days, self.now)

    # -- scopes ---------------------------------------------------------------------------
    def scope(self, workspace: str, project: str) -> Scope:
        """Return the scope of ``workspace/project``, creating either when absent."""
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

    def project(self, name: str, workspace: str = "default") -> Scope:
        """``scope(workspace, name)`` with the project name first."""
        return self.scope(workspace, name)

    # -- pages ----------------------------------------------------------------------------
    def page(self, scope: Scope, path: str, body: str = "body", *, title: str | None = None,
             frontmatter: dict[str, Any] | None = None, age_days: float | None = None,
             pinned: bool | None = None, salience: float | None = None, expires_at: str | None = None,
             access_count: int = 0, accessed_days_ago: float | None = None, is_latest: int = 1,
             retired_reason: str | None = None, superseded_days_ago: float | None = None,
             session_id: str | None = None, tier: str | None = None, **fm: Any) -> int:
        """Store one page version and return its id.

        Frontmatter is ``frontmatter`` plus the extra keyword arguments (``tags``,
        ``entities``...). Title: ``title``, else the first ``# `` heading, else the file stem.
        A slot (``_slots/``) is pinned unless ``pinned=False``. A live write (``is_latest=1``)
        retires the path's live version as superseded, as the writer does.
        """
        c = self.conn
        given = {"title": title, "pinned": pinned, "tier": tier, "expires_at": expires_at, "session_id": session_id}
        fm = {**(frontmatter or {}), **fm, **{k: v for k, v in given.items() if v is not None}}
        title = fm.get("title") or next(
            (ln[2:].strip() for ln in body.splitlines() if ln.startswith("# ")), path.rsplit("/", 1)[-1][:-3])
        kind = kind_for_path(path)
        tier_value = tier_for(kind, fm.get("tier")).value
        pinned = bool(fm["pinned"]) if "pinned" in fm else kind.value == "slot"
        expires_at, session_id = fm.get("expires_at"), fm.get("session_id")
        stamp = self._ago(age_days) or self.tick()
        old = None
        if is_latest:
            old = c.execute("SELECT id, created_at FROM pages WHERE project_id = ? AND path = ? AND is_latest = 1",
                            (scope.project_id, path)).fetchone()
            if old:
                c.execute("UPDATE pages SET is_latest = 0, retired_reason = 'superseded', superseded_at = ?"
                          " WHERE id = ?", (stamp, old[0]))
        pid = c.execute(
            "INSERT INTO pages(workspace_id, project_id, path, title, body, frontmatter, kind, tier, tags, pinned,"
            " salience, expires_at, access_count, last_accessed_at, session_id, supersedes, is_latest,"
            " retired_reason, superseded_at, content_hash, created_at, updated_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (scope.workspace_id, scope.project_id, path, title, body, json.dumps(fm), kind.value, tier_value,
             json.dumps(fm.get("tags", [])), int(pinned), salience, expires_at, access_count,
             self._ago(accessed_days_ago), session_id, old[0] if old else None, is_latest, retired_reason,
             self._ago(superseded_days_ago), hashlib.sha256(f"{path}\0{body}\0{uuid.uuid4()}".encode()).hexdigest()
             if not is_latest else hashlib.sha256(body.encode()).hexdigest(),
             old[1] if old else stamp, stamp),
        ).lastrowid
        if is_latest:
            self._links(scope, pid, path, body, old[0] if old else None)
            self._entities(scope, pid, fm.get("entities", []))
        return int(pid)

    def _links(self, scope: Scope, pid: int, path: str, body: str, old_id: int | None) -> None:
        c = self.conn
        if old_id:
            c.execute("UPDATE links SET to_page_id = ? WHERE to_page_id = ?", (pid, old_id))
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

    def _entities(self, scope: Scope, pid: int, names: list[str]) -> None:
        c = self.conn
        for name in names:
            norm = " ".join(name.casefold().split())
            c.execute("INSERT INTO entities(workspace_id, project_id, name, display_name) VALUES (?,?,?,?)"
                      " ON CONFLICT(project_id, name) DO NOTHING", (scope.workspace_id, scope.project_id, norm, name))
            eid = c.execute("SELECT id FROM entities WHERE project_id = ? AND name = ?",
                            (scope.project_id, norm)).fetchone()[0]
            c.execute("INSERT OR IGNORE INTO entity_page_links(entity_id, page_id) VALUES (?, ?)", (eid, pid))

    # -- sessions and observations --------------------------------------------------------
    def observation(self, scope: Scope, session_id: str, kind: str, body: str, title: str = "",
                    agent: str = "claude-code") -> int:
        """Append one observation to a live session (created on first use); return its id."""
        c = self.conn
        now = self.tick()
        c.execute(
            "INSERT INTO sessions(workspace_id, project_id, session_id, agent, started_at, last_event_at,"
            " observation_count) VALUES (?,?,?,?,?,?,0) ON CONFLICT(project_id, session_id) DO UPDATE SET"
            " last_event_at = excluded.last_event_at",
            (scope.workspace_id, scope.project_id, session_id, agent, now, now))
        c.execute("UPDATE sessions SET observation_count = observation_count + 1 WHERE project_id = ? AND session_id = ?",
                  (scope.project_id, session_id))
        oid = c.execute(
            "INSERT INTO observations(workspace_id, project_id, session_id, kind, agent, title, body, occurred_at,"
            " created_at) VALUES (?,?,?,?,?,?,?,?,?)",
            (scope.workspace_id, scope.project_id, session_id, kind, agent, title, body, now, now)).lastrowid
        index_observation_tri(c, oid, title, body)  # as the writer's observation.append does
        return oid

    def end_session(self, scope: Scope, session_id: str) -> None:
        """Mark a session ended now (the seeder clock)."""
        self.conn.execute("UPDATE sessions SET ended_at = ?, ended_observation_count = observation_count"
                          " WHERE project_id = ? AND session_id = ?", (self.tick(), scope.project_id, session_id))

    def session(self, scope: Scope, session_id: str, *, summary_page_id: int | None, observations: int,
                obs_age_days: float, ended_days_ago: float = 1.0) -> None:
        """An ended session with ``observations`` prompts ``obs_age_days`` old and its summary page."""
        self.conn.execute(
            "INSERT INTO sessions (workspace_id, project_id, session_id, agent, started_at, last_event_at, ended_at, "
            "observation_count, ended_observation_count, summary_page_id) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (scope.workspace_id, scope.project_id, session_id, "claude-code", self._ago(ended_days_ago + 0.1),
             self._ago(ended_days_ago), self._ago(ended_days_ago), observations, observations, summary_page_id),
        )
        for i in range(observations):  # ASCII text: nothing for observations_tri
            self.conn.execute(
                "INSERT INTO observations (workspace_id, project_id, session_id, kind, agent, title, body, occurred_at, "
                "created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (scope.workspace_id, scope.project_id, session_id, "user-prompt", "claude-code", f"prompt {i}",
                 f"body {i}", self._ago(obs_age_days), self._ago(obs_age_days)),
            )

    def close(self) -> None:
        self.conn.close()
