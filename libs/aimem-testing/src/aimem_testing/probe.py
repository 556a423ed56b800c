"""Test helpers that look at a running stack from outside: poll (``wait_for``, shared with
``gitrepo``), read SQLite read-only."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from aimem_testing.gitrepo import wait_for

__all__ = ["db_rows", "wait_for"]


def db_rows(db_path: Path, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
    """Rows of ``sql`` on the SQLite file opened read-only; ``[]`` while it does not exist yet."""
    if not Path(db_path).exists():
        return []
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql, args).fetchall()
    except sqlite3.OperationalError:  # schema not created yet
        return []
    finally:
        conn.close()
