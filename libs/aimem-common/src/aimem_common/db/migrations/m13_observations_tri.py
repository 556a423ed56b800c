"""Migration 13: ``observations_tri``: captured observations holding an unspaced-script character."""

from __future__ import annotations

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
SQL = """
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
