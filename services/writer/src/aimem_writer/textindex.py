"""The writer's side of the page text index (``aimem_common.read.textindex``).

The writer is the index's only writer. A page change records the page id in
``search_outbox`` in the page's own transaction (triggers); after COMMIT ``drain`` indexes
each recorded page's current state (delete by ``page_id``, add it again if it is live),
commits the index, then deletes the drained outbox rows. A crash between the two commits
leaves the rows, and the start-up drain replays them (indexing a page twice is harmless).
``drain`` runs before the batch's replies go out, so a caller that wrote a page and then
searches finds it; a batch that changed no page costs one ``max(id)`` lookup.

``start`` checks the index: missing, unreadable, or built for another ``INDEX_VERSION``,
it is emptied and rebuilt from ``pages`` on a background thread (readers use FTS5 until the
marker is written). Page changes committed meanwhile stay in the outbox; the rebuild
indexes them (under the lock, from a snapshot taken after its bulk pass) before it writes
the marker, and every drain after that is the writer thread's again.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import tantivy

from aimem_common.db.connect import open_reader
from aimem_common.read import textindex as ti

log = logging.getLogger("aimem.writer.textindex")

WRITER_HEAP_BYTES = 16_000_000  # tantivy's indexing buffer for a batch's pages (its minimum is 15 MB a thread)
BULK_HEAP_BYTES = 256_000_000  # while (re)building from pages
# After a failed drain or rebuild (full disk, damaged files) the next rebuild waits this long,
# doubled each time: searches use FTS5 meanwhile, so retrying is only about getting speed back.
REBUILD_BACKOFF_MIN_S, REBUILD_BACKOFF_MAX_S = 1.0, 60.0
BULK_CHUNK = 5000  # pages read per SELECT while building
_MAX_VARS = 900  # SQLite host parameters per IN (...)


def _survivable(exc: BaseException) -> bool:
    """An index failure the writer thread outlives (logged, the outbox rows kept): any
    ``Exception`` and a Rust panic in tantivy (``BaseException``: uncaught, it ended the
    writer's consumer while the process stayed up)."""
    return isinstance(exc, Exception) or ti.index_failure(exc)


def _doc(page_id: int, project_id: str, title: str, body: str) -> tantivy.Document:
    return tantivy.Document(page_id=int(page_id), project=project_id, text=ti.indexed_text(title, body))


def build(conn: sqlite3.Connection, search_dir: Path, *, heap_bytes: int = BULK_HEAP_BYTES,
          threads: int = 1) -> int:
    """Build the index of every live page of ``conn`` into ``search_dir`` from scratch and
    write the marker; returns the pages indexed. Direct-disk (benchmarks, ``TextIndexWriter``'s
    rebuild): nothing else may write ``search_dir`` meanwhile."""
    reset(search_dir)
    idx = ti.open_index(ti.index_dir(search_dir), create=True)
    writer = idx.writer(heap_bytes, threads)
    n = _bulk(conn, writer)
    writer.commit()
    writer.wait_merging_threads()
    write_marker(search_dir)
    return n


def _bulk(conn: sqlite3.Connection, writer: tantivy.IndexWriter) -> int:
    n, last = 0, 0
    while True:
        rows = conn.execute(
            "SELECT id, project_id, title, body FROM pages WHERE is_latest = 1 AND id > ? ORDER BY id LIMIT ?",
            (last, BULK_CHUNK)).fetchall()
        if not rows:
            return n
        for pid, pj, title, body in rows:
            writer.add_document(_doc(pid, pj, title, body))
        n += len(rows)
        last = rows[-1][0]


def reset(search_dir: Path) -> None:
    """Remove the marker first (readers switch to FTS5), then the index files."""
    search_dir = Path(search_dir)
    ti.marker_path(search_dir).unlink(missing_ok=True)
    shutil.rmtree(ti.index_dir(search_dir), ignore_errors=True)


def write_marker(search_dir: Path) -> None:
    """Atomically write the marker (``INDEX_VERSION``): readers use the index from now on."""
    path = ti.marker_path(search_dir)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(ti.INDEX_VERSION + "\n", "utf-8")
    tmp.replace(path)


class TextIndexWriter:
    """Owns ``<data_dir>/search`` for the writer process.

    Args:
        search_dir: ``Settings.search_dir``.
        db_path: the SQLite file (the background rebuild reads it on its own connection).
        enabled: False (``search.text_index = false``): keep no index; ``start`` removes the
            one there (it would go stale; enabling again rebuilds it) and ``drain`` only
            empties the outbox, which the triggers keep filling.
    """

    def __init__(self, search_dir: Path, db_path: Path, *, enabled: bool = True):
        self.search_dir = Path(search_dir)
        self.db_path = Path(db_path)
        self.enabled = enabled
        self._lock = threading.Lock()
        self._writer: tantivy.IndexWriter | None = None
        self._ready = False  # the writer thread drains (else a rebuild is running)
        self._rebuild: threading.Thread | None = None
        self._closed = False
        self.failed: str | None = None  # why the last drain or rebuild failed (None = fine)
        self._retry_at: float | None = None  # after a failure: when the next rebuild may start
        self._backoff_s = REBUILD_BACKOFF_MIN_S

    @property
    def ready(self) -> bool:
        """True once the index is complete and the writer thread keeps it up to date."""
        return self._ready

    def start(self, conn: sqlite3.Connection) -> None:
        """Open the index and drain what a crash left in the outbox; or, when it is missing,
        unreadable or outdated, start rebuilding it in the background (writer thread)."""
        if not self.enabled:
            reset(self.search_dir)
            self.drain(conn)
            return
        self.search_dir.mkdir(parents=True, exist_ok=True)
        if ti.is_complete(self.search_dir):
            try:
                idx = ti.open_index(ti.index_dir(self.search_dir))
                self._writer = idx.writer(WRITER_HEAP_BYTES, 1)
                self._ready = True
            except (ValueError, OSError) as exc:
                log.warning("text index at %s unreadable (%s): rebuilding", self.search_dir, exc)
        if self._ready:
            self.drain(conn)
            return
        self.start_rebuild()

    def start_rebuild(self) -> threading.Thread:
        """Empty the index and rebuild it from ``pages`` on a background thread; returns it."""
        with self._lock:
            self._ready = False
            self._writer = None  # releases tantivy's writer lock before the files go
            reset(self.search_dir)
            idx = ti.open_index(ti.index_dir(self.search_dir), create=True)
            self._writer = w = idx.writer(BULK_HEAP_BYTES, 1)
        t = threading.Thread(target=self._run_rebuild, args=(w,), name="text-index-rebuild", daemon=True)
        self._rebuild = t
        t.start()
        return t

    def _run_rebuild(self, w: tantivy.IndexWriter) -> None:
        t0 = time.perf_counter()
        try:
            conn = open_reader(self.db_path)
            try:
                n = _bulk(conn, w)
                w.commit()
                with self._lock:  # from here on the writer thread waits for us, then drains itself
                    if self._closed:
                        return
                    conn.rollback()  # a fresh snapshot: every change committed before now
                    self._apply(conn, [r[0] for r in conn.execute("SELECT DISTINCT page_id FROM search_outbox")])
                    w.commit()
                    write_marker(self.search_dir)
                    self._ready = True
                    self.failed = None
            finally:
                conn.close()
            log.info("text index rebuilt: %d pages in %.1f s", n, time.perf_counter() - t0)
        except BaseException as exc:  # readers keep using FTS5; a later drain retries (backoff)
            if not _survivable(exc):
                raise
            with self._lock:
                self.failed = f"rebuild: {exc}"
                self._schedule_retry()
            log.exception("text index rebuild failed (searches use FTS5)")

    def _schedule_retry(self) -> None:
        """After a failure (lock held): the next rebuild waits ``_backoff_s``, doubled each
        time up to ``REBUILD_BACKOFF_MAX_S``."""
        self._retry_at = time.monotonic() + self._backoff_s
        self._backoff_s = min(self._backoff_s * 2, REBUILD_BACKOFF_MAX_S)

    def _maybe_retry(self) -> None:
        """Start the rebuild a failure scheduled, once its time has come and none runs."""
        due = self._retry_at
        if due is None or time.monotonic() < due or self._closed:
            return
        if self._rebuild is not None and self._rebuild.is_alive():
            return
        self._retry_at = None
        try:
            self.start_rebuild()
        except BaseException as exc:  # e.g. the disk is still full: try again later
            if not _survivable(exc):
                raise
            with self._lock:
                self.failed = f"rebuild: {exc}"
                self._schedule_retry()
            log.warning("text index rebuild could not start (searches use FTS5): %s", exc)

    def status(self) -> dict[str, Any]:
        """For the writer's ``/healthz``: ``{enabled, ready, failed}`` (``failed``: why the
        last drain or rebuild failed, None when fine; searches use FTS5 while not ready)."""
        return {"enabled": self.enabled, "ready": self._ready, "failed": self.failed}

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait for a running rebuild (tests, tools); returns ``ready``."""
        t = self._rebuild
        if t is not None:
            t.join(timeout_s)
        return self._ready

    def drain(self, conn: sqlite3.Connection) -> int:
        """Index the pages recorded in ``search_outbox`` and delete those rows (writer thread,
        after COMMIT, before the replies). Returns the outbox rows drained (0: nothing to do,
        or a rebuild is running and will index them). A failing index commit is logged and
        the rows stay for the next drain."""
        top = conn.execute("SELECT max(id) FROM search_outbox").fetchone()[0]
        if top is None:
            return 0
        if not self.enabled:
            return conn.execute("DELETE FROM search_outbox WHERE id <= ?", (top,)).rowcount
        self._maybe_retry()
        with self._lock:
            if not self._ready or self._closed:
                return 0
            ids = [r[0] for r in conn.execute("SELECT DISTINCT page_id FROM search_outbox WHERE id <= ?", (top,))]
            try:
                self._apply(conn, ids)
                self._writer.commit()
            except BaseException as exc:  # the rows stay: retried on the next drain
                if not _survivable(exc):
                    raise
                self.failed = f"drain: {exc}"
                log.exception("text index update failed: searches use FTS5 until it is rebuilt")
                try:
                    self._writer.rollback()
                except BaseException as rexc:  # a writer whose commit failed may panic here
                    if not _survivable(rexc):
                        raise
                # The index now lags the DB (a full disk, damaged files): drop the marker so
                # every reader answers from FTS5, which is current, instead of silently missing
                # the pages just written; the rows stay and a rebuild retries with backoff.
                self._ready = False
                self._writer = None
                ti.marker_path(self.search_dir).unlink(missing_ok=True)
                self._schedule_retry()
                return 0
            self.failed = None
            self._backoff_s = REBUILD_BACKOFF_MIN_S
        conn.execute("DELETE FROM search_outbox WHERE id <= ?", (top,))
        return len(ids)

    def _apply(self, conn: sqlite3.Connection, ids: list[int]) -> None:
        """Replace each page of ``ids`` by its current state (gone unless live)."""
        w = self._writer
        for start in range(0, len(ids), _MAX_VARS):
            chunk = ids[start:start + _MAX_VARS]
            for pid in chunk:
                w.delete_documents_by_term("page_id", int(pid))
            rows = conn.execute(
                f"SELECT id, project_id, title, body FROM pages WHERE is_latest = 1 AND id IN ({','.join('?' * len(chunk))})",
                chunk).fetchall()
            for pid, pj, title, body in rows:
                w.add_document(_doc(pid, pj, title, body))

    def close(self) -> None:
        """Stop using the index (a running rebuild stops before its marker); frees the writer lock."""
        with self._lock:
            self._closed = True
            w, self._writer = self._writer, None
        rebuilding = self._rebuild is not None and self._rebuild.is_alive()
        if w is not None and not rebuilding:
            try:
                w.wait_merging_threads()
            except Exception:  # noqa: BLE001 - closing anyway
                pass
