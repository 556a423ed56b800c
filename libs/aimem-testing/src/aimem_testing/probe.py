"""Test helpers that look at a running stack from outside: poll, read SQLite read-only."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def wait_for(fn: Callable[[], Any], timeout_s: float = 60.0, what: str = "condition", poll_s: float = 0.1) -> Any:
    """Call ``fn`` until it returns something truthy (returned); AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out waiting for {what}")


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
