"""Migration 11: per-chunk page vectors."""

from __future__ import annotations

# Per-chunk vectors: a page is embedded in ~200-token windows (aimem_common.chunking) so a long
# page is findable by any part of it; a page's vector score is its best chunk. Rows carry the
# {provider, model, dim} identity and the page's content_hash they were made from; rows of
# another identity or an older hash are stale and ignored by the read side. The id orders
# writes (AUTOINCREMENT: a page's rows deleted and rewritten never get their old ids back), so a
# reader's in-memory copy loads only the rows above the last id it saw.
SQL = """
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
