"""exact: pages holding a rare identifier of the question (error code, function name, version).

An identifier (``text.identifier_terms``) held by at most ``EXACT_MAX_DF`` live pages in scope
marks those pages as found with certainty. Its RRF share (weight 11.0) is added *after* the
authority factor, and 11/(k+1) is above what the other streams of a plain search give a page at
rank 1 together (fts 1.5, turns 2.25 and passage 2.25 with their margin bonus, entity 0.8,
vector 1.0, links 0.5: 8.3, × the largest authority 1.3 = 10.8), so a page naming the rare
identifier is never outvoted by pages that merely share the question's other words. A common
"identifier" (more pages) adds nothing: bm25 already weighs it.
"""

from __future__ import annotations

import re
import sqlite3

from aimem_common.read.text import fts_query
from aimem_common.search.sql import expiry_sql, marks, scope_sql, scoped_match
from aimem_common.search.stream import Ranked, Run, stream

WEIGHT = 11.0
EXACT_MAX_DF = 10
DOTTED_SCAN = 200  # phrase matches of a dotted number read to find the pages writing it as such
_DOTTED_NUMBER = re.compile(r"\d+(?:\.\d+){2,}")


@stream("exact", weight=WEIGHT, certain=True)
def rank(run: Run) -> Ranked | None:
    """Pages holding a rare identifier of the question: score Σ 1/df over the identifiers held.

    A dotted number (``2.3.1``) is a phrase of its parts to FTS5, which ``2, 3, 1``,
    ``192.2.3.1`` and ``2-3-1`` match too: its matches (and those of ``v2.3.1``) are kept to the
    pages whose text writes it with dots and no longer number around it (``_dotted_pages``).
    """
    if not run.question.idents:
        return None
    where, args = scope_sql(run.scopes, "+p.project_id")
    expiry = expiry_sql(run.opts.include_expired)
    score: dict[int, float] = {}
    for ident in run.question.idents:
        dotted = _DOTTED_NUMBER.fullmatch(ident) is not None
        expr = fts_query([ident, "v" + ident] if dotted else [ident]) or '""'
        rows = run.conn.execute(
            "SELECT p.id FROM pages_fts JOIN pages p ON p.id = pages_fts.rowid"
            f" WHERE pages_fts MATCH ?{where}{expiry} LIMIT ?",
            [scoped_match(expr, run.scopes), *args, DOTTED_SCAN if dotted else EXACT_MAX_DF + 1],
        ).fetchall()
        ids = [pid for (pid,) in rows]
        if dotted:
            ids = _dotted_pages(run.conn, ident, ids)
        if len(ids) > EXACT_MAX_DF:
            continue
        for pid in ids:
            score[pid] = score.get(pid, 0.0) + 1.0 / len(ids)
    return sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))


def _dotted_pages(conn: sqlite3.Connection, number: str, ids: list[int]) -> list[int]:
    """Of ``ids``, the pages whose title or body writes ``number`` (``2.3.1``, or ``v2.3.1``)
    with no digit, letter or dotted part joined to it."""
    if not ids:
        return []
    pattern = re.compile(r"(?<![\w.])v?" + re.escape(number) + r"(?![\w]|\.\d)", re.I)
    rows = conn.execute(f"SELECT id, title, body FROM pages WHERE id IN ({marks(len(ids))})", ids)
    return [pid for pid, title, body in rows if pattern.search(title or "") or pattern.search(body or "")]
