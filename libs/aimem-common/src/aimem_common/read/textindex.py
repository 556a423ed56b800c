"""The page text index: a tantivy index of the live pages, derived from SQLite.

FTS5 computes bm25 for every page a question matches before it can sort (no top-k pruning),
so the fts stream's cost grows with the matches: ~26,000 of a 100k-page project for a
4-term question at 1M pages. Tantivy ranks the same OR query with block-max WAND (it skips
blocks of postings that cannot reach the current top k), so the cost follows the top k.

The index is **derived**: ``pages`` stays the truth. The writer is its only writer
(``aimem_writer.textindex``): page changes reach it through ``search_outbox`` (filled by
triggers in the page's own transaction) and are committed to the index before the writer
replies. A missing, corrupt or outdated index is rebuilt from ``pages`` in the background;
until the marker file says the index is complete for ``INDEX_VERSION``, readers use FTS5.
A read replica (a Litestream copy of the DB alone) has no index and always uses FTS5.

Layout under ``<data_dir>/search/``: ``pages/`` (the tantivy directory) and
``pages.complete`` (the marker; its text is ``INDEX_VERSION``).

This module holds what both sides share (schema, tokenizer, layout) and the reader
(``TextIndexReader``), one per ``ReaderPool``.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from pathlib import Path
from typing import Any

import tantivy

from aimem_common.read.text import index_form

log = logging.getLogger("aimem.read.textindex")

# The title counts as this many copies of itself in the indexed text (as FTS5's bm25 column
# weight ``search.sql.TITLE_WEIGHT`` weighs it: its term frequencies ×4 inside one bm25 saturation).
# Separate title and body fields, each with its own bm25 summed with a ×4 boost, let a title
# match dominate: LoCoMo hit@5 0.956 -> 0.939, MRR 0.816 -> 0.792 (bench/locomo.py --offline).
TITLE_REPEAT = 4
# Bumped whenever the schema, the tokenizer or TITLE_REPEAT changes: an index with another
# marker text is rebuilt by the writer and ignored by readers meanwhile.
# 3: the indexed text is ``text.index_form`` (NFC, İ as I).
INDEX_VERSION = f"aimem-pages-3-t{TITLE_REPEAT}"
INDEX_DIR = "pages"
MARKER = "pages.complete"
TOKENIZER = "aimem_text"
# A token longer than this is dropped (tantivy refuses terms past 64 KiB; no word is this long).
MAX_TOKEN_CHARS = 100


def analyzer() -> tantivy.TextAnalyzer:
    """The text analyzer of ``title``/``body``, as close to FTS5's ``porter unicode61
    remove_diacritics 2`` as tantivy has: split on non-alphanumeric characters, lower-case,
    fold diacritics to ASCII, English (Porter 2) stemming."""
    return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.remove_long(MAX_TOKEN_CHARS))
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.ascii_fold())
            .filter(tantivy.Filter.stemmer("english"))
            .build())


def schema() -> tantivy.Schema:
    """``page_id`` (i64, fast: read back without the doc store), ``project`` (the project id,
    untokenized: the filter term), ``text`` (``indexed_text``, ``analyzer()``, with
    frequencies for bm25; no positions: the query is an OR of terms). Nothing is stored."""
    sb = tantivy.SchemaBuilder()
    sb.add_integer_field("page_id", stored=False, indexed=True, fast=True)
    sb.add_text_field("project", stored=False, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("text", stored=False, tokenizer_name=TOKENIZER, index_option="freq")
    return sb.build()


def indexed_text(title: str, body: str) -> str:
    """The text a page is indexed by: ``TITLE_REPEAT`` copies of its title, then its body, in
    ``text.index_form`` (NFC; the question's terms are NFKC, ``text.query_terms``)."""
    return index_form(((title or "") + "\n") * TITLE_REPEAT + (body or ""))


def index_dir(search_dir: Path) -> Path:
    """The tantivy directory under ``search_dir`` (``<data_dir>/search``)."""
    return Path(search_dir) / INDEX_DIR


def marker_path(search_dir: Path) -> Path:
    """The completeness marker under ``search_dir``."""
    return Path(search_dir) / MARKER


def is_complete(search_dir: Path) -> bool:
    """True when the marker says the index holds every live page for ``INDEX_VERSION``."""
    try:
        return marker_path(search_dir).read_text("utf-8").strip() == INDEX_VERSION
    except OSError:
        return False


def open_index(path: Path, *, create: bool = False) -> tantivy.Index:
    """Open (or, with ``create``, create) the tantivy index at ``path`` with the tokenizer
    registered (every opener must register it before indexing or searching).

    Raises:
        ValueError, OSError: no index there, or one tantivy cannot read.
    """
    if create:
        path.mkdir(parents=True, exist_ok=True)
        idx = tantivy.Index(schema(), path=str(path), reuse=False)
    else:
        idx = tantivy.Index.open(str(path))
    idx.register_tokenizer(TOKENIZER, analyzer())
    return idx


def query_tokens(terms: list[str], tokens=None) -> list[str]:
    """The distinct index tokens of the question's ``terms`` (``text.query_terms``), in order.

    Each term is analysed like the indexed text; the tokens become term queries, never
    parsed query syntax, so no operator in the user's text reaches tantivy.
    """
    an = tokens or analyzer()
    seen: dict[str, None] = {}
    for t in terms:
        for tok in an.analyze(t):
            seen.setdefault(tok, None)
    return list(seen)


def fts5_idf_ratio(n_docs: int, df: int) -> float:
    """How much FTS5's bm25 idf of a term differs from tantivy's, as a boost for its term query.

    FTS5: ``ln((N - n + 0.5) / (n + 0.5))``, floored at 1e-6, so a term in more than half of
    the pages weighs almost nothing; tantivy: ``ln(1 + (N - n + 0.5) / (n + 0.5))``, never less
    than ln 2. Boosting by the ratio gives each term FTS5's idf (LoCoMo ranks as with FTS5).
    ``df`` is capped at ``n_docs``: tantivy's document frequency still counts deleted versions
    until their segment is merged, while ``num_docs`` counts live documents only, so a term
    in every live page of a store with an edit not yet merged has ``df > n_docs``.
    """
    df = min(df, n_docs)
    x = (n_docs - df + 0.5) / (df + 0.5)
    return max(1e-6, math.log(x)) / math.log1p(x)


def build_query(sch: tantivy.Schema, toks: list[tuple[str, float]], projects: list[str] | None) -> tantivy.Query:
    """The OR of ``toks`` (``(token, boost)``) over ``text``, restricted to ``projects``
    (``None`` = every project) by a zero-scoring filter clause.

    A global query is a pure disjunction of term queries (tantivy's block-max WAND); a
    scoped one intersects the project's postings with it.
    """
    terms = tantivy.Query.boolean_query(
        [(tantivy.Occur.Should, tantivy.Query.boost_query(tantivy.Query.term_query(sch, "text", tok), boost))
         for tok, boost in toks])
    if projects is None:
        return terms
    if len(projects) == 1:
        filt = tantivy.Query.term_query(sch, "project", projects[0])
    else:
        filt = tantivy.Query.term_set_query(sch, "project", list(projects))
    return tantivy.Query.boolean_query([(tantivy.Occur.Must, tantivy.Query.const_score_query(filt, 0.0)),
                                        (tantivy.Occur.Must, terms)])


def index_failure(exc: BaseException) -> bool:
    """True for what a vanished or damaged index raises from tantivy: ``ValueError`` /
    ``OSError``, or a Rust panic inside it (pyo3's ``PanicException``, which derives from
    ``BaseException``, not ``Exception``: damaged postings panic with an index out of bounds)."""
    return isinstance(exc, (ValueError, OSError)) or type(exc).__name__ == "PanicException"


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns)


class TextIndexReader:
    """The page text index as one process reads it (owned by its ``ReaderPool``).

    Thread-safe. Each ``search`` checks, with two ``stat`` calls, whether the marker or the
    index's ``meta.json`` changed since the last one: a new marker (a rebuild finished)
    reopens the index, a new ``meta.json`` (the writer committed) reloads it, so a page the
    writer acknowledged is found by the next search. Opened lazily; while the index is absent
    or incomplete ``search`` returns None and the caller uses FTS5.

    Args:
        search_dir: ``<data_dir>/search`` (``Settings.search_dir``).
    """

    def __init__(self, search_dir: Path):
        self.search_dir = Path(search_dir)
        self._lock = threading.Lock()
        self._index: tantivy.Index | None = None
        self._schema: tantivy.Schema | None = None
        self._analyzer = analyzer()
        self._marker_stamp: tuple[int, int] | None = None
        self._meta_stamp: tuple[int, int] | None = None
        # (marker, meta.json) stamps of an index that panicked: left alone until either changes
        self._broken: tuple[Any, Any] | None = None

    def _current(self) -> tantivy.Index | None:
        marker = _stamp(marker_path(self.search_dir))
        meta = _stamp(index_dir(self.search_dir) / "meta.json")
        idx = self._index
        if marker is not None and marker == self._marker_stamp and meta == self._meta_stamp and idx is not None:
            return idx
        if self._broken is not None and self._broken == (marker, meta):
            return None
        with self._lock:
            self._broken = None
            if marker is None or not is_complete(self.search_dir):
                self._index, self._marker_stamp = None, marker
                return None
            try:
                if marker != self._marker_stamp or self._index is None:
                    self._index = open_index(index_dir(self.search_dir))
                    self._schema = self._index.schema
                else:
                    self._index.reload()
            except BaseException as exc:  # half-written or damaged: FTS5 meanwhile
                if not index_failure(exc):
                    raise
                log.warning("text index at %s unreadable, using FTS5: %s", self.search_dir, exc)
                self._index = None
                return None
            self._marker_stamp, self._meta_stamp = marker, meta
            return self._index

    def available(self) -> bool:
        """True when the index is complete and opens (searches will use it)."""
        return self._current() is not None

    def search(self, terms: list[str], projects: list[str] | None, limit: int) -> list[tuple[int, float]] | None:
        """The best ``limit`` live-at-last-commit pages for ``terms``: ``[(page_id, bm25)]``,
        best first, bm25 positive. ``projects``: project ids to search (``None`` = all).

        Returns None when the index cannot be used (the caller falls back to FTS5). The
        caller still checks each page against SQLite (live, not expired): the index may be a
        commit behind the caller's read snapshot.
        """
        idx = self._current()
        if idx is None:
            return None
        try:
            searcher = idx.searcher()
            n_docs = searcher.num_docs
            toks = []
            for tok in query_tokens(terms, self._analyzer):
                df = searcher.doc_freq("text", tok)
                if df:
                    toks.append((tok, fts5_idf_ratio(n_docs, df)))
            if not toks:
                return []
            query = build_query(self._schema, toks, projects)
            res = searcher.search(query, max(1, limit), count=False)
            if not res.hits:
                return []
            ids = searcher.fast_field_values("page_id", [addr for _, addr in res.hits])
        except BaseException as exc:  # files gone under a reopen, or damaged: FTS5 answers this one
            if not index_failure(exc):
                raise
            self._failed(exc)
            return None
        return [(int(pid), float(score)) for (score, _), pid in zip(res.hits, ids) if pid is not None]

    def count(self, projects: list[str]) -> int | None:
        """Live pages of ``projects`` (project ids) at the index's last commit; None when the
        index cannot be used."""
        idx = self._current()
        if idx is None:
            return None
        if not projects:
            return 0
        sch = self._schema
        q = (tantivy.Query.term_query(sch, "project", projects[0]) if len(projects) == 1
             else tantivy.Query.term_set_query(sch, "project", list(projects)))
        try:
            return int(idx.searcher().search(q, 1, count=True).count)
        except BaseException as exc:
            if not index_failure(exc):
                raise
            self._failed(exc)
            return None

    def _failed(self, exc: BaseException) -> None:
        """A search on the open index failed: files gone under a reopen (reopen on the next
        search) or, for a panic, damaged files (left alone until the writer commits or
        rebuilds, so every search does not panic again)."""
        log.warning("text index search failed, using FTS5: %s", exc)
        if type(exc).__name__ == "PanicException":
            self._broken = (self._marker_stamp, self._meta_stamp)
            self._index = None
        self._marker_stamp = None  # reopen on the next search

    def info(self) -> dict[str, Any]:
        """``{"dir", "complete", "docs"}`` for status and benchmarks."""
        idx = self._current()
        return {"dir": str(self.search_dir), "complete": idx is not None,
                "docs": idx.searcher().num_docs if idx is not None else 0}


def disk_bytes(search_dir: Path) -> int:
    """Bytes the index occupies on disk (every file under ``search_dir``)."""
    total = 0
    for root, _dirs, files in os.walk(search_dir):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total
