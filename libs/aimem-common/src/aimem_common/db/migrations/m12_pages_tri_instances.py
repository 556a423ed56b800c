"""Migration 12: ``pages_tri`` again, contentless and padded, with an 'instance' vocabulary."""

from __future__ import annotations

# ``pages_tri`` again, contentless and padded, with an 'instance' vocabulary: a 1–2 character
# query word (``猫``, ``数据``) is matched by the trigrams that *start* with it, read by a range
# scan of ``pages_tri_inst`` (every page holding them, then kept to the scope), where migration
# 6 expanded it to the first 64 trigrams of a global 'row' vocabulary (other projects' trigrams
# crowded the scope's out). Each column is indexed with ``TRI_PAD`` (two spaces) appended, so a
# word in a column's last two characters (``これは猫``) or a column of 1–2 characters still has
# a trigram starting with it. The indexed text is no longer the page's, hence contentless
# (``content=''``): a 'delete' carries the padded values, as ``pages_tri_insert_sql`` inserts them.
SQL = """
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
