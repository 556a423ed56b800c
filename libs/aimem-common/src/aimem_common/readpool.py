"""A small pool of read-only SQLite connections, run off the event loop.

Every read-side service (query, mcp-gateway, ingress, maintainer) owns one ``ReaderPool``
built in its lifespan (its context's ``read_pool``); it is the only way a service reads. Query functions in this
``aimem_common.read`` are plain *sync* functions ``fn(conn, ...)``; ``await pool.run(fn, ...)`` runs one
on a worker thread (``asyncio.to_thread``) with a connection checked out for the call.

Connections come from ``db.connect.open_reader`` (``mode=ro`` + ``query_only``), so a read
can never write (DESIGN.md invariant 2). Each call gets a time budget: a progress handler
interrupts a statement that runs past ``budget_ms`` and the call raises
``UnavailableError(code="query_timeout")`` instead of holding a thread.

With ``text_index_dir`` the pool also owns the process's reader of the page text index
(``read.textindex.TextIndexReader``); every connection it hands out carries it as
``conn.text_index`` (None without one), which the fts stream of ``memory_query`` uses.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from aimem_common.db.connect import open_reader
from aimem_common.errors import UnavailableError
from aimem_common.read.textindex import TextIndexReader
from aimem_common.read.vectors import ChunkVectors

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_SIZE = 4
DEFAULT_BUDGET_MS = 5000
_PROGRESS_STEPS = 10_000  # VM instructions between deadline checks (~sub-millisecond)


class PoolConnection(sqlite3.Connection):
    """A pooled read connection: ``text_index`` is its pool's ``TextIndexReader`` or None."""

    text_index: TextIndexReader | None = None


class ReaderPool:
    """Up to ``size`` read-only connections to ``db_path``, opened lazily.

    Thread-safe. ``run`` is the async entry point; ``connection()`` is the sync one (tests,
    benchmarks, CLI tools).

    Args:
        db_path: the SQLite file (``settings.db_path``).
        size: maximum number of open connections (= concurrent reads).
        budget_ms: per-call time budget in milliseconds (0 disables the limit).
        wait_s: how long the *first* connection waits for the writer to create and
            migrate the file (``open_reader``).
        reuse: keep connections between calls (default). False opens one per call: on a
            read replica Litestream's follow mode rewrites the file underneath SQLite, and a
            kept connection never sees its changes (measured: it stayed on its first copy).
        text_index_dir: ``<data_dir>/search`` (``Settings.search_dir``) to search pages with the
            text index while it is complete; None = FTS5 only.
    """

    def __init__(
        self,
        db_path: str | Path,
        *,
        size: int = DEFAULT_SIZE,
        budget_ms: int = DEFAULT_BUDGET_MS,
        wait_s: float = 30.0,
        reuse: bool = True,
        text_index_dir: str | Path | None = None,
    ):
        self.db_path = Path(db_path)
        self.size = max(1, size)
        self.budget_ms = budget_ms
        self.wait_s = wait_s
        self.reuse = reuse
        self._idle: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        # The vector stream's in-memory chunk copy (read.vectors), shared by this pool's reads.
        self.vectors = ChunkVectors()
        self._slots = threading.BoundedSemaphore(self.size)
        self._closed = False
        self.text_index = TextIndexReader(Path(text_index_dir)) if text_index_dir is not None else None

    # -- lifecycle ---------------------------------------------------------------------
    def open(self) -> "ReaderPool":
        """Open one connection now (waits up to ``wait_s`` for the schema); returns self.

        Raises:
            UnavailableError: the DB did not appear or is at an older schema version.
        """
        with self.connection():
            pass
        return self

    def close(self) -> None:
        """Close every connection (idempotent). Later calls raise ``UnavailableError``."""
        with self._lock:
            self._closed = True
            conns, self._all = self._all, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def __enter__(self) -> "ReaderPool":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def opened(self) -> bool:
        """True once a connection was opened (the database exists at the current schema)."""
        return bool(self._all)

    # -- use ----------------------------------------------------------------------------
    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """Check out a connection for the calling thread (blocks while all are busy).

        Raises:
            UnavailableError: the pool is closed or the DB cannot be opened.
        """
        if self._closed:
            raise UnavailableError("reader pool is closed", code="db_closed")
        self._slots.acquire()
        conn: sqlite3.Connection | None = None
        try:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                conn = open_reader(self.db_path, wait_s=self.wait_s, factory=PoolConnection)
                conn.text_index = self.text_index
                with self._lock:
                    self._all.append(conn)
            yield conn
        finally:
            if conn is not None:
                if self._closed or not self.reuse:
                    conn.close()
                    with self._lock:
                        if conn in self._all:
                            self._all.remove(conn)
                else:
                    if conn.in_transaction:  # never keep a read snapshot pinned between calls
                        conn.rollback()
                    self._idle.put(conn)
            self._slots.release()

    def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``fn(conn, *args, **kwargs)`` synchronously within the time budget.

        Raises:
            UnavailableError: ``query_timeout`` when the budget ran out; whatever ``fn`` raises.
        """
        with self.connection() as conn:
            deadline = time.monotonic() + self.budget_ms / 1000 if self.budget_ms > 0 else None
            if deadline is not None:
                conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, _PROGRESS_STEPS)
            try:
                return fn(conn, *args, **kwargs)
            except sqlite3.OperationalError as exc:
                if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_INTERRUPT:
                    raise UnavailableError(
                        f"query exceeded its {self.budget_ms} ms budget", code="query_timeout"
                    ) from exc
                raise
            finally:
                if deadline is not None:
                    conn.set_progress_handler(None, 0)

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``fn(conn, *args, **kwargs)`` on a worker thread; return its result.

        Thread: a ``asyncio.to_thread`` worker, never the event loop.
        """
        return await asyncio.to_thread(self.call, fn, *args, **kwargs)
