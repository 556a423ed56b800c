"""Migration 18: backfill on start (`aimem_cli.backfill`): one row per project, the durable "at most once", its state and counts."""

from __future__ import annotations

SQL = """
CREATE TABLE project_backfills (
  project_id    TEXT PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
  workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  agent         TEXT NOT NULL,                 -- the client whose history is imported
  session_id    TEXT,                          -- the live session whose start claimed it
  state         TEXT NOT NULL,                 -- running | done | failed
  claimed_at    TEXT NOT NULL,
  finished_at   TEXT,
  files         INTEGER NOT NULL DEFAULT 0,    -- transcripts read
  sessions      INTEGER NOT NULL DEFAULT 0,    -- sessions of this project found in them
  events        INTEGER NOT NULL DEFAULT 0,    -- events sent
  new_events    INTEGER NOT NULL DEFAULT 0,    -- of those, new to the store
  truncated     INTEGER NOT NULL DEFAULT 0,    -- 1: a bound (files, bytes, time) stopped it early
  error         TEXT                           -- why it failed (one line)
);
"""
