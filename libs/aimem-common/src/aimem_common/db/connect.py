"""Open SQLite connections by role (DESIGN.md invariant 2).

* ``open_writer`` — the writer's single read-write connection: WAL, ``synchronous=NORMAL``,
  ``busy_timeout``, foreign keys, migrations applied. Only ``aimem_writer`` may call it
  (``tests/test_architecture.py`` checks).
* ``open_reader`` — read-only (``mode=ro`` URI + ``PRAGMA query_only=1``), waits for the
  writer to create the file and reach a compatible schema version instead of crashing.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

from aimem_common.db.schema import MIGRATIONS, SCHEMA_VERSION
from aimem_common.db.trigram import unspaced
from aimem_common.errors import UnavailableError

log = logging.getLogger("aimem.db")

BUSY_TIMEOUT_MS = 5000  # a reader checkpoint or backup may hold a lock briefly


def _prepare(conn: sqlite3.Connection) -> None:
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    # 64 MiB page cache (negative = KiB); the hot set of FTS pages stays in memory.
    conn.execute("PRAGMA cache_size = -65536")


def open_writer(path: str | Path) -> sqlite3.Connection:
    """Open the writer connection and apply pending migrations.

    Autocommit mode (``isolation_level=None``): the writer issues ``BEGIN IMMEDIATE``
    itself, one transaction per batch. ``check_same_thread=False`` because the writer
    thread is created after the connection. Side effect: creates the file and ``db/``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    _prepare(conn)
    conn.execute("PRAGMA journal_mode = WAL")
    # NORMAL in WAL mode: durable across app crashes, may lose the last txn on power loss.
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA wal_autocheckpoint = 4000")
    # Deleted rows are overwritten with zeros, not left in free pages: a purge leaves none of
    # its text in the file (and the WAL is truncated after it, ``aimem_writer.forget``).
    conn.execute("PRAGMA secure_delete = ON")
    migrate(conn)
    return conn


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every migration above ``PRAGMA user_version``, each in its own transaction.

    Returns the resulting version. Re-running is a no-op.
    """
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    # Migration 13 picks the unspaced-script observations with it (a GLOB is ~30x slower);
    # no trigger calls it, so connections without it can still write.
    conn.create_function("aimem_unspaced", 1, unspaced, deterministic=True)
    for version, sql in MIGRATIONS:
        if version <= current:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in _split_sql(sql):
                conn.execute(stmt)
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        log.info("applied schema migration %d", version)
        current = version
    return current


def _split_sql(script: str) -> list[str]:
    """Split a migration script into statements (trigger bodies kept whole)."""
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out


def open_reader(path: str | Path, *, wait_s: float = 30.0, poll_s: float = 0.1,
                factory: type[sqlite3.Connection] = sqlite3.Connection) -> sqlite3.Connection:
    """Open a read-only connection once the writer has migrated the file.

    Waits up to ``wait_s`` seconds for the file to exist and reach ``SCHEMA_VERSION``.
    A file at a *newer* version is accepted (forward-compatible additive migrations).
    ``factory``: the connection class (``sqlite3.connect``'s).

    Raises:
        UnavailableError: the DB did not appear or stayed at an older version.
    """
    path = Path(path)
    deadline = time.monotonic() + wait_s
    last = "missing"
    while True:
        if path.exists():
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False, factory=factory)
            try:
                _prepare(conn)
                conn.execute("PRAGMA query_only = 1")
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version >= SCHEMA_VERSION:
                    return conn
                last = f"schema version {version} < {SCHEMA_VERSION}"
            except sqlite3.Error as exc:
                last = str(exc)
            conn.close()
        if time.monotonic() >= deadline:
            raise UnavailableError(f"database {path} not ready: {last}", code="db_not_ready")
        time.sleep(poll_s)


def schema_version(conn: sqlite3.Connection) -> int:
    """Return ``PRAGMA user_version`` of an open connection."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])
