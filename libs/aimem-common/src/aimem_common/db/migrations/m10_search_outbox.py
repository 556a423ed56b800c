"""Migration 10: ``search_outbox`` for the derived page text index; ``pages_live``; ``entities_name``."""

from __future__ import annotations

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
SQL = """
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
