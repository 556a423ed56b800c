"""Migration 1: the core tables: workspaces, projects, pages and their FTS, links, sessions, observations, handoffs, auth, outbox."""

from __future__ import annotations

SQL = r"""
CREATE TABLE workspaces (
  id          TEXT PRIMARY KEY,               -- uuid4 hex; names the wiki directory
  name        TEXT NOT NULL UNIQUE,
  created_at  TEXT NOT NULL
);

CREATE TABLE projects (
  id            TEXT PRIMARY KEY,             -- uuid4 hex; names the wiki directory
  workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  name          TEXT NOT NULL,
  created_at    TEXT NOT NULL,
  UNIQUE (workspace_id, name)
);

CREATE TABLE pages (
  id                INTEGER PRIMARY KEY,       -- one row per version (global PageId)
  workspace_id      TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  project_id        TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  path              TEXT NOT NULL,
  title             TEXT NOT NULL,
  body              TEXT NOT NULL,
  frontmatter       TEXT NOT NULL DEFAULT '{}', -- JSON object
  kind              TEXT NOT NULL,
  tier              TEXT NOT NULL,
  tags              TEXT NOT NULL DEFAULT '[]', -- JSON list
  pinned            INTEGER NOT NULL DEFAULT 0,
  salience          REAL,                       -- NULL = decay.salience_default
  expires_at        TEXT,
  access_count      INTEGER NOT NULL DEFAULT 0,
  last_accessed_at  TEXT,
  session_id        TEXT,                       -- set on sessions/<id>.md pages
  is_latest         INTEGER NOT NULL DEFAULT 1,
  supersedes        INTEGER REFERENCES pages(id) ON DELETE SET NULL,
  retired_reason    TEXT,                       -- superseded|deleted|evicted|expired|purged
  superseded_at     TEXT,                       -- when this version stopped being live
  content_hash      TEXT NOT NULL,
  actor             TEXT,
  created_at        TEXT NOT NULL,              -- first version of this path
  updated_at        TEXT NOT NULL               -- this version
);
CREATE UNIQUE INDEX pages_live_path ON pages(project_id, path) WHERE is_latest = 1;
CREATE INDEX pages_path ON pages(project_id, path);
CREATE INDEX pages_recent ON pages(project_id, is_latest, updated_at);
CREATE INDEX pages_updated_all ON pages(updated_at, id);
CREATE INDEX pages_session ON pages(session_id) WHERE session_id IS NOT NULL;

CREATE VIRTUAL TABLE pages_fts USING fts5(
  title, body, content='pages', content_rowid='id',
  tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER pages_fts_ins AFTER INSERT ON pages WHEN new.is_latest = 1 BEGIN
  INSERT INTO pages_fts(rowid, title, body) VALUES (new.id, new.title, new.body);
END;
CREATE TRIGGER pages_fts_retire AFTER UPDATE OF is_latest ON pages
  WHEN old.is_latest = 1 AND new.is_latest = 0 BEGIN
  INSERT INTO pages_fts(pages_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
END;
CREATE TRIGGER pages_fts_revive AFTER UPDATE OF is_latest ON pages
  WHEN old.is_latest = 0 AND new.is_latest = 1 BEGIN
  INSERT INTO pages_fts(rowid, title, body) VALUES (new.id, new.title, new.body);
END;
CREATE TRIGGER pages_fts_edit AFTER UPDATE OF title, body ON pages
  WHEN old.is_latest = 1 AND new.is_latest = 1 BEGIN
  INSERT INTO pages_fts(pages_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
  INSERT INTO pages_fts(rowid, title, body) VALUES (new.id, new.title, new.body);
END;
CREATE TRIGGER pages_fts_del AFTER DELETE ON pages WHEN old.is_latest = 1 BEGIN
  INSERT INTO pages_fts(pages_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
END;

CREATE TABLE links (
  id            INTEGER PRIMARY KEY,
  workspace_id  TEXT NOT NULL,
  project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  from_page_id  INTEGER NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
  to_workspace  TEXT,                           -- NULL = source's own workspace
  to_project    TEXT,                           -- NULL = source's own project
  to_path       TEXT NOT NULL,
  to_page_id    INTEGER REFERENCES pages(id) ON DELETE SET NULL,  -- NULL = unresolved
  link_kind     TEXT NOT NULL DEFAULT 'wikilink', -- wikilink|markdown|causes|fixes|contradicts
  label         TEXT
);
CREATE INDEX links_from ON links(from_page_id);
CREATE INDEX links_to ON links(to_page_id);
CREATE INDEX links_target ON links(to_path, to_project, to_workspace);

CREATE TABLE entities (
  id            INTEGER PRIMARY KEY,
  workspace_id  TEXT NOT NULL,
  project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name          TEXT NOT NULL,                  -- normalised (casefold, single spaces)
  display_name  TEXT NOT NULL,
  UNIQUE (project_id, name)
);
CREATE TABLE entity_page_links (
  entity_id  INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
  page_id    INTEGER NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
  PRIMARY KEY (entity_id, page_id)
);
CREATE INDEX entity_page_links_page ON entity_page_links(page_id);

CREATE TABLE sessions (
  id                       INTEGER PRIMARY KEY,
  workspace_id             TEXT NOT NULL,
  project_id               TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  session_id               TEXT NOT NULL,
  agent                    TEXT NOT NULL,
  cwd                      TEXT,
  model                    TEXT,
  started_at               TEXT NOT NULL,
  last_event_at            TEXT NOT NULL,
  ended_at                 TEXT,
  observation_count        INTEGER NOT NULL DEFAULT 0,
  ended_observation_count  INTEGER,               -- generation watermark for re-end
  summary_page_id          INTEGER REFERENCES pages(id) ON DELETE SET NULL,
  UNIQUE (project_id, session_id)
);
CREATE INDEX sessions_recent ON sessions(project_id, last_event_at);
CREATE INDEX sessions_sid ON sessions(session_id);

CREATE TABLE observations (
  id            INTEGER PRIMARY KEY,
  workspace_id  TEXT NOT NULL,
  project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  session_id    TEXT NOT NULL,
  kind          TEXT NOT NULL,
  agent         TEXT NOT NULL,
  cwd           TEXT,
  title         TEXT NOT NULL DEFAULT '',
  body          TEXT NOT NULL DEFAULT '',
  tool_name     TEXT,
  source_event  TEXT,
  extension     TEXT,
  occurred_at   TEXT NOT NULL,
  created_at    TEXT NOT NULL,
  cmd_id        TEXT
);
CREATE INDEX observations_session ON observations(project_id, session_id, id);
CREATE VIRTUAL TABLE observations_fts USING fts5(
  title, body, content='observations', content_rowid='id',
  tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER observations_fts_ins AFTER INSERT ON observations BEGIN
  INSERT INTO observations_fts(rowid, title, body) VALUES (new.id, new.title, new.body);
END;
CREATE TRIGGER observations_fts_del AFTER DELETE ON observations BEGIN
  INSERT INTO observations_fts(observations_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
END;
CREATE TRIGGER observations_fts_upd AFTER UPDATE OF title, body ON observations BEGIN
  INSERT INTO observations_fts(observations_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
  INSERT INTO observations_fts(rowid, title, body) VALUES (new.id, new.title, new.body);
END;

CREATE TABLE handoffs (
  id               INTEGER PRIMARY KEY,
  workspace_id     TEXT NOT NULL,
  project_id       TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  automatic        INTEGER NOT NULL DEFAULT 0,
  shared           INTEGER NOT NULL DEFAULT 0,
  owner            TEXT,                          -- actor that opened it
  from_agent       TEXT,
  to_agent         TEXT,
  from_session_id  TEXT,
  cwd              TEXT,
  title            TEXT NOT NULL,
  body             TEXT NOT NULL,
  status           TEXT NOT NULL DEFAULT 'open',  -- open|accepted|expired
  created_at       TEXT NOT NULL,
  closed_at        TEXT,
  accepted_by      TEXT,
  accepted_session_id TEXT
);
CREATE INDEX handoffs_open ON handoffs(project_id, status, created_at);

CREATE TABLE agent_messages (
  id                 INTEGER PRIMARY KEY,
  from_workspace_id  TEXT NOT NULL,
  from_project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  to_workspace_id    TEXT NOT NULL,
  to_project_id      TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  from_actor         TEXT,
  subject            TEXT,
  body               TEXT NOT NULL,
  status             TEXT NOT NULL DEFAULT 'pending', -- pending|claimed|cancelled
  created_at         TEXT NOT NULL,
  closed_at          TEXT,
  claimed_by         TEXT
);
CREATE INDEX agent_messages_inbox ON agent_messages(to_project_id, status, id);
CREATE INDEX agent_messages_outbox ON agent_messages(from_project_id, status, id);

CREATE TABLE page_feedback (
  id              INTEGER PRIMARY KEY,
  workspace_id    TEXT NOT NULL,
  project_id      TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  page_id         INTEGER NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
  path            TEXT NOT NULL,
  signal          TEXT NOT NULL,                  -- helpful|not_helpful|stale|wrong
  reason          TEXT,
  actor           TEXT,
  salience_after  REAL,
  created_at      TEXT NOT NULL
);
CREATE INDEX page_feedback_page ON page_feedback(page_id);

CREATE TABLE page_access (
  page_id     INTEGER NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
  actor       TEXT NOT NULL,
  count       INTEGER NOT NULL DEFAULT 0,
  last_at     TEXT NOT NULL,
  PRIMARY KEY (page_id, actor)
);

CREATE TABLE page_evidence (
  id            INTEGER PRIMARY KEY,
  workspace_id  TEXT NOT NULL,
  project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  page_id       INTEGER NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
  source_kind   TEXT NOT NULL,                   -- session|observation|page
  source_id     TEXT NOT NULL,
  created_at    TEXT NOT NULL
);
CREATE INDEX page_evidence_page ON page_evidence(page_id);

CREATE TABLE page_embeddings (
  page_id       INTEGER PRIMARY KEY REFERENCES pages(id) ON DELETE CASCADE,
  workspace_id  TEXT NOT NULL,
  project_id    TEXT NOT NULL,
  provider      TEXT NOT NULL,
  model         TEXT NOT NULL,
  dim           INTEGER NOT NULL,
  vector        BLOB NOT NULL,                   -- float32 little-endian, dim values
  content_hash  TEXT NOT NULL,
  created_at    TEXT NOT NULL
);
CREATE INDEX page_embeddings_identity ON page_embeddings(provider, model, dim);

CREATE TABLE session_consolidation_jobs (
  id               INTEGER PRIMARY KEY,
  workspace_id     TEXT NOT NULL,
  project_id       TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  session_id       TEXT NOT NULL,
  generation       INTEGER NOT NULL,             -- observation count at session end
  status           TEXT NOT NULL DEFAULT 'pending', -- pending|leased|done|failed|parked
  attempts         INTEGER NOT NULL DEFAULT 0,
  lease_owner      TEXT,
  lease_until      TEXT,
  next_attempt_at  TEXT,
  last_error       TEXT,
  created_at       TEXT NOT NULL,
  updated_at       TEXT NOT NULL,
  UNIQUE (project_id, session_id, generation)
);
CREATE INDEX consolidation_jobs_due ON session_consolidation_jobs(status, next_attempt_at);

CREATE TABLE auto_improve_proposals (
  id               INTEGER PRIMARY KEY,
  workspace_id     TEXT NOT NULL,
  project_id       TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  session_id       TEXT,
  path             TEXT NOT NULL,
  title            TEXT,
  body             TEXT NOT NULL,
  frontmatter      TEXT NOT NULL DEFAULT '{}',
  rationale        TEXT,
  confidence       REAL,
  target_page_id   INTEGER,                      -- snapshot of the page it would replace
  status           TEXT NOT NULL DEFAULT 'pending', -- pending|approved|rejected
  actor            TEXT,
  created_at       TEXT NOT NULL,
  decided_at       TEXT,
  decided_by       TEXT,
  applied_page_id  INTEGER
);
CREATE INDEX auto_improve_pending ON auto_improve_proposals(project_id, status);

CREATE TABLE auto_improve_runs (
  id            INTEGER PRIMARY KEY,
  workspace_id  TEXT NOT NULL,
  project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  session_id    TEXT NOT NULL,
  status        TEXT NOT NULL,                   -- claimed|done|skipped|failed
  detail        TEXT,
  created_at    TEXT NOT NULL,
  UNIQUE (project_id, session_id)
);

CREATE TABLE auto_improve_state (
  project_id    TEXT PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
  watermark_at  TEXT NOT NULL                    -- sessions ended before this are history
);

CREATE TABLE audit_log (
  id            INTEGER PRIMARY KEY,
  at            TEXT NOT NULL,
  actor         TEXT,
  op            TEXT NOT NULL,
  workspace_id  TEXT,
  project_id    TEXT,
  target        TEXT,
  detail        TEXT,                            -- JSON
  cmd_id        TEXT
);
CREATE INDEX audit_log_at ON audit_log(at DESC);

CREATE TABLE ingest_keys (
  key         TEXT PRIMARY KEY,                  -- idempotency key or cmd_id
  cmd_id      TEXT NOT NULL,
  op          TEXT NOT NULL,
  result      TEXT,                              -- JSON reply replayed to a duplicate
  created_at  TEXT NOT NULL
);

CREATE TABLE users (
  id          INTEGER PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE,
  is_root     INTEGER NOT NULL DEFAULT 0,
  created_at  TEXT NOT NULL,
  disabled_at TEXT
);
CREATE TABLE api_keys (
  id            INTEGER PRIMARY KEY,
  user_id       INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  name          TEXT,
  prefix        TEXT NOT NULL,                   -- first chars, for listing
  key_hash      TEXT NOT NULL UNIQUE,            -- sha256 hex of the full key
  created_at    TEXT NOT NULL,
  revoked_at    TEXT,
  last_used_at  TEXT
);
CREATE TABLE grants (
  user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  workspace  TEXT NOT NULL,                      -- name or '*'
  project    TEXT NOT NULL,                      -- name or '*'
  can_read   INTEGER NOT NULL DEFAULT 1,
  can_write  INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (user_id, workspace, project)
);

CREATE TABLE meta (
  key    TEXT PRIMARY KEY,
  value  TEXT NOT NULL
);

-- Wiki file effects committed with a writer batch and not yet applied to disk; the writer
-- replays them at start (crash between SQLite COMMIT and the file flush).
CREATE TABLE wiki_outbox (
  id          INTEGER PRIMARY KEY,
  rel         TEXT NOT NULL,                     -- <workspace_id>/<project_id>/<path>
  action      TEXT NOT NULL,                     -- write|delete|append
  text        TEXT,
  created_at  TEXT NOT NULL
);
"""
