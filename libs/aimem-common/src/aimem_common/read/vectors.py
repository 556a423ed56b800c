"""The vector stream's candidates: the nearest page chunks to a question's vector.

``ChunkVectors`` is one process's in-memory copy of the current ``page_chunk_embeddings``
rows of one ``{provider, model, dim}`` identity (float32, unit rows), kept by the reader
pool (``ReaderPool.vectors``) and brought up to date at each search by loading only the rows
whose id is above the last one it saw (the writer gives every (re)written chunk a new id).

Search: a scope whose rows number at most ``ANN_MIN_ROWS`` is ranked exactly (one numpy
product over its rows); a larger one asks the HNSW
index (``usearch``, cosine), built in a background thread once the copy reaches
``ANN_MIN_ROWS`` rows (exact until it is ready), for ``ANN_FANOUT`` × the wanted pages and
keeps the scope's. Every candidate is then checked against ``pages`` in the caller's read
snapshot (live, in scope, same ``content_hash`` as the chunk): a stale or moved row never
scores, whatever the copy holds.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

# Exact below ANN_MIN_ROWS. Measured at 100k random 384-d rows, one thread: exact 13.9 ms of CPU
# a query, HNSW (k = 480) 6.1 ms, its build 183 s of CPU; at 50k exact is ~7 ms,
# under what the index would save once its build and memory are counted.
ANN_MIN_ROWS = 50_000
ANN_FANOUT = 8  # chunks asked of the HNSW index per page wanted (several chunks of one page crowd the top)
ANN_MAX_K = 4096
ANN_CONNECTIVITY = 16  # usearch's default graph degree
ANN_EXPANSION = 128  # candidate list while building and searching (usearch defaults 128/64): recall over speed
EXACT_FANOUT = 8  # chunks kept from the exact ranking per page wanted
_GROW = 1.5


@dataclass(frozen=True, slots=True)
class Identity:
    provider: str
    model: str
    dim: int


class ChunkVectors:
    """In-memory chunk vectors of one identity + an optional HNSW index (thread-safe).

    ``nearest(conn, ...)`` is called from reader threads with their own connection.
    ``ann_min_rows`` = 0 never builds the index (exact only).
    """

    def __init__(self, *, ann_min_rows: int = ANN_MIN_ROWS, background: bool = True):
        self.ann_min_rows = ann_min_rows
        self.background = background
        self._lock = threading.Lock()
        self._reset(None)

    def _reset(self, ident: Identity | None) -> None:
        self.ident = ident
        self.n = 0
        self.last_id = 0
        self._mat = np.zeros((0, ident.dim if ident else 1), dtype=np.float32)
        self._page = np.zeros(0, dtype=np.int64)
        self._chunk = np.zeros(0, dtype=np.int32)
        self._proj = np.zeros(0, dtype=np.int32)
        self._hash: list[str] = []
        self._proj_codes: dict[str, int] = {}
        self._ann: Any = None
        self._ann_n = 0  # rows in the index
        self._building = False

    # -- loading --------------------------------------------------------------------------
    def refresh(self, conn: sqlite3.Connection, ident: Identity) -> None:
        """Load the rows written since the last call (all of them after an identity change)."""
        top = conn.execute("SELECT max(id) FROM page_chunk_embeddings").fetchone()[0] or 0
        with self._lock:
            if ident != self.ident or top < self.last_id:  # another model, or a restored/replaced file
                self._reset(ident)
            if top == self.last_id:
                return
            rows = conn.execute(
                "SELECT c.id, c.page_id, c.chunk, c.vector, c.content_hash, p.project_id FROM page_chunk_embeddings c"
                " JOIN pages p ON p.id = c.page_id WHERE c.id > ? AND c.provider = ? AND c.model = ? AND c.dim = ?"
                " ORDER BY c.id", (self.last_id, ident.provider, ident.model, ident.dim)).fetchall()
            rows = [r for r in rows if len(r[3]) == 4 * ident.dim]  # a malformed blob is stale, not fatal
            if rows:
                self._append(rows)
            self.last_id = top
            if self.n > self.ann_min_rows > 0 and self.n > _GROW * self._live_rows(conn, ident):
                self._compact(conn, ident)  # rewritten chunks left more than a third of the copy stale
            self._maybe_index()

    def _append(self, rows: list[tuple]) -> None:
        new = np.frombuffer(b"".join(r[3] for r in rows), dtype="<f4").reshape(len(rows), self.ident.dim)
        need = self.n + len(rows)
        if need > len(self._mat):
            cap = max(need, int(len(self._mat) * 2), 1024)
            self._mat = _grow(self._mat, cap)
            self._page = _grow(self._page, cap)
            self._chunk = _grow(self._chunk, cap)
            self._proj = _grow(self._proj, cap)
        s = slice(self.n, need)
        self._mat[s] = new
        self._page[s] = [r[1] for r in rows]
        self._chunk[s] = [r[2] for r in rows]
        self._proj[s] = [self._proj_codes.setdefault(r[5], len(self._proj_codes)) for r in rows]
        self._hash.extend(r[4] for r in rows)
        self.n = need

    @staticmethod
    def _live_rows(conn: sqlite3.Connection, ident: Identity) -> int:
        return conn.execute("SELECT count(*) FROM page_chunk_embeddings WHERE provider = ? AND model = ? AND dim = ?",
                            (ident.provider, ident.model, ident.dim)).fetchone()[0]

    def _compact(self, conn: sqlite3.Connection, ident: Identity) -> None:
        self._reset(ident)
        rows = conn.execute(
            "SELECT c.id, c.page_id, c.chunk, c.vector, c.content_hash, p.project_id FROM page_chunk_embeddings c"
            " JOIN pages p ON p.id = c.page_id WHERE c.provider = ? AND c.model = ? AND c.dim = ? ORDER BY c.id",
            (ident.provider, ident.model, ident.dim)).fetchall()
        rows = [r for r in rows if len(r[3]) == 4 * ident.dim]
        if rows:
            self._append(rows)
            self.last_id = rows[-1][0]

    # -- the HNSW index -------------------------------------------------------------------
    def _maybe_index(self) -> None:
        """Start (or extend) the HNSW index once the copy is large enough (lock held)."""
        if self.ann_min_rows <= 0 or self.n < self.ann_min_rows or self._building:
            return
        if self._ann is not None:
            if self._ann_n < self.n:
                self._ann.add(np.arange(self._ann_n, self.n, dtype=np.uint64), self._mat[self._ann_n:self.n])
                self._ann_n = self.n
            return
        self._building = True
        n, mat, ident = self.n, self._mat[:self.n].copy(), self.ident
        if self.background:
            threading.Thread(target=self._build, args=(ident, mat, n), name="chunk-ann", daemon=True).start()
        else:
            self._lock.release()
            try:
                self._build(ident, mat, n)
            finally:
                self._lock.acquire()

    def _build(self, ident: Identity, mat: np.ndarray, n: int) -> None:
        from usearch.index import Index

        try:
            index = Index(ndim=ident.dim, metric="cos", dtype="f32", connectivity=ANN_CONNECTIVITY,
                          expansion_add=ANN_EXPANSION, expansion_search=ANN_EXPANSION)
            index.add(np.arange(n, dtype=np.uint64), mat, threads=1)
        except Exception:  # noqa: BLE001 - the exact path stays; the next refresh tries again
            log.exception("chunk vector index build failed; searching exactly")
            with self._lock:
                self._building = False
            return
        with self._lock:
            self._building = False
            if self.ident != ident:
                return
            self._ann, self._ann_n = index, n
            if self._ann_n < self.n:
                self._ann.add(np.arange(self._ann_n, self.n, dtype=np.uint64), self._mat[self._ann_n:self.n])
                self._ann_n = self.n
        log.info("chunk vector index ready: %d rows", n)

    @property
    def indexed(self) -> bool:
        """True once the HNSW index serves searches."""
        return self._ann is not None

    # -- search ---------------------------------------------------------------------------
    def nearest(self, conn: sqlite3.Connection, q: np.ndarray, ident: Identity, projects: Sequence[str] | None,
                pages: int, *, exact: bool = False) -> dict[int, list[tuple[int, float]]]:
        """The ≤ ``pages`` pages nearest to unit vector ``q``: ``{page_id: [(chunk, cosine), ...]}``.

        Each page's chunks come best first; pages are ordered by their best chunk (dict order).
        ``projects`` None = every project. ``exact`` forces the numpy path (tests compare).
        Candidates are checked against ``pages`` on ``conn`` (live, in scope, current hash).
        """
        self.refresh(conn, ident)
        with self._lock:
            n = self.n
            mat, page, chunk, proj, hashes = self._mat, self._page, self._chunk, self._proj, self._hash
            ann, ann_n = self._ann, self._ann_n
            codes = None if projects is None else [self._proj_codes[p] for p in projects if p in self._proj_codes]
        if n == 0 or codes == []:
            return {}
        rows = np.arange(n) if codes is None else np.flatnonzero(np.isin(proj[:n], codes))
        if len(rows) == 0:
            return {}
        want = pages * (ANN_FANOUT if ann is not None else EXACT_FANOUT)
        if ann is None or exact or len(rows) <= self.ann_min_rows:
            sims = mat[rows] @ q
            top = np.argpartition(-sims, want)[:want] if len(sims) > want else np.arange(len(sims))
            hits = [(int(rows[i]), float(sims[i])) for i in top]
        else:
            k = min(ann_n, ANN_MAX_K, max(want, int(want * n / len(rows))))
            res = ann.search(q, k)
            inside = None if codes is None else set(codes)
            hits = [(int(key), 1.0 - float(d)) for key, d in zip(res.keys, res.distances)
                    if inside is None or int(proj[int(key)]) in inside]
        return self._check(conn, hits, page, chunk, hashes, projects, pages)

    @staticmethod
    def _check(conn: sqlite3.Connection, hits: list[tuple[int, float]], page: np.ndarray, chunk: np.ndarray,
               hashes: list[str], projects: Sequence[str] | None, pages: int) -> dict[int, list[tuple[int, float]]]:
        ids = sorted({int(page[r]) for r, _ in hits})
        if not ids:
            return {}
        where, args = "", []
        if projects is not None:
            where = f" AND project_id IN ({','.join('?' * len(projects))})"
            args = list(projects)
        live = dict(conn.execute(
            f"SELECT id, content_hash FROM pages WHERE id IN ({','.join('?' * len(ids))}) AND is_latest = 1{where}",
            [*ids, *args]).fetchall())
        out: dict[int, list[tuple[int, float]]] = {}
        seen: set[tuple[int, int]] = set()
        for r, s in sorted(hits, key=lambda h: -h[1]):
            pid, c = int(page[r]), int(chunk[r])
            if live.get(pid) != hashes[r] or (pid, c) in seen or s <= 0.0:  # stale, duplicate or unrelated
                continue
            seen.add((pid, c))
            if pid not in out and len(out) >= pages:
                continue
            out.setdefault(pid, []).append((c, s))
        return out


def _grow(a: np.ndarray, cap: int) -> np.ndarray:
    out = np.zeros((cap, *a.shape[1:]), dtype=a.dtype)
    out[:len(a)] = a
    return out
