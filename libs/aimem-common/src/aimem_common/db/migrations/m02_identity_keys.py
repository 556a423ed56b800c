"""Migration 2: project identity keys, session end reasons, handoff roots and supersession."""

from __future__ import annotations

# Project identity keys, session end reasons, handoff roots and supersession.
# A project created before keys existed keeps NULL keys and is adopted by the first keyed
# event asking for its name; a handoff without a root keeps matching by its cwd.
SQL = r"""
ALTER TABLE projects ADD COLUMN root TEXT;          -- repository top level (hook client)
ALTER TABLE projects ADD COLUMN origin TEXT;        -- normalised origin URL: host/owner/repo
CREATE INDEX projects_origin ON projects(workspace_id, origin) WHERE origin IS NOT NULL;
CREATE INDEX projects_root ON projects(workspace_id, root) WHERE root IS NOT NULL;

ALTER TABLE sessions ADD COLUMN root TEXT;          -- project root the session ran in
ALTER TABLE sessions ADD COLUMN end_reason TEXT;    -- exit|clear|logout|idle|finalize-session|...
CREATE INDEX sessions_open ON sessions(ended_at, last_event_at) WHERE ended_at IS NULL;

ALTER TABLE handoffs ADD COLUMN root TEXT;          -- project root: matched before the cwd
ALTER TABLE handoffs ADD COLUMN superseded_by INTEGER;  -- the claimed handoff that folded it in
"""
