"""Migration 6: ``pages_fts`` indexes ``project_id``; ``pages_tri`` for unspaced scripts."""

from __future__ import annotations

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
SQL = """
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
