"""passage: the top fused pages scored again by their best passage (passage-level evidence, "MaxP").

bm25 over runs of ``PASSAGE_SIZE`` captured turns (a session page: all of its session) or body
lines, with statistics from those runs, so a session that answers in neighbouring turns beats
one that names the question's words here and there; a page-level bm25 cannot tell them apart.

LoCoMo dev (bench/locomo.py --offline, 757 questions; before: hit@5 0.956, MRR 0.819): runs of
3 / 4 / 6 turns over the top 10 gave MRR 0.830-0.835 at weight 1.0-1.5 (top 15 / 20: within
0.003), 6 at 1.5 kept hit@5 0.954; without its margin bonus 0.822.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections import Counter
from typing import Any

from aimem_common.read.text import index_form, strip_frontmatter
from aimem_common.read.textindex import analyzer as textindex_analyzer, query_tokens
from aimem_common.search.fusion import top
from aimem_common.search.sql import BM25_B, BM25_K1, marks
from aimem_common.search.stream import Ranked, Run, stream

WEIGHT = 1.5
PASSAGE_PAGES = 10  # fused pages scored again
PASSAGE_SIZE = 6  # turns (session pages) or non-empty lines (any page) in one passage
# Matching turns of one session whose runs are read (its best first). LoCoMo dev (with the turns
# stream's cap at 300): 12 -> 8 takes MRR 0.8356 -> 0.8373 (tuned half 0.8349 -> 0.8375, check
# half 0.8363 -> 0.8370), hit@5 unchanged in both, and reads a third fewer runs.
PASSAGE_ANCHORS = 8
PASSAGE_SCAN = 10_000  # observation ids of one session cut into runs (a covering-index scan)
PASSAGE_CHARS = 2000  # characters of one turn or one run of lines read (bounds the tokenising)
PASSAGE_WINDOWS = 50  # runs of lines read per page
# Analysed runs kept per process, by their text: the stored turns and pages a project's searches
# read again (an agent asks a project several questions; its best sessions answer most of them).
# ~12 KB a run (its text and tokens); a run is ~45 µs to analyse again.
RUN_MEMO = 512

_ANALYZER: list[Any] = []


@stream("passage", weight=WEIGHT, margin=True)
def rank(run: Run) -> Ranked | None:
    """The best ``PASSAGE_PAGES`` fused candidates by their best passage's bm25, best first.

    A session page's passages are its session's observations cut in runs of ``PASSAGE_SIZE``
    from the session's start (its first ``PASSAGE_SCAN``); the runs holding one of its
    matching turns (``run.turn_ids`` from the turns stream, the first ``PASSAGE_ANCHORS``) are
    read. Any other page, or a session page none of whose turns matched, is cut in runs of
    ``PASSAGE_SIZE`` non-empty body lines (frontmatter dropped, at most ``PASSAGE_WINDOWS``).
    Text is analysed as the page text index analyses it (``textindex.analyzer``: stems, folded
    case). bm25 (``BM25_K1``, ``BM25_B``) takes its statistics from these candidates' runs alone
    (FTS5's idf, floored at 1e-6; a session's unread runs count as runs without the terms), so
    a word in most of them (a name said in every session) weighs nothing. Pages with no run
    holding a term are left out.
    """
    if not (run.question.fts and run.cands):
        return None
    conn, terms = run.conn, run.question.terms
    best_pages = top(run.cands, PASSAGE_PAGES)
    if not best_pages or not terms:
        return []
    want = set(query_tokens(terms, _analyzer()))
    if not want:
        return []
    ids = [c.page_id for c in best_pages]
    rows = conn.execute(f"SELECT id, project_id, session_id, body FROM pages WHERE id IN ({marks(len(ids))})"
                        " AND is_latest = 1", ids).fetchall()
    run.bodies.update((r[0], r[3]) for r in rows)  # the hits' snippets read them again
    passages: list[tuple[int, dict[str, int], int]] = []  # (page id, counts of the question's tokens, length)
    n = 0  # runs, read or not

    def add(pid: int, text: str) -> None:
        toks = _analysed(text)
        held = want.intersection(toks)  # usually none or one of the question's tokens
        passages.append((pid, {t: toks.count(t) for t in want if t in held} if held else {}, len(toks)))

    size = PASSAGE_SIZE
    anchored = {pid: a for pid, _pj, session_id, _b in rows if session_id and (a := run.turn_ids.get(pid))}
    seqs = _session_ids(conn, [(pid, pj, sid) for pid, pj, sid, _b in rows if pid in anchored])
    picked: dict[int, list[int]] = {}  # page id -> the run numbers read, ascending
    for pid, anchors in anchored.items():
        seq = seqs.get(pid, [])
        picked[pid] = sorted({i // size for oid in anchors[:PASSAGE_ANCHORS]
                              if (i := bisect.bisect_left(seq, oid)) < len(seq) and seq[i] == oid})
    run_ids = [oid for pid, runs in picked.items() for r in runs for oid in seqs[pid][r * size:(r + 1) * size]]
    text: dict[int, str] = {}
    if run_ids:
        cur = conn.cursor()
        cur.row_factory = None  # plain tuples
        text = dict(cur.execute(f"SELECT id, substr(body, 1, ?) FROM observations WHERE id IN ({marks(len(run_ids))})",
                                [PASSAGE_CHARS, *run_ids]).fetchall())
    for pid, _project_id, _session_id, body in rows:
        runs = picked.get(pid)
        if runs is not None:
            seq = seqs.get(pid, [])
            n += (len(seq) + size - 1) // size
            for r in runs:
                add(pid, "\n".join(text.get(oid) or "" for oid in seq[r * size:(r + 1) * size]))
        else:
            lines = [ln for ln in strip_frontmatter(body or "").splitlines() if ln.strip()]
            for i in range(0, min(len(lines), size * PASSAGE_WINDOWS), size):
                n += 1
                add(pid, "\n".join(lines[i:i + size])[:PASSAGE_CHARS])
    if not passages:
        return []
    avg = max(1.0, sum(length for _, _, length in passages) / len(passages))
    df = Counter(t for _, tf, _ in passages for t in tf)
    idf = {t: max(1e-6, math.log((n - d + 0.5) / (d + 0.5))) for t, d in df.items()}
    best: dict[int, float] = {}
    for pid, tf, length in passages:
        norm = BM25_K1 * (1 - BM25_B + BM25_B * length / avg)
        sc = sum(idf[t] * f * (BM25_K1 + 1) / (f + norm) for t, f in tf.items())
        if sc > best.get(pid, 0.0):
            best[pid] = sc
    return sorted(best.items(), key=lambda kv: (-round(kv[1], 9), kv[0]))


def _session_ids(conn, pages: list[tuple[int, str, str]]) -> dict[int, list[int]]:
    """Each session page's first ``PASSAGE_SCAN`` observation ids, ascending (page id -> ids).

    One statement for all the pages (a compound SELECT of one covering-index range each, its
    ids joined in SQLite: one row a page instead of one an observation).
    """
    if not pages:
        return {}
    sql = " UNION ALL ".join(["SELECT ?, (SELECT group_concat(id) FROM (SELECT id FROM observations"
                              " WHERE project_id = ? AND session_id = ? ORDER BY id LIMIT ?))"] * len(pages))
    cur = conn.cursor()
    cur.row_factory = None  # plain tuples
    out: dict[int, list[int]] = {}
    for pid, ids in cur.execute(sql, [v for pid, pj, sid in pages for v in (pid, pj, sid, PASSAGE_SCAN)]):
        out[pid] = sorted(map(int, ids.split(","))) if ids else []  # ascending, made certain
    return out


@functools.lru_cache(maxsize=RUN_MEMO)
def _analysed(text: str) -> tuple[str, ...]:
    """``text``'s tokens as the page text index analyses it (``index_form``, ``textindex.analyzer``)."""
    return tuple(_analyzer().analyze(index_form(text)))


def _analyzer():
    """The page text index's analyzer (built once per process)."""
    if not _ANALYZER:
        _ANALYZER.append(textindex_analyzer())
    return _ANALYZER[0]
