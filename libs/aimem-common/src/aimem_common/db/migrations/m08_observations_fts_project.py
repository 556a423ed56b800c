"""Migration 8: ``observations_fts`` indexes ``project_id``."""

from __future__ import annotations

# ``observations_fts`` also indexes ``project_id`` (as ``pages_fts`` since migration 6): the
# turns stream of a project-scoped search and the ``raw_hits`` fallback intersect the
# project's doclist inside FTS5 instead of ranking every project's matching observations.
SQL = """
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
