"""Migration 3: imported transcripts: how many of a session's observations came from an import."""

from __future__ import annotations

# Imported transcripts (``aimem import``): how many of a session's observations came from
# an import. A session with any live (hook) observation is owned by its hooks: later
# imported observations for it are skipped, so importing after live capture never
# duplicates (observation_count - imported_count = live events).
SQL = """
ALTER TABLE sessions ADD COLUMN imported_count INTEGER NOT NULL DEFAULT 0;
"""
