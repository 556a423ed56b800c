"""turns: bm25 over the captured observations of the scope, folded onto their session's live page.

A session page holds a bounded digest of the session (the prompts past its budget are cut),
its observations every turn, so a long session is findable by any part of it. A page scores
its best turn (bm25 margin bonus as fts). The question's unspaced-script words also match turns
in ``observations_tri`` (trigrams, as ``pages_tri``; it holds only observations with such
characters).

Weight 1.5: on LoCoMo (bench/locomo.py, session pages of 20-45 turns whose digest keeps the
first ~5 KiB of prompts) the turns stream takes hit@5 0.927 -> 0.954 and MRR 0.791 -> 0.817
(1.0-2.0 differ by < 0.005); alone it ranks no better than fts.
"""

from __future__ import annotations

from aimem_common.read.text import fts_query
from aimem_common.search.observations import TURN_TITLE_WEIGHT, obs_tri_hits
from aimem_common.search.sql import marks, scoped_match
from aimem_common.search.stream import Ranked, Run, stream

WEIGHT = 1.5
# Matching observations ranked per query before they are folded onto session pages (a
# session's page scores its best turn: on LoCoMo adding 0.1-0.3 of the other turns' bm25 made
# hit@5 0.954 -> 0.935-0.948, a long session then wins by length).
TURN_CANDIDATES = 240
# Observations the question may match in scope before only its rarer terms are used (bounds the
# bm25 work: at 100k pages with 20 turns per session page the full OR query doubled a search's CPU).
# LoCoMo (~600 turns a project; a question matches ~400 of them at the median): 500 -> 300 takes
# memory_query's CPU 4.4-4.6 / 6.4-7.5 ms -> 3.6-3.8 / 5.4-5.9 ms (p50 / p95, in process) with hit@5
# unchanged (0.954, both halves) and MRR 0.8359 -> 0.8356; 250 loses hit@5 (0.952).
TURN_MATCH_CAP = 300

# FTS5 ranks alone; only the best rowids are joined (half the CPU of joining every match).
_SQL = ("SELECT o.project_id, o.session_id, f.s, o.id FROM (SELECT rowid, bm25(observations_fts,"
        f" {TURN_TITLE_WEIGHT}, 1.0, 0.0) AS s"
        " FROM observations_fts WHERE observations_fts MATCH ? ORDER BY s LIMIT ?) f"
        " JOIN observations o ON o.id = f.rowid ORDER BY f.s")

Sessions = dict[tuple[str, str], float]  # (project id, session id) -> best turn score


@stream("turns", weight=WEIGHT, margin=True)
def rank(run: Run) -> Ranked | None:
    """Live session pages whose observations match the question's terms, best first.

    The ``TURN_CANDIDATES`` best observations (bm25, title ×``TURN_TITLE_WEIGHT``; the project
    filter runs inside FTS5) are grouped by session; a page scores its best turn. Each ranked
    page's matching observation ids, best first, go to ``run.turn_ids`` (the passage stage's
    anchors). bm25 is computed for every matching observation, and a vault keeps many more
    observations than pages, so when the question's terms match more than ``TURN_MATCH_CAP``
    observations in scope only the terms that each match at most that many are used (none:
    the stream finds nothing).
    """
    if not run.question.fts:
        return None
    conn, scopes, terms = run.conn, run.scopes, run.question.terms

    def matches(q: str) -> int:  # capped: stops counting past TURN_MATCH_CAP
        return conn.execute("SELECT count(*) FROM (SELECT rowid FROM observations_fts WHERE observations_fts MATCH ?"
                            " LIMIT ?)", (scoped_match(q, scopes), TURN_MATCH_CAP + 1)).fetchone()[0]

    q = run.question.fts
    if matches(q) > TURN_MATCH_CAP:
        q = fts_query([t for t in terms if matches(fts_query([t]) or '""') <= TURN_MATCH_CAP])
        if q is None:
            return []
    turns: Sessions = {}
    matched: dict[tuple[str, str], list[int]] = {}
    for project_id, session_id, s, oid in conn.execute(_SQL, [scoped_match(q, scopes), TURN_CANDIDATES]).fetchall():
        turns.setdefault((project_id, session_id), -float(s))  # rows come best first
        matched.setdefault((project_id, session_id), []).append(oid)
    _fold_tri_turns(run, turns, matched)
    if not turns:
        return []
    sids = sorted({sid for _pj, sid in turns})
    pages = conn.execute(
        f"SELECT id, project_id, session_id FROM pages WHERE session_id IN ({marks(len(sids))}) AND is_latest = 1",
        sids,
    ).fetchall()
    ranked = []
    for pid, project_id, session_id in pages:
        best = turns.get((project_id, session_id))
        if best is not None:
            ranked.append((pid, best))
            run.turn_ids[pid] = matched[(project_id, session_id)]
    ranked.sort(key=lambda kv: (-kv[1], kv[0]))
    return ranked[: run.opts.candidates]


def _fold_tri_turns(run: Run, turns: Sessions, matched: dict[tuple[str, str], list[int]]) -> None:
    """Add the ``TURN_CANDIDATES`` best ``obs_tri_hits`` to the per-session ``turns`` (best
    score, kept when higher) and ``matched`` (observation ids, appended)."""
    hits = obs_tri_hits(run.conn, run.question.tri, run.scopes, TURN_CANDIDATES)
    if not hits:
        return
    session_of = {oid: (pj, sid) for oid, pj, sid in run.conn.execute(
        f"SELECT id, project_id, session_id FROM observations WHERE id IN ({marks(len(hits))})",
        [oid for oid, _ in hits]).fetchall()}
    for oid, sc in hits:
        key = session_of.get(oid)
        if key is None:
            continue
        if sc > turns.get(key, float("-inf")):
            turns[key] = sc
        ids = matched.setdefault(key, [])
        if oid not in ids:
            ids.append(oid)
