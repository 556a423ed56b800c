"""Migration 23: profile memory — preferences a user states once, for every later session."""

from __future__ import annotations

# One row per stated preference of one owner. ``user_id`` NULL is the operator (the root
# token, or anyone on a server with auth off); a user's rows go with the user. The source
# project and session say where it was stated: purging that project, workspace or session
# removes it (the purge ops delete it explicitly), while a project row that goes for another
# reason (a copy-and-purge move) only loses the link. No workspace id: a profile belongs to
# a person, not to a project, and a project keeps its id when it moves.
SQL = """
CREATE TABLE profile_entries (
  id                INTEGER PRIMARY KEY,
  user_id           INTEGER REFERENCES users(id) ON DELETE CASCADE,
  body              TEXT NOT NULL,
  source_project_id TEXT REFERENCES projects(id) ON DELETE SET NULL,
  source_session_id TEXT,
  created_by        TEXT NOT NULL,
  created_at        TEXT NOT NULL
);
CREATE INDEX profile_entries_owner ON profile_entries(user_id, id);
CREATE INDEX profile_entries_source ON profile_entries(source_session_id);
CREATE INDEX profile_entries_project ON profile_entries(source_project_id);
"""
