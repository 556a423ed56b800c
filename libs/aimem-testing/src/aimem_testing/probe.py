"""Test helpers that look at a running stack from outside.

Poll (``wait_for``, ``wait_for_async``: ``gitrepo``'s), read SQLite read-only.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from aimem_testing.gitrepo import wait_for, wait_for_async

__all__ = ["db_rows", "dict_rows", "mut_messages", "wait_for", "wait_for_async"]


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


def dict_rows(db_path: Path, sql: str, args: tuple = ()) -> list[dict]:
    """Rows of ``sql`` as dicts, read through the services' own reader connection
    (``aimem_common.db.connect.open_reader``). Unlike ``db_rows`` a missing table or a bad
    query raises, so ``== []`` checks on it cannot pass by accident."""
    from aimem_common.db.connect import open_reader

    conn = open_reader(db_path)
    try:
        return [dict(r) for r in conn.execute(sql, args)]
    finally:
        conn.close()


async def mut_messages(js, stream: str | None = None) -> list[tuple[dict, dict]]:
    """Every message on the command stream (``stream``: another one, e.g. ``AIMEM_BULK``) as
    ``(envelope, headers)``, read by sequence (no consumer), oldest first; ``[]`` while it is
    empty. ``js``: a nats-py JetStream context."""
    import json

    from aimem_common.bus import MUT_STREAM

    stream = stream or MUT_STREAM
    info = await js.stream_info(stream)
    if info.state.messages == 0:
        return []
    out = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        msg = await js.get_msg(stream, seq)
        out.append((json.loads(msg.data), dict(msg.headers or {})))
    return out
