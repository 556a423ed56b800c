"""Captured turns matched by trigrams (``observations_tri``), for the turns stream and ``raw_hits``.

A turn's word inside an unspaced-script sentence (``db/migrations/m13_observations_tri``).

Only a question with such a word reads it; an English vault's table is empty.
"""

from __future__ import annotations

import math
import sqlite3

from aimem_common.models import Scope
from aimem_common.search.question import TrigramTerms
from aimem_common.search.sql import BM25_K1, SHORT_SCAN_ROWS, fts_row_count, scope_sql

TURN_TITLE_WEIGHT = 4.0  # bm25 column weight of an observation's title (its first words) against its body


def obs_tri_hits(conn: sqlite3.Connection, tt: TrigramTerms, scopes: list[Scope] | None,
                 limit: int) -> list[tuple[int, float]]:
    """Observations of ``scopes`` matching ``tt`` in ``observations_tri``: ``[(observation id,
    score)]`` best first, len ≤ ``limit``; ``[]`` when ``tt.latin_only``.

    Scored as the trigram stream scores pages: bm25 of ``tt.match`` (title
    ×``TURN_TITLE_WEIGHT``) plus, per 1–2 character word, ``idf × tf × (k1 + 1) / (tf + k1)``
    over the trigrams starting with it (a range scan of ``observations_tri_inst``, at most
    ``SHORT_SCAN_ROWS`` occurrences). The scope is ``observations.project_id`` (the index has
    no project column, so a moved observation needs no re-indexing).
    """
    if tt.latin_only or not (tt.match or tt.short):
        return []
    where, args = scope_sql(scopes, "+o.project_id")  # drive the join from the index
    scores: dict[int, float] = {}
    if tt.match:
        for oid, s in conn.execute(
                f"SELECT o.id, bm25(observations_tri, {TURN_TITLE_WEIGHT}, 1.0) AS s FROM observations_tri"
                f" JOIN observations o ON o.id = observations_tri.rowid WHERE observations_tri MATCH ?{where}"
                " ORDER BY s, o.id LIMIT ?", [tt.match, *args, limit]).fetchall():
            scores[oid] = -float(s)
    for word in tt.short:
        rows = conn.execute(
            f"SELECT o.id, t.tf FROM (SELECT doc, sum(CASE WHEN col = 'title' THEN {TURN_TITLE_WEIGHT} ELSE 1.0 END)"
            " AS tf FROM (SELECT doc, col FROM observations_tri_inst WHERE term >= ? AND term < ? LIMIT ?)"
            f" GROUP BY doc) t JOIN observations o ON o.id = t.doc WHERE 1 = 1{where}",
            [word, word + "\U0010ffff", SHORT_SCAN_ROWS, *args]).fetchall()
        if not rows:
            continue
        n = max(len(rows), fts_row_count(conn, "observations_tri_data") or len(rows))
        idf = math.log(1 + (n - len(rows) + 0.5) / (len(rows) + 0.5))
        for oid, tf in rows:
            scores[oid] = scores.get(oid, 0.0) + idf * tf * (BM25_K1 + 1) / (tf + BM25_K1)
    return sorted(scores.items(), key=lambda kv: (-round(kv[1], 9), kv[0]))[:limit]
