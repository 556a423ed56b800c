"""SQL pieces the streams share.

Scope filters, the expiry filter, bm25 over a page FTS table, the live page count, SQLite varints.

All sync functions of a read connection (a ``ReaderPool`` thread).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection
from typing import Any

from aimem_common.models import Scope
from aimem_common.read.text import fts_query

TITLE_WEIGHT = 4.0  # bm25 column weight of a page's title against its body (1.0)
BM25_K1, BM25_B = 1.2, 0.75  # FTS5's and tantivy's bm25 constants
# A 1–2 character unspaced word is matched by the trigrams starting with it (``pages_tri_inst``,
# one row per occurrence, ~1 µs each): at most SHORT_SCAN_ROWS occurrences are read per word
# (~100 ms), a bound only a character in most of a 100k-page CJK vault reaches.
SHORT_SCAN_ROWS = 100_000


def marks(n: int) -> str:
    """``?,?,…`` for an ``IN`` list of ``n`` values."""
    return ",".join("?" * n)


def scope_sql(scopes: list[Scope] | None, col: str) -> tuple[str, list[Any]]:
    """`` AND <col> IN (…)`` and its project ids for ``scopes`` (``None`` = every project: ``""``)."""
    if scopes is None:
        return "", []
    return f" AND {col} IN ({marks(len(scopes))})", [s.project_id for s in scopes]


def scoped_match(q: str, scopes: list[Scope] | None) -> str:
    """The FTS5 expression for ``q`` restricted to ``scopes`` inside FTS5 (its project_id column)."""
    if scopes is None:
        return "{title body} : (" + q + ")"
    projects = fts_query([s.project_id for s in scopes])
    return f"project_id : ({projects}) AND {{title body}} : ({q})"


def expiry_sql(include_expired: bool, alias: str = "p.") -> str:
    """`` AND`` a page is not past its ``expires_at`` (``""`` when expired pages are asked for)."""
    if include_expired:
        return ""
    return f" AND ({alias}expires_at IS NULL OR julianday({alias}expires_at) > julianday('now'))"


def bm25_pages(conn: sqlite3.Connection, q: str, scopes: list[Scope] | None, candidates: int,
               include_expired: bool, table: str = "pages_fts",
               exclude: Collection[int] = ()) -> list[tuple[int, float]]:
    """Pages matching ``q`` (an ``fts_query``) by bm25 (title ×``TITLE_WEIGHT``): ``[(page_id,
    bm25 > 0)]`` best first, len ≤ ``candidates``.

    ``pages_fts`` filters the project inside FTS5, so the index alone ranks the scope's
    matches and only the best ``2 × candidates`` rowids are joined to ``pages`` (expiry);
    measured at 100k pages this is ~40 % less CPU than joining every match before the sort
    (bench/query_latency.py). ``pages_tri`` has no project column: its (few) matches are
    joined and filtered by project before the sort; ``exclude`` (page ids) are left out there.
    """
    expiry = expiry_sql(include_expired)
    if table == "pages_fts":
        rows = conn.execute(
            f"SELECT p.id, f.s FROM (SELECT rowid, bm25(pages_fts, {TITLE_WEIGHT}, 1.0, 0.0) AS s FROM pages_fts"
            f" WHERE pages_fts MATCH ? ORDER BY s LIMIT ?) f JOIN pages p ON p.id = f.rowid WHERE 1 = 1{expiry}"
            " ORDER BY f.s, p.id",
            [scoped_match(q, scopes), candidates * 2],
        ).fetchall()[:candidates]
    else:
        where, args = scope_sql(scopes, "+p.project_id")  # drive the join from the FTS match
        if exclude:
            where += f" AND p.id NOT IN ({marks(len(exclude))})"
            args += list(exclude)
        rows = conn.execute(
            f"SELECT p.id, bm25({table}, {TITLE_WEIGHT}, 1.0) AS s FROM {table} JOIN pages p ON p.id = {table}.rowid"
            f" WHERE {table} MATCH ?{where}{expiry} ORDER BY s, p.id LIMIT ?",
            [q, *args, candidates],
        ).fetchall()
    return [(r[0], -float(r[1])) for r in rows]  # bm25 is "lower is better": report it positive


def live_page_count(conn: sqlite3.Connection, scopes: list[Scope] | None) -> int:
    """Number of live pages in ``scopes`` (``None`` = the whole vault).

    A scope list is counted by the page text index when the connection has a complete one
    (its postings of the project ids: ~1 ms for 100k pages, where the ``pages_recent`` index
    takes ~5 ms; the index may be a writer commit apart from this snapshot, which an idf does
    not notice), else on ``pages_recent`` (cost ∝ the scope's pages). The whole
    vault reads the row count FTS5 keeps for bm25 in ``pages_fts`` (which holds exactly the
    live pages): its averages record (``pages_fts_data`` id 1) starts with that count as an
    SQLite varint — one row read instead of a scan of every page (6 ms at 100k pages, 60 ms
    at 1M). A record that cannot be read falls back to counting.
    """
    if scopes is not None:
        index = getattr(conn, "text_index", None)
        n = index.count([s.project_id for s in scopes]) if index is not None else None
        if n is not None:
            return n
        where, args = scope_sql(scopes, "project_id")
        return conn.execute("SELECT count(*) FROM pages WHERE is_latest = 1" + where, args).fetchone()[0]
    n = fts_row_count(conn, "pages_fts_data")
    if n is None:
        return conn.execute("SELECT count(*) FROM pages WHERE is_latest = 1").fetchone()[0]
    return n


def fts_row_count(conn: sqlite3.Connection, data_table: str) -> int | None:
    """The row count an FTS5 table keeps for bm25 (its ``<name>_data`` averages record), or None."""
    row = conn.execute(f"SELECT block FROM {data_table} WHERE id = 1").fetchone()
    return varint(row[0]) if row and row[0] else None


def varint(buf: bytes) -> int | None:
    """Decode the SQLite varint at the start of ``buf`` (big-endian 7-bit groups; 9th byte whole)."""
    n = 0
    for i, b in enumerate(buf[:9]):
        if i == 8:
            return (n << 8) | b
        n = (n << 7) | (b & 0x7F)
        if not b & 0x80:
            return n
    return None


def json_list(text: str | None) -> list[str]:
    """A JSON array column as ``list[str]`` (``[]`` for anything else)."""
    try:
        v = json.loads(text or "[]")
    except ValueError:
        return []
    return [str(x) for x in v] if isinstance(v, list) else []
