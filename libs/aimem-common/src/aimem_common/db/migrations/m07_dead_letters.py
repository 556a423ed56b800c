"""Migration 7: dead letters: commands the writer gave up on, kept whole for replay."""

from __future__ import annotations

# Commands the writer gave up on (a handler bug, a transient failure past
# writer.max_deliver, an error no caller was waiting for), kept whole with the reason so
# `aimem dead-letters replay` can send them again. Store faults never land here.
SQL = """
CREATE TABLE dead_letters (
  id           INTEGER PRIMARY KEY,
  cmd_id       TEXT NOT NULL,
  op           TEXT NOT NULL,
  workspace    TEXT,
  project      TEXT,
  envelope     TEXT NOT NULL,                    -- the command as received (JSON)
  reason       TEXT NOT NULL,                    -- why it was given up (one line)
  error_code   TEXT NOT NULL,
  deliveries   INTEGER NOT NULL DEFAULT 1,
  created_at   TEXT NOT NULL,
  replayed_at  TEXT                              -- set when sent again; NULL = open
);
CREATE INDEX dead_letters_open ON dead_letters(replayed_at, id);
"""
