"""A migrated SQLite store seeded row by row, for tests that need a store without a writer.

Tests only: it opens the file read-write itself, which no service may do.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from aimem_common.models import kind_for_path, tier_for

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def ago(days: float, now: datetime = NOW) -> str:
    """ISO timestamp ``days`` before ``now``."""
    return (now - timedelta(days=days)).isoformat()


class Seed:
    """Insert workspaces, projects, pages, sessions and observations directly."""

    def __init__(self, path: Path):
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        from aimem_common.db.connect import migrate

        migrate(self.conn)
        self._ws: dict[str, str] = {}

    def project(self, name: str, workspace: str = "default") -> tuple[str, str]:
        if workspace not in self._ws:
            wid = uuid.uuid4().hex
            self.conn.execute("INSERT INTO workspaces VALUES (?, ?, ?)", (wid, workspace, NOW.isoformat()))
            self._ws[workspace] = wid
        wid = self._ws[workspace]
        pid = uuid.uuid4().hex
        self.conn.execute("INSERT INTO projects(id, workspace_id, name, created_at) VALUES (?, ?, ?, ?)",
                          (pid, wid, name, NOW.isoformat()))
        return wid, pid

    def page(self, scope: tuple[str, str], path: str, *, age_days: float = 0, body: str = "body", title: str | None = None,
             pinned: bool = False, salience: float | None = None, expires_at: str | None = None,
             access_count: int = 0, accessed_days_ago: float | None = None, is_latest: int = 1,
             retired_reason: str | None = None, superseded_days_ago: float | None = None,
             session_id: str | None = None, tier: str | None = None, frontmatter: dict | None = None) -> int:
        kind = kind_for_path(path)
        cur = self.conn.execute(
            "INSERT INTO pages (workspace_id, project_id, path, title, body, frontmatter, kind, tier, pinned, salience, "
            "expires_at, access_count, last_accessed_at, session_id, is_latest, retired_reason, superseded_at, "
            "content_hash, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (scope[0], scope[1], path, title or path, body, json.dumps(frontmatter or {}), kind.value,
             tier or tier_for(kind).value, int(pinned), salience, expires_at, access_count,
             ago(accessed_days_ago) if accessed_days_ago is not None else None, session_id, is_latest,
             retired_reason, ago(superseded_days_ago) if superseded_days_ago is not None else None,
             uuid.uuid4().hex, ago(age_days), ago(age_days)),
        )
        return int(cur.lastrowid)

    def session(self, scope: tuple[str, str], session_id: str, *, summary_page_id: int | None, observations: int,
                obs_age_days: float, ended_days_ago: float = 1.0) -> None:
        self.conn.execute(
            "INSERT INTO sessions (workspace_id, project_id, session_id, agent, started_at, last_event_at, ended_at, "
            "observation_count, ended_observation_count, summary_page_id) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (scope[0], scope[1], session_id, "claude-code", ago(ended_days_ago + 0.1), ago(ended_days_ago),
             ago(ended_days_ago), observations, observations, summary_page_id),
        )
        for i in range(observations):
            self.conn.execute(
                "INSERT INTO observations (workspace_id, project_id, session_id, kind, agent, title, body, occurred_at, "
                "created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (scope[0], scope[1], session_id, "user-prompt", "claude-code", f"prompt {i}", f"body {i}",
                 ago(obs_age_days), ago(obs_age_days)),
            )


