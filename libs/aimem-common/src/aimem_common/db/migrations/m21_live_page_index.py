"""Migration 21: an index that tells whether a page id is a live page of a project (the link graph)."""

from __future__ import annotations

# The link graph checks that each end of a link is a live page of the project: a page's
# (id, project, is_latest) is read from this index alone, never from the table row (which
# holds the page body). Ranking a project's 10,000 pages by their links checks 30,000 ends.
SQL = """
CREATE INDEX pages_id_live ON pages(id, project_id, is_latest);
"""
