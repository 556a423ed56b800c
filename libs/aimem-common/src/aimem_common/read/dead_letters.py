"""Dead letters: commands the writer gave up on, with their reason (read side).

Rows come from the ``dead_letters`` table (the writer's ``batch.py`` fills it; the
``dead_letter.resolve`` op stamps ``replayed_at``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

_COLUMNS = "id, cmd_id, op, workspace, project, reason, error_code, deliveries, created_at, replayed_at"


def count_open(conn: sqlite3.Connection) -> int:
    """Return how many dead letters are not yet replayed (0 on a DB before the table existed)."""
    try:
        return int(conn.execute("SELECT count(*) FROM dead_letters WHERE replayed_at IS NULL").fetchone()[0])
    except sqlite3.OperationalError:  # schema older than the table (reader of an old DB)
        return 0


def list_dead_letters(conn: sqlite3.Connection, *, include_replayed: bool = False,
                      limit: int = 100) -> list[dict[str, Any]]:
    """Return dead letters, oldest first: ``[{id, cmd_id, op, workspace, project, reason,
    error_code, deliveries, created_at, replayed_at}]`` (len ≤ ``limit``; open ones only
    unless ``include_replayed``)."""
    where = "" if include_replayed else " WHERE replayed_at IS NULL"
    rows = conn.execute(f"SELECT {_COLUMNS} FROM dead_letters{where} ORDER BY id LIMIT ?", (limit,))
    return [dict(zip(_COLUMNS.split(", "), r)) for r in rows]


def envelopes(conn: sqlite3.Connection, ids: list[int] | None) -> list[tuple[int, str]]:
    """Return ``[(id, envelope_json)]`` of the open dead letters among ``ids`` (all open when None), by id."""
    if ids is None:
        return conn.execute("SELECT id, envelope FROM dead_letters WHERE replayed_at IS NULL ORDER BY id").fetchall()
    out: list[tuple[int, str]] = []
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        q = ("SELECT id, envelope FROM dead_letters WHERE replayed_at IS NULL AND id IN (%s) ORDER BY id"
             % ",".join("?" * len(chunk)))
        out.extend(conn.execute(q, chunk).fetchall())
    return sorted(out)
