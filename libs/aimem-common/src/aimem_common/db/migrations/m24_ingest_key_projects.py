"""Migration 24: the project of each stored reply, so a purge can forget them."""

from __future__ import annotations

# ``ingest_keys.result`` is the reply a re-sent command gets again, and a reply can quote
# stored text (``handoff.accept`` answers with the handoff's title and body). A purge of a
# project or workspace replaces the stored replies of that project's commands with a
# ``purged`` marker; ``project_id`` (the project the command's scope resolved to, NULL for
# unscoped commands and for rows stored before this migration) finds them by index. A
# session purge also scans replies for the purged session id (``aimem_writer.forget``).
SQL = """
ALTER TABLE ingest_keys ADD COLUMN project_id TEXT;
CREATE INDEX ingest_keys_project ON ingest_keys(project_id) WHERE project_id IS NOT NULL;
"""
