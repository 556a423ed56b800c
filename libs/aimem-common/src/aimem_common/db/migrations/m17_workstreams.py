"""Migration 17: managed workstreams (``aimem run``): ledger, events with FTS, harness cursors, runs with leases."""

from __future__ import annotations

# Issue 29 (managed workstreams, ``aimem run``): one workstream per project checkout root, its
# append-only visible transcript (``seq`` per workstream; the immutable JSONL segments under
# ``<data_dir>/raw/workstreams/<id>/`` are the source of truth, these rows the index), full-text
# search over it, one cursor row per harness (what it was last handed, its native session) and
# the runs holding a renewable lease.
SQL = """
CREATE TABLE workstreams (
  id            TEXT PRIMARY KEY,                -- uuid4 hex; names raw/workstreams/<id>/
  workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  checkout_root TEXT NOT NULL,                   -- normalised (aimem_common.locations)
  name          TEXT NOT NULL,
  last_seq      INTEGER NOT NULL DEFAULT 0,
  created_at    TEXT NOT NULL,
  updated_at    TEXT NOT NULL,
  UNIQUE (project_id, checkout_root)
);
CREATE TABLE workstream_events (
  id            INTEGER PRIMARY KEY,
  workstream_id TEXT NOT NULL REFERENCES workstreams(id) ON DELETE CASCADE,
  workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  seq           INTEGER NOT NULL,
  harness       TEXT NOT NULL,
  run_id        TEXT,
  role          TEXT NOT NULL,                   -- user | assistant | tool | checkpoint
  text          TEXT NOT NULL,                   -- sanitised, redacted
  ts            TEXT NOT NULL,
  source_key    TEXT,                            -- where it came from (idempotent re-import)
  segment       TEXT NOT NULL,                   -- the JSONL segment file holding it
  UNIQUE (workstream_id, seq),
  UNIQUE (workstream_id, source_key)
);
CREATE VIRTUAL TABLE workstream_events_fts USING fts5(text, content='workstream_events', content_rowid='id');
CREATE TRIGGER workstream_events_ai AFTER INSERT ON workstream_events BEGIN
  INSERT INTO workstream_events_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER workstream_events_ad AFTER DELETE ON workstream_events BEGIN
  INSERT INTO workstream_events_fts(workstream_events_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TABLE workstream_harnesses (
  workstream_id     TEXT NOT NULL REFERENCES workstreams(id) ON DELETE CASCADE,
  harness           TEXT NOT NULL,
  delivered_seq     INTEGER NOT NULL DEFAULT 0,  -- every event up to here was handed to it (or is its own)
  native_session_id TEXT,
  last_run_at       TEXT NOT NULL,
  PRIMARY KEY (workstream_id, harness)
);
CREATE TABLE managed_runs (
  id               TEXT PRIMARY KEY,             -- the run id (AIMEM_RUN_ID of the child)
  workstream_id    TEXT NOT NULL REFERENCES workstreams(id) ON DELETE CASCADE,
  workspace_id     TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  project_id       TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  harness          TEXT NOT NULL,
  cwd              TEXT,
  state            TEXT NOT NULL,                -- active | released | cancelled | expired
  started_at       TEXT NOT NULL,
  renewed_at       TEXT NOT NULL,
  lease_expires_at TEXT NOT NULL,
  ended_at         TEXT,
  exit_code        INTEGER
);
CREATE INDEX managed_runs_workstream ON managed_runs(workstream_id, state);
"""
