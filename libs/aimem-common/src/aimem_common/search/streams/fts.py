"""fts: bm25 over the live pages' title and body (title ×4) with the OR of the question's terms.

The page text index (``read.textindex``, tantivy, top-k pruning) when the connection's pool has
a complete one, else FTS5's ``pages_fts`` (each term quoted: no operator can be injected).
"""

from __future__ import annotations

from aimem_common.search.sql import bm25_pages, expiry_sql, marks
from aimem_common.search.stream import Ranked, Run, stream

WEIGHT = 1.0


@stream("fts", weight=WEIGHT, margin=True)
def rank(run: Run) -> Ranked | None:
    """Pages by bm25 of ``question.fts``; ``[(page_id, bm25)]`` best first (records ``run.fts_ids``).

    The index ranks with top-k pruning (its cost follows the top k, FTS5's the matches); its
    best ``2 × candidates`` are checked against this read snapshot (live, not expired), since
    the index may be one writer commit ahead of or behind it.
    """
    q, opts = run.question.fts, run.opts
    if not q:
        return None
    index = getattr(run.conn, "text_index", None)
    found = None
    if index is not None:
        projects = None if run.scopes is None else [s.project_id for s in run.scopes]
        found = index.search(run.question.terms, projects, opts.candidates * 2)
    if found is None:
        ranked = bm25_pages(run.conn, q, run.scopes, opts.candidates, opts.include_expired)
    elif not found:
        ranked = []
    else:
        live = {r[0] for r in run.conn.execute(
            f"SELECT id FROM pages INDEXED BY pages_live WHERE id IN ({marks(len(found))}) AND is_latest = 1"
            f"{expiry_sql(opts.include_expired, '')}", [pid for pid, _ in found])}
        # Equal scores in page id order, as the FTS5 path gives them: the index orders ties by
        # its own document order, which differs between an index built page by page and one
        # rebuilt in bulk (after a restore), and the fused ranking must not depend on that.
        ranked = sorted(((pid, score) for pid, score in found if pid in live),
                        key=lambda kv: (-round(kv[1], 5), kv[0]))[: opts.candidates]
    run.fts_ids = [pid for pid, _ in ranked]
    return ranked
