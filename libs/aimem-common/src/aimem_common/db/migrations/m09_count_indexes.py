"""Migration 9: index-only: a project's link and embedding counts without a table scan."""

from __future__ import annotations

# A project's counts (the brief, status) scanned the whole links and page_embeddings tables:
# 1.6 ms at 20,000 links, linear in the store (and a scan of every vector blob once
# embeddings are on). Index-only and idempotent (IF NOT EXISTS).
SQL = """
CREATE INDEX IF NOT EXISTS links_project ON links(project_id);
CREATE INDEX IF NOT EXISTS page_embeddings_project ON page_embeddings(project_id);
"""
