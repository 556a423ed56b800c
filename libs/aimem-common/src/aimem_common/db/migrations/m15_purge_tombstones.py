"""Migration 15: purge tombstones."""

from __future__ import annotations

# Purge tombstones (issue 34): what a purge removed, so nothing that arrives later brings it
# back. Written in the purge's own transaction; names are kept because the ids' rows are gone.
# kind 'session' matches by session_id (any project: client ids are UUIDs); 'project' and
# 'workspace' match events for those names that happened at or before ``purged_at``.
SQL = """
CREATE TABLE purge_tombstones (
  id               INTEGER PRIMARY KEY,
  kind             TEXT NOT NULL CHECK (kind IN ('session', 'project', 'workspace')),
  workspace_id     TEXT NOT NULL,
  project_id       TEXT,                         -- NULL for a workspace purge
  session_id       TEXT,                         -- kind 'session' only
  workspace        TEXT NOT NULL,                -- names at purge time
  project          TEXT,
  parent_id        INTEGER REFERENCES purge_tombstones(id) ON DELETE SET NULL,  -- the project/workspace purge
  purged_at        TEXT NOT NULL,
  actor            TEXT NOT NULL,
  cmd_id           TEXT,
  removed          TEXT NOT NULL DEFAULT '{}',   -- JSON: the purge's deleted counts
  refused_events   INTEGER NOT NULL DEFAULT 0,   -- late commands dropped since (writer + ingress 410s)
  refused          TEXT NOT NULL DEFAULT '{}',   -- JSON: refused counts by op
  last_refused_at  TEXT,
  lifted_at        TEXT,                         -- set by purge.lift: the id may be reused
  lifted_by        TEXT
);
CREATE INDEX purge_tombstones_session ON purge_tombstones(session_id)
  WHERE session_id IS NOT NULL AND lifted_at IS NULL;
CREATE INDEX purge_tombstones_names ON purge_tombstones(workspace, project)
  WHERE kind != 'session' AND lifted_at IS NULL;
"""
