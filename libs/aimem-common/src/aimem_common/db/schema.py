"""The SQLite schema as forward-only migrations keyed by ``PRAGMA user_version``.

Only the writer applies them (``connect.open_writer``); readers wait until the file
reaches ``SCHEMA_VERSION``. Every domain row carries ``workspace_id``/``project_id``
(invariant 4). FTS tables are external-content FTS5 kept in sync by triggers in the same
transaction as the rows (invariant 3); ``pages_fts`` indexes live page versions only.
"""

from __future__ import annotations

MIGRATION_1 = r"""
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

# Project identity keys, session end reasons, handoff roots and supersession.
# A project created before keys existed keeps NULL keys and is adopted by the first keyed
# event asking for its name; a handoff without a root keeps matching by its cwd.
MIGRATION_2 = r"""
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

# Imported transcripts (``aimem import``): how many of a session's observations came from
# an import. A session with any live (hook) observation is owned by its hooks: later
# imported observations for it are skipped, so importing after live capture never
# duplicates (observation_count - imported_count = live events).
MIGRATION_3 = """
ALTER TABLE sessions ADD COLUMN imported_count INTEGER NOT NULL DEFAULT 0;
"""

# The web interface (query ``/web``): people log in with a password (argon2id hash, made by
# the query service; the plaintext never reaches the bus) or an API key, and hold a
# server-side session. The cookie carries a random token; only its sha256 is stored, so a
# copy of the DB cannot be replayed as a cookie. A session dies with its user (cascade), its
# API key (cascade on delete, revoked_at checked on read), a password change, or the root
# token it was opened with (``root_fp`` must match the configured token's fingerprint).
MIGRATION_4 = r"""
ALTER TABLE users ADD COLUMN password_hash TEXT;         -- argon2id encoded; NULL = no password login
ALTER TABLE users ADD COLUMN password_changed_at TEXT;

CREATE TABLE web_sessions (
  token_hash  TEXT PRIMARY KEY,                  -- sha256 hex of the cookie's token
  user_id     INTEGER REFERENCES users(id) ON DELETE CASCADE,   -- NULL = a root-token login
  api_key_id  INTEGER REFERENCES api_keys(id) ON DELETE CASCADE, -- set for an API-key login
  root_fp     TEXT,                              -- sha256 hex of the root token (root-token logins)
  created_at  TEXT NOT NULL,
  expires_at  TEXT NOT NULL,
  client      TEXT                               -- User-Agent at login (display only)
);
CREATE INDEX web_sessions_user ON web_sessions(user_id);
CREATE INDEX web_sessions_expiry ON web_sessions(expires_at);
"""

# Migration 6, part 1: ``pages_fts`` also indexes ``project_id``, so a project-scoped search
# intersects the project's doclist inside FTS5 (``project_id : "<id>" AND (...)``) and
# computes bm25 for that project's matches only, not for every project's (the query's cost
# grew with the whole vault). Part 2: ``pages_tri``, a trigram FTS5 index over the live pages whose text holds an
# unspaced script, so a word inside a Chinese/Japanese/Korean/Thai sentence is findable
# (unicode61 makes one token of a whole run). Same transaction as the page rows (triggers,
# invariant 3); the WHEN clauses of insert and delete test the same predicate, so a 'delete'
# is only ever sent for a row that was indexed. ``pages_tri_vocab`` lists its trigrams: a
# 1–2 character query word is expanded to the trigrams that start with it.
# An all-ASCII text (byte length = character length, ~3 µs for 1.5 KB) skips the GLOB
# (~200 µs for 1.5 KB): CASE evaluates its branches lazily, AND does not.
MIGRATION_6 = """
DROP TRIGGER pages_fts_ins;
DROP TRIGGER pages_fts_retire;
DROP TRIGGER pages_fts_revive;
DROP TRIGGER pages_fts_edit;
DROP TRIGGER pages_fts_del;
DROP TABLE pages_fts;
CREATE VIRTUAL TABLE pages_fts USING fts5(
  title, body, project_id, content='pages', content_rowid='id',
  tokenize='porter unicode61 remove_diacritics 2'
);
INSERT INTO pages_fts(rowid, title, body, project_id)
  SELECT id, title, body, project_id FROM pages WHERE is_latest = 1;
CREATE TRIGGER pages_fts_ins AFTER INSERT ON pages WHEN new.is_latest = 1 BEGIN
  INSERT INTO pages_fts(rowid, title, body, project_id) VALUES (new.id, new.title, new.body, new.project_id);
END;
CREATE TRIGGER pages_fts_retire AFTER UPDATE OF is_latest ON pages
  WHEN old.is_latest = 1 AND new.is_latest = 0 BEGIN
  INSERT INTO pages_fts(pages_fts, rowid, title, body, project_id)
    VALUES ('delete', old.id, old.title, old.body, old.project_id);
END;
CREATE TRIGGER pages_fts_revive AFTER UPDATE OF is_latest ON pages
  WHEN old.is_latest = 0 AND new.is_latest = 1 BEGIN
  INSERT INTO pages_fts(rowid, title, body, project_id) VALUES (new.id, new.title, new.body, new.project_id);
END;
CREATE TRIGGER pages_fts_edit AFTER UPDATE OF title, body, project_id ON pages
  WHEN old.is_latest = 1 AND new.is_latest = 1 BEGIN
  INSERT INTO pages_fts(pages_fts, rowid, title, body, project_id)
    VALUES ('delete', old.id, old.title, old.body, old.project_id);
  INSERT INTO pages_fts(rowid, title, body, project_id) VALUES (new.id, new.title, new.body, new.project_id);
END;
CREATE TRIGGER pages_fts_del AFTER DELETE ON pages WHEN old.is_latest = 1 BEGIN
  INSERT INTO pages_fts(pages_fts, rowid, title, body, project_id)
    VALUES ('delete', old.id, old.title, old.body, old.project_id);
END;
CREATE VIRTUAL TABLE pages_tri USING fts5(
  title, body, content='pages', content_rowid='id', tokenize='trigram'
);
CREATE VIRTUAL TABLE pages_tri_vocab USING fts5vocab(pages_tri, 'row');
INSERT INTO pages_tri(rowid, title, body)
  SELECT p.id, p.title, p.body FROM pages p WHERE p.is_latest = 1 AND CASE WHEN length(CAST((coalesce(p.title, '') || ' ' || coalesce(p.body, '')) AS BLOB)) = length((coalesce(p.title, '') || ' ' || coalesce(p.body, ''))) THEN 0 ELSE (coalesce(p.title, '') || ' ' || coalesce(p.body, '')) GLOB '*[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]*' END;
CREATE TRIGGER pages_tri_ins AFTER INSERT ON pages WHEN new.is_latest = 1 AND CASE WHEN length(CAST((coalesce(new.title, '') || ' ' || coalesce(new.body, '')) AS BLOB)) = length((coalesce(new.title, '') || ' ' || coalesce(new.body, ''))) THEN 0 ELSE (coalesce(new.title, '') || ' ' || coalesce(new.body, '')) GLOB '*[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]*' END BEGIN
  INSERT INTO pages_tri(rowid, title, body) VALUES (new.id, new.title, new.body);
END;
CREATE TRIGGER pages_tri_retire AFTER UPDATE OF is_latest ON pages
  WHEN old.is_latest = 1 AND new.is_latest = 0 AND CASE WHEN length(CAST((coalesce(old.title, '') || ' ' || coalesce(old.body, '')) AS BLOB)) = length((coalesce(old.title, '') || ' ' || coalesce(old.body, ''))) THEN 0 ELSE (coalesce(old.title, '') || ' ' || coalesce(old.body, '')) GLOB '*[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]*' END BEGIN
  INSERT INTO pages_tri(pages_tri, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
END;
CREATE TRIGGER pages_tri_revive AFTER UPDATE OF is_latest ON pages
  WHEN old.is_latest = 0 AND new.is_latest = 1 AND CASE WHEN length(CAST((coalesce(new.title, '') || ' ' || coalesce(new.body, '')) AS BLOB)) = length((coalesce(new.title, '') || ' ' || coalesce(new.body, ''))) THEN 0 ELSE (coalesce(new.title, '') || ' ' || coalesce(new.body, '')) GLOB '*[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]*' END BEGIN
  INSERT INTO pages_tri(rowid, title, body) VALUES (new.id, new.title, new.body);
END;
CREATE TRIGGER pages_tri_edit AFTER UPDATE OF title, body ON pages
  WHEN old.is_latest = 1 AND new.is_latest = 1 BEGIN
  INSERT INTO pages_tri(pages_tri, rowid, title, body)
    SELECT 'delete', old.id, old.title, old.body WHERE CASE WHEN length(CAST((coalesce(old.title, '') || ' ' || coalesce(old.body, '')) AS BLOB)) = length((coalesce(old.title, '') || ' ' || coalesce(old.body, ''))) THEN 0 ELSE (coalesce(old.title, '') || ' ' || coalesce(old.body, '')) GLOB '*[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]*' END;
  INSERT INTO pages_tri(rowid, title, body)
    SELECT new.id, new.title, new.body WHERE CASE WHEN length(CAST((coalesce(new.title, '') || ' ' || coalesce(new.body, '')) AS BLOB)) = length((coalesce(new.title, '') || ' ' || coalesce(new.body, ''))) THEN 0 ELSE (coalesce(new.title, '') || ' ' || coalesce(new.body, '')) GLOB '*[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]*' END;
END;
CREATE TRIGGER pages_tri_del AFTER DELETE ON pages WHEN old.is_latest = 1 AND CASE WHEN length(CAST((coalesce(old.title, '') || ' ' || coalesce(old.body, '')) AS BLOB)) = length((coalesce(old.title, '') || ' ' || coalesce(old.body, ''))) THEN 0 ELSE (coalesce(old.title, '') || ' ' || coalesce(old.body, '')) GLOB '*[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]*' END BEGIN
  INSERT INTO pages_tri(pages_tri, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
END;
"""

# Commands the writer gave up on (a handler bug, a transient failure past
# writer.max_deliver, an error no caller was waiting for), kept whole with the reason so
# `aimem dead-letters replay` can send them again. Store faults never land here.
MIGRATION_7 = """
CREATE TABLE dead_letters (
  id           INTEGER PRIMARY KEY,
  cmd_id       TEXT NOT NULL,
  op           TEXT NOT NULL,
  workspace    TEXT,
  project      TEXT,
  envelope     TEXT NOT NULL,                    -- the command as received (JSON)
  reason       TEXT NOT NULL,                    -- why it was given up (one line)
  error_code   TEXT NOT NULL,
  deliveries   INTEGER NOT NULL DEFAULT 1,
  created_at   TEXT NOT NULL,
  replayed_at  TEXT                              -- set when sent again; NULL = open
);
CREATE INDEX dead_letters_open ON dead_letters(replayed_at, id);
"""

# ``observations_fts`` also indexes ``project_id`` (as ``pages_fts`` since migration 6): the
# turns stream of a project-scoped search and the ``raw_hits`` fallback intersect the
# project's doclist inside FTS5 instead of ranking every project's matching observations.
MIGRATION_8 = """
DROP TRIGGER observations_fts_ins;
DROP TRIGGER observations_fts_del;
DROP TRIGGER observations_fts_upd;
DROP TABLE observations_fts;
CREATE VIRTUAL TABLE observations_fts USING fts5(
  title, body, project_id, content='observations', content_rowid='id',
  tokenize='porter unicode61 remove_diacritics 2'
);
INSERT INTO observations_fts(observations_fts) VALUES ('rebuild');
CREATE TRIGGER observations_fts_ins AFTER INSERT ON observations BEGIN
  INSERT INTO observations_fts(rowid, title, body, project_id) VALUES (new.id, new.title, new.body, new.project_id);
END;
CREATE TRIGGER observations_fts_del AFTER DELETE ON observations BEGIN
  INSERT INTO observations_fts(observations_fts, rowid, title, body, project_id)
    VALUES ('delete', old.id, old.title, old.body, old.project_id);
END;
CREATE TRIGGER observations_fts_upd AFTER UPDATE OF title, body, project_id ON observations BEGIN
  INSERT INTO observations_fts(observations_fts, rowid, title, body, project_id)
    VALUES ('delete', old.id, old.title, old.body, old.project_id);
  INSERT INTO observations_fts(rowid, title, body, project_id) VALUES (new.id, new.title, new.body, new.project_id);
END;
"""

# A project's counts (the brief, status) scanned the whole links and page_embeddings tables:
# 1.6 ms at 20,000 links, linear in the store (and a scan of every vector blob once
# embeddings are on). Index-only and idempotent (IF NOT EXISTS).
MIGRATION_9 = """
CREATE INDEX IF NOT EXISTS links_project ON links(project_id);
CREATE INDEX IF NOT EXISTS page_embeddings_project ON page_embeddings(project_id);
"""

# The page text index (tantivy, ``<data_dir>/search/``) is derived from ``pages``: every change
# of a live page's indexed text or project (insert, edit, retire, revive, move, delete — a
# project's delete cascades here too) records the page id in ``search_outbox`` in the same
# transaction as the page row. The writer drains it after COMMIT (index the page's current
# state, commit the index, then delete the drained rows), so a crash between the two commits
# only replays ids. Rows of dead versions never enter.
# ``pages_live``: the live page ids with their expiry, so a search checks whether a candidate
# is live (the fts stream's best pages, every page of a matched entity) in this small index
# (~20 bytes a page, mostly in the page cache) instead of reading each page row (random reads
# of the whole table: at 100k pages the entity stream's counts took 5x the CPU). Queries name
# it (``INDEXED BY``): the planner prefers the rowid. ``entities_name``: a global search's
# entity lookup by name (the unique index leads with the project).
MIGRATION_10 = """
CREATE TABLE search_outbox (
  id       INTEGER PRIMARY KEY,
  page_id  INTEGER NOT NULL
);
CREATE TRIGGER search_outbox_ins AFTER INSERT ON pages WHEN new.is_latest = 1 BEGIN
  INSERT INTO search_outbox(page_id) VALUES (new.id);
END;
CREATE TRIGGER search_outbox_upd AFTER UPDATE OF is_latest, title, body, project_id ON pages
  WHEN old.is_latest = 1 OR new.is_latest = 1 BEGIN
  INSERT INTO search_outbox(page_id) VALUES (new.id);
END;
CREATE TRIGGER search_outbox_del AFTER DELETE ON pages WHEN old.is_latest = 1 BEGIN
  INSERT INTO search_outbox(page_id) VALUES (old.id);
END;
CREATE INDEX pages_live ON pages(id, is_latest, expires_at) WHERE is_latest = 1;
CREATE INDEX entities_name ON entities(name);
"""

# Per-chunk vectors: a page is embedded in ~200-token windows (aimem_common.chunking) so a long
# page is findable by any part of it; a page's vector score is its best chunk. Rows carry the
# {provider, model, dim} identity and the page's content_hash they were made from; rows of
# another identity or an older hash are stale and ignored by the read side. The id orders
# writes (AUTOINCREMENT: a page's rows deleted and rewritten never get their old ids back), so a
# reader's in-memory copy loads only the rows above the last id it saw.
MIGRATION_11 = """
CREATE TABLE page_chunk_embeddings (
  id            INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused: a rewrite always gets higher ids
  page_id       INTEGER NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
  chunk         INTEGER NOT NULL,                -- 0-based window index within the page
  provider      TEXT NOT NULL,
  model         TEXT NOT NULL,
  dim           INTEGER NOT NULL,
  vector        BLOB NOT NULL,                   -- float32 little-endian, dim values, L2-normalised
  content_hash  TEXT NOT NULL,
  created_at    TEXT NOT NULL,
  UNIQUE (page_id, chunk)
);
"""

# ``pages_tri`` again, contentless and padded, with an 'instance' vocabulary: a 1–2 character
# query word (``猫``, ``数据``) is matched by the trigrams that *start* with it, read by a range
# scan of ``pages_tri_inst`` (every page holding them, then kept to the scope), where migration
# 6 expanded it to the first 64 trigrams of a global 'row' vocabulary (other projects' trigrams
# crowded the scope's out). Each column is indexed with ``TRI_PAD`` (two spaces) appended, so a
# word in a column's last two characters (``これは猫``) or a column of 1–2 characters still has
# a trigram starting with it. The indexed text is no longer the page's, hence contentless
# (``content=''``): a 'delete' carries the padded values, as ``pages_tri_insert_sql`` inserts them.
MIGRATION_12 = """
DROP TRIGGER pages_tri_ins;
DROP TRIGGER pages_tri_retire;
DROP TRIGGER pages_tri_revive;
DROP TRIGGER pages_tri_edit;
DROP TRIGGER pages_tri_del;
DROP TABLE pages_tri_vocab;
DROP TABLE pages_tri;
CREATE VIRTUAL TABLE pages_tri USING fts5(title, body, content='', tokenize='trigram');
CREATE VIRTUAL TABLE pages_tri_inst USING fts5vocab(pages_tri, 'instance');
INSERT INTO pages_tri(rowid, title, body) SELECT p.id, coalesce(p.title, '') || '  ', coalesce(p.body, '') || '  ' FROM pages p WHERE p.is_latest = 1 AND CASE WHEN length(CAST((coalesce(p.title, '') || ' ' || coalesce(p.body, '')) AS BLOB)) = length((coalesce(p.title, '') || ' ' || coalesce(p.body, ''))) THEN 0 ELSE (coalesce(p.title, '') || ' ' || coalesce(p.body, '')) GLOB '*[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]*' END;
CREATE TRIGGER pages_tri_ins AFTER INSERT ON pages WHEN new.is_latest = 1 AND CASE WHEN length(CAST((coalesce(new.title, '') || ' ' || coalesce(new.body, '')) AS BLOB)) = length((coalesce(new.title, '') || ' ' || coalesce(new.body, ''))) THEN 0 ELSE (coalesce(new.title, '') || ' ' || coalesce(new.body, '')) GLOB '*[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]*' END BEGIN
  INSERT INTO pages_tri(rowid, title, body) VALUES (new.id, coalesce(new.title, '') || '  ', coalesce(new.body, '') || '  ');
END;
CREATE TRIGGER pages_tri_retire AFTER UPDATE OF is_latest ON pages
  WHEN old.is_latest = 1 AND new.is_latest = 0 AND CASE WHEN length(CAST((coalesce(old.title, '') || ' ' || coalesce(old.body, '')) AS BLOB)) = length((coalesce(old.title, '') || ' ' || coalesce(old.body, ''))) THEN 0 ELSE (coalesce(old.title, '') || ' ' || coalesce(old.body, '')) GLOB '*[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]*' END BEGIN
  INSERT INTO pages_tri(pages_tri, rowid, title, body) VALUES ('delete', old.id, coalesce(old.title, '') || '  ', coalesce(old.body, '') || '  ');
END;
CREATE TRIGGER pages_tri_revive AFTER UPDATE OF is_latest ON pages
  WHEN old.is_latest = 0 AND new.is_latest = 1 AND CASE WHEN length(CAST((coalesce(new.title, '') || ' ' || coalesce(new.body, '')) AS BLOB)) = length((coalesce(new.title, '') || ' ' || coalesce(new.body, ''))) THEN 0 ELSE (coalesce(new.title, '') || ' ' || coalesce(new.body, '')) GLOB '*[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]*' END BEGIN
  INSERT INTO pages_tri(rowid, title, body) VALUES (new.id, coalesce(new.title, '') || '  ', coalesce(new.body, '') || '  ');
END;
CREATE TRIGGER pages_tri_edit AFTER UPDATE OF title, body ON pages
  WHEN old.is_latest = 1 AND new.is_latest = 1 BEGIN
  INSERT INTO pages_tri(pages_tri, rowid, title, body)
    SELECT 'delete', old.id, coalesce(old.title, '') || '  ', coalesce(old.body, '') || '  ' WHERE CASE WHEN length(CAST((coalesce(old.title, '') || ' ' || coalesce(old.body, '')) AS BLOB)) = length((coalesce(old.title, '') || ' ' || coalesce(old.body, ''))) THEN 0 ELSE (coalesce(old.title, '') || ' ' || coalesce(old.body, '')) GLOB '*[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]*' END;
  INSERT INTO pages_tri(rowid, title, body)
    SELECT new.id, coalesce(new.title, '') || '  ', coalesce(new.body, '') || '  ' WHERE CASE WHEN length(CAST((coalesce(new.title, '') || ' ' || coalesce(new.body, '')) AS BLOB)) = length((coalesce(new.title, '') || ' ' || coalesce(new.body, ''))) THEN 0 ELSE (coalesce(new.title, '') || ' ' || coalesce(new.body, '')) GLOB '*[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]*' END;
END;
CREATE TRIGGER pages_tri_del AFTER DELETE ON pages WHEN old.is_latest = 1 AND CASE WHEN length(CAST((coalesce(old.title, '') || ' ' || coalesce(old.body, '')) AS BLOB)) = length((coalesce(old.title, '') || ' ' || coalesce(old.body, ''))) THEN 0 ELSE (coalesce(old.title, '') || ' ' || coalesce(old.body, '')) GLOB '*[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]*' END BEGIN
  INSERT INTO pages_tri(pages_tri, rowid, title, body) VALUES ('delete', old.id, coalesce(old.title, '') || '  ', coalesce(old.body, '') || '  ');
END;
"""

# ``observations_tri``: the captured observations holding an unspaced-script character, as
# ``pages_tri`` (contentless, trigram, columns padded with ``TRI_PAD``, an 'instance'
# vocabulary for 1–2 character words), so a running session's ``缓存`` is found though
# ``observations_fts`` (unicode61) holds the whole CJK run as one token. The hot insert path
# decides in Python (``index_observation_tri``: 0.4 µs for ASCII text, ~16 µs for a 1.5 KB body
# with an em-dash, where this GLOB costs ~340 µs) in the same transaction as the row. A
# 'delete' is sent only for a row the index holds: its ``_docsize`` shadow table has exactly
# one row per indexed rowid (a contentless table is corrupted by deleting values it never
# held, and its 'integrity-check' does not notice). A moved observation keeps its row here:
# the project is read from ``observations`` at query time. The migration indexes the
# existing rows with ``aimem_unspaced`` (Python, registered by ``connect.migrate``).
MIGRATION_13 = """
CREATE VIRTUAL TABLE observations_tri USING fts5(title, body, content='', tokenize='trigram');
CREATE VIRTUAL TABLE observations_tri_inst USING fts5vocab(observations_tri, 'instance');
INSERT INTO observations_tri(rowid, title, body) SELECT o.id, coalesce(o.title, '') || '  ', coalesce(o.body, '') || '  ' FROM observations o WHERE aimem_unspaced(o.title) OR aimem_unspaced(o.body);
CREATE TRIGGER observations_tri_del AFTER DELETE ON observations WHEN EXISTS (SELECT 1 FROM observations_tri_docsize WHERE id = old.id) BEGIN
  INSERT INTO observations_tri(observations_tri, rowid, title, body) VALUES ('delete', old.id, coalesce(old.title, '') || '  ', coalesce(old.body, '') || '  ');
END;
CREATE TRIGGER observations_tri_upd AFTER UPDATE OF title, body ON observations BEGIN
  INSERT INTO observations_tri(observations_tri, rowid, title, body)
    SELECT 'delete', old.id, coalesce(old.title, '') || '  ', coalesce(old.body, '') || '  ' WHERE EXISTS (SELECT 1 FROM observations_tri_docsize WHERE id = old.id);
  INSERT INTO observations_tri(rowid, title, body) SELECT new.id, coalesce(new.title, '') || '  ', coalesce(new.body, '') || '  ' WHERE CASE WHEN length(CAST((coalesce(new.title, '') || ' ' || coalesce(new.body, '')) AS BLOB)) = length((coalesce(new.title, '') || ' ' || coalesce(new.body, ''))) THEN 0 ELSE (coalesce(new.title, '') || ' ' || coalesce(new.body, '')) GLOB '*[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff]*' END;
END;
"""

# The session and handoff lifecycle (docs/lifecycle.md, issue 26). An automatic handoff
# belongs to its place, not to the actor that wrote it (the idle finaliser's ``maintainer``
# made them unclaimable): its owner is cleared. Handoffs are ordered by the events' own
# time: ``event_at`` is when the source session's work ended (its end's event time; for a
# manual handoff its begin), ``started_at`` when that session began, so a claim can tell a
# chain (one session began after the other ended) from sessions that ran in parallel.
# ``sessions.parent_session_id``: a child session (OpenCode ``parentID``) never claims a
# handoff and never opens one.
MIGRATION_14 = """
ALTER TABLE handoffs ADD COLUMN event_at TEXT;
ALTER TABLE handoffs ADD COLUMN started_at TEXT;
ALTER TABLE sessions ADD COLUMN parent_session_id TEXT;
UPDATE handoffs SET owner = NULL WHERE automatic = 1;
UPDATE handoffs SET
  event_at = coalesce((SELECT s.ended_at FROM sessions s
                       WHERE s.project_id = handoffs.project_id AND s.session_id = handoffs.from_session_id
                         AND handoffs.automatic = 1), created_at),
  started_at = (SELECT s.started_at FROM sessions s
                WHERE s.project_id = handoffs.project_id AND s.session_id = handoffs.from_session_id
                  AND handoffs.automatic = 1);
"""

# Purge tombstones (issue 34): what a purge removed, so nothing that arrives later brings it
# back. Written in the purge's own transaction; names are kept because the ids' rows are gone.
# kind 'session' matches by session_id (any project: client ids are UUIDs); 'project' and
# 'workspace' match events for those names that happened at or before ``purged_at``.
MIGRATION_15 = """
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

# Issue 26 (locations and identity): a repository's stable id and the roots a project has been
# seen at (a moved, renamed or second checkout of one repository: its handoffs follow it), and
# the roots/handoff places stored before one location normaliser existed brought to its form
# (aimem_common.locations: '\\' -> '/', Windows locations lower-cased, no trailing separator;
# char(92) is the backslash). Duplicated keys this leaves behind are harmless: a lookup takes
# the oldest project holding them.
MIGRATION_16 = """
ALTER TABLE projects ADD COLUMN repo_id TEXT;        -- the repository's stable id (<git dir>/aimem-id)
CREATE INDEX projects_repo_id ON projects(workspace_id, repo_id) WHERE repo_id IS NOT NULL;
CREATE TABLE project_roots (
  workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  project_id    TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  root          TEXT NOT NULL,                     -- normalised (aimem_common.locations)
  first_seen_at TEXT NOT NULL,
  PRIMARY KEY (project_id, root)
);
CREATE INDEX project_roots_root ON project_roots(workspace_id, root);
UPDATE projects SET root = lower(replace(root, char(92), '/'))
  WHERE root GLOB '[A-Za-z]:*' OR substr(root, 1, 2) IN (char(92) || char(92), '//');
UPDATE projects SET root = rtrim(replace(root, char(92), '/'), '/')
  WHERE length(root) > 1 AND substr(replace(root, char(92), '/'), -1) = '/' AND NOT root GLOB '[a-z]:/';
UPDATE handoffs SET root = lower(replace(root, char(92), '/'))
  WHERE root GLOB '[A-Za-z]:*' OR substr(root, 1, 2) IN (char(92) || char(92), '//');
UPDATE handoffs SET cwd = lower(replace(cwd, char(92), '/'))
  WHERE cwd GLOB '[A-Za-z]:*' OR substr(cwd, 1, 2) IN (char(92) || char(92), '//');
"""

# Issue 29 (managed workstreams, ``aimem run``): one workstream per project checkout root, its
# append-only visible transcript (``seq`` per workstream; the immutable JSONL segments under
# ``<data_dir>/raw/workstreams/<id>/`` are the source of truth, these rows the index), full-text
# search over it, one cursor row per harness (what it was last handed, its native session) and
# the runs holding a renewable lease.
MIGRATION_17 = """
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

# The link graph checks that each end of a link is a live page of the project: a page's
# (id, project, is_latest) is read from this index alone, never from the table row (which
# holds the page body). Ranking a project's 10,000 pages by their links checks 30,000 ends.
MIGRATION_23 = """
CREATE INDEX pages_id_live ON pages(id, project_id, is_latest);
"""

# Forward-only: append new migrations; never edit one that has shipped. A database is only
# ever moved forward from its ``user_version``; 5 was reserved and never shipped, so the list
# has a gap there.
MIGRATIONS: list[tuple[int, str]] = [
    (1, MIGRATION_1), (2, MIGRATION_2), (3, MIGRATION_3), (4, MIGRATION_4), (6, MIGRATION_6),
    (7, MIGRATION_7), (8, MIGRATION_8), (9, MIGRATION_9), (10, MIGRATION_10), (11, MIGRATION_11),
    (12, MIGRATION_12), (13, MIGRATION_13), (14, MIGRATION_14), (15, MIGRATION_15), (16, MIGRATION_16),
    (17, MIGRATION_17), (23, MIGRATION_23),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]
