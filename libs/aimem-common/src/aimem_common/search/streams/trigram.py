"""trigram: the question's unspaced-script words matched as trigrams in ``pages_tri`` (bm25, title ×4).

Chinese, Japanese, Korean, Thai, ...

A word inside a sentence is found though unicode61 makes one token of the whole run. A 1–2
character word is matched by every trigram starting with it (``_short_word``), and the
question's Latin/digit terms as substrings (``TrigramTerms``: a Latin word glued to CJK text,
``…のKubernetesクラスタ…``; a Latin-only question adds only pages fts missed). ``pages_tri``
holds only pages with such characters: idle in an English vault.
"""

from __future__ import annotations

import math

from aimem_common.search.sql import (BM25_K1, SHORT_SCAN_ROWS, TITLE_WEIGHT, bm25_pages, expiry_sql,
                                     fts_row_count, scope_sql)
from aimem_common.search.stream import Ranked, Run, stream

WEIGHT = 1.0


@stream("trigram", weight=WEIGHT, margin=True)
def rank(run: Run) -> Ranked | None:
    """``pages_tri`` bm25 for ``tri.match`` plus each short word's score, summed per page;
    ``[(page_id, score)]`` best first, len ≤ ``candidates``. For a ``latin_only`` question the
    fts stream's pages are left out."""
    tt, opts = run.question.tri, run.opts
    if not (tt.match or tt.short):
        return None
    exclude = run.fts_ids if tt.latin_only else ()
    scores: dict[int, float] = {}
    if tt.match:
        for pid, sc in bm25_pages(run.conn, tt.match, run.scopes, opts.candidates, opts.include_expired,
                                  table="pages_tri", exclude=exclude):
            scores[pid] = sc
    for word in tt.short:
        for pid, sc in _short_word(run, word):
            if pid not in exclude:
                scores[pid] = scores.get(pid, 0.0) + sc
    ranked = sorted(scores.items(), key=lambda kv: (-round(kv[1], 9), kv[0]))
    return ranked[: opts.candidates]


def _short_word(run: Run, word: str) -> Ranked:
    """Live pages of the scope holding the 1–2 character ``word``: ``[(page_id, score)]``, best first.

    Every occurrence of the word has an indexed trigram starting with it (``pages_tri`` pads
    each column with ``db.trigram.TRI_PAD``), so a range scan of ``pages_tri_inst`` over those
    trigrams yields every page holding it, whatever other projects hold; at most
    ``SHORT_SCAN_ROWS`` occurrences are read. Score: bm25's term part without length
    normalisation, ``idf × tf × (k1 + 1) / (tf + k1)``, tf counting a title occurrence
    ``TITLE_WEIGHT`` times, idf over ``pages_tri``'s pages (N) and the scope's matches (df).
    """
    where, args = scope_sql(run.scopes, "p.project_id")
    rows = run.conn.execute(
        f"SELECT p.id, t.tf FROM (SELECT doc, sum(CASE WHEN col = 'title' THEN {TITLE_WEIGHT} ELSE 1.0 END) AS tf"
        " FROM (SELECT doc, col FROM pages_tri_inst WHERE term >= ? AND term < ? LIMIT ?) GROUP BY doc) t"
        f" JOIN pages p ON p.id = t.doc WHERE p.is_latest = 1{where}{expiry_sql(run.opts.include_expired)}",
        [word, word + "\U0010ffff", SHORT_SCAN_ROWS, *args],
    ).fetchall()
    if not rows:
        return []
    n = max(len(rows), fts_row_count(run.conn, "pages_tri_data") or len(rows))
    idf = math.log(1 + (n - len(rows) + 0.5) / (len(rows) + 0.5))
    ranked = [(pid, idf * tf * (BM25_K1 + 1) / (tf + BM25_K1)) for pid, tf in rows]
    ranked.sort(key=lambda kv: (-round(kv[1], 9), kv[0]))
    return ranked
