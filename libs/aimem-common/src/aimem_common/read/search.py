"""``memory_query``: hybrid retrieval over the compiled wiki (DESIGN.md "Read side").

Pipeline, all inside one read snapshot:

0. **exact** — identifier-like words of the question (``text.identifier_terms``: error
   codes, function names, versions) held by at most ``EXACT_MAX_DF`` live pages in scope;
   its share is added after the authority factor, so such a page is never outvoted.
1. **fts** — bm25 over the live pages' title and body (title weighted ×4) with the OR of
   ``text.query_terms``: the page text index (``read.textindex``, tantivy, top-k pruning)
   when complete, else FTS5's ``pages_fts`` (each term quoted: no operator can be injected).
2. **entity** — frontmatter ``entities`` whose normalised name equals a 1–4-word n-gram of
   the question; a page scores Σ idf, idf = ln(1 + N / df) over live pages in scope.
   **trigram** — the unspaced-script words of the question (Chinese, Japanese, Korean,
   Thai, ...) matched as trigrams in ``pages_tri`` (bm25, title ×4): a word inside a
   sentence is found though unicode61 makes one token of the whole run. A 1–2 character
   word is matched by every trigram starting with it (``_short_word_stream``), and the
   question's Latin/digit terms as substrings (``TrigramTerms``: a Latin word glued to CJK
   text, ``…のKubernetesクラスタ…``; a Latin-only question adds only pages fts missed).
   ``pages_tri`` holds only pages with such characters: idle in an English vault.
   **turns** — bm25 over the captured observations (``observations_fts``) of the scope,
   folded onto their session's live page (its best turn; bm25 margin bonus as fts):
   a session page holds a bounded digest of the session (the prompts past its budget are
   cut), its observations every turn, so a long session is findable by any part of it.
   A question's unspaced-script words also match turns in ``observations_tri`` (trigrams, as
   ``pages_tri``; it holds only observations with such characters), here and in ``raw_hits``.
3. **vector** — optional: cosine between a caller-supplied query vector and the page
   chunks (``page_chunk_embeddings``) of the same ``{provider, model, dim}`` and the page's
   current hash (``read.vectors``: exact numpy, HNSW for a large scope); a page scores its
   best chunk, so any part of a long page can find it. Stale rows ignored.
4. **superseded** — only with ``include_superseded``: older versions matching the terms.
5. **links** — one-hop neighbours (either direction) of the top fused hits of 1–4.
6. **passage** — the top fused pages scored again by their best passage: bm25 over runs of a
   few captured turns (a session page: all of its session) or body lines, with statistics
   from those runs (``_passage_stream``), so a session that answers in neighbouring turns
   beats one that names the question's words here and there.

Streams are fused by reciprocal rank fusion, ``Σ w_s / (k + rank_s)`` with ``k`` =
``settings.retrieval.rrf_k`` (60), then multiplied by a bounded authority factor (kind,
tier, pinned, tags; session pages slightly down) and truncated. In a project-scoped search
``raw_hits`` holds raw observations: the best turns of sessions still running (no page
yet: what a session is doing right now is not hidden by pages that share the question's
other words), or, when no page matched, every observation of the scope.

Functions are sync (``ReaderPool.run``). The caller bumps access counts of the returned
hits through ``aimem_common.search.access``.
"""

from __future__ import annotations

import bisect
import json
import math
import re
import sqlite3
import time
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from aimem_common.errors import BadRequestError
from aimem_common.models import Scope
from aimem_common.read import scopes as scopes_mod
from aimem_common.read import visibility
from aimem_common.read.pages import is_expired
from aimem_common.read.vectors import ChunkVectors, Identity
from aimem_common.read.text import (fts_query, identifier_terms, index_form, latin_terms, query_terms, snippet,
                                    strip_frontmatter, terms_held, trigrams, unspaced_runs, words)
from aimem_common.read.textindex import analyzer as textindex_analyzer, query_tokens

if TYPE_CHECKING:
    from aimem_common.auth import Principal

# vector 1.0: a page is ranked by its best chunk (~75-token windows of its lines and captured
# turns, aimem_common.chunking), so a long session page is seen whole. LoCoMo dev with the local
# all-MiniLM-L6-v2 (bench/locomo.py --offline --vectors; 757 questions, no vectors: hit@5 0.956,
# MRR 0.816): 300-character windows at 0.3 / 0.6 / 1.0 / 1.5 / 2.0 / 3.0 gave hit@5 0.959 / 0.959 /
# 0.958 / 0.955 / 0.955 / 0.947 and MRR 0.818 / 0.825 / 0.829 / 0.832 / 0.829 / 0.821; 800-character
# windows peaked lower (1.0: hit@5 0.951, MRR 0.823). 1.0 is the flat top that keeps hit@5. A
# cosine margin bonus like the bm25 streams' moved MRR by +0.005 (within noise, so not kept).
# When no word or entity matched, the vector is the only evidence and gets VECTOR_ALONE_WEIGHT
# (else its own hits would trail their link neighbours).
# turns 1.5: on LoCoMo (bench/locomo.py, session pages of 20-45 turns whose digest keeps the
# first ~5 KiB of prompts) the turns stream takes hit@5 0.927 -> 0.954 and MRR 0.791 -> 0.817
# (1.0-2.0 differ by < 0.005); alone it ranks no better than fts.
STREAM_WEIGHTS = {"exact": 11.0, "fts": 1.0, "trigram": 1.0, "turns": 1.5, "entity": 0.8, "vector": 1.0,
                  "superseded": 0.6, "links": 0.5, "passage": 1.5}
VECTOR_ALONE_WEIGHT = 1.0
# A page's vector score = its best chunk + CHUNK_NEXT_SHARE × its second: on LoCoMo 0.5 gave
# MRR 0.830 against 0.829 for 0 (800-character windows: 0.3 -> 0.819, 0.6 -> 0.820 against 0.823),
# so the best chunk alone decides: a page is as relevant as its most relevant part.
CHUNK_NEXT_SHARE = 0.0
# RRF alone discards how *much* better the bm25 leader is (k=60 makes ranks 1 and 6 differ by
# 8%, less than the authority spread), so the fts stream adds a bounded margin bonus:
# FTS_MARGIN_WEIGHT × (bm25 / best bm25) × the rank-1 RRF share. Close contests stay close.
FTS_MARGIN_WEIGHT = 0.5
MARGIN_STREAMS = frozenset({"fts", "trigram", "turns", "passage"})  # the bm25 streams that add the margin bonus
TITLE_WEIGHT = 4.0  # bm25 column weight of the title against the body (1.0)
SEED_COUNT = 5  # top fused hits whose link neighbours join the links stream
MAX_ENTITY_NGRAM = 4
MAX_ENTITIES = 16  # matched entities used per query (rarest first)
MAX_PAGES_PER_ENTITY = 500
# An entity linked from more pages than this is common: its document frequency is its link count
# (an index range count; links of superseded or deleted pages included) rather than its live pages
# (a page lookup per link: 13-33 ms for an entity of 21,000 pages at 1M, most of the stream).
DF_EXACT_MAX = 256
# A common entity used is first looked up to this many live pages: fewer, and they are its count
# (one page edited hundreds of times keeps the links of every version it superseded).
DF_LIVE_PROBE = 32
MAX_LIMIT = 100
# exact: an identifier of the question (error code, function name, version; see
# text.identifier_terms) held by at most EXACT_MAX_DF live pages in scope marks those pages
# as found with certainty. Its RRF share (weight 11.0) is added *after* the authority factor,
# and 11/(k+1) is above what the other streams of a plain search give a page at rank 1
# together (fts 1.5, turns 2.25 and passage 2.25 with their margin bonus, entity 0.8, vector
# 1.0, links 0.5: 8.3, × the largest authority 1.3 = 10.8), so a page naming the rare identifier is never
# outvoted by pages that merely share the question's other words. A common "identifier" (more pages)
# adds nothing: bm25 already weighs it.
EXACT_MAX_DF = 10
# turns: matching observations ranked per query before they are folded onto session pages
# (a session's page scores its best turn: on LoCoMo adding 0.1-0.3 of the other turns' bm25
# made hit@5 0.954 -> 0.935-0.948, a long session then wins by length).
TURN_CANDIDATES = 240
# Observations the question may match in scope before only its rarer terms are used (bounds the
# bm25 work: at 100k pages with 20 turns per session page the full OR query doubled a search's CPU;
# LoCoMo, ~600 turns a project, is unchanged by the cap: hit@5 0.956, MRR 0.816).
TURN_MATCH_CAP = 500
TURN_TITLE_WEIGHT = 4.0  # bm25 column weight of an observation's title (its first words) against its body
# raw_hits beside page hits: the newest RUNNING_SCAN observations matching the question (and
# as many holding its identifiers) are kept to the turns of running sessions their page does not
# hold yet, at most RUNNING_TURNS_PER_SESSION of one session (a busy session would fill the list
# with near-duplicates of its one matching tool output). A running session's turns are among the
# newest rows, so reading the newest matches (FTS5 walks its doclists from the end: 1.8 ms p50
# for 400 of 500k observations, where bm25 for those 400 rows alone took 38 ms) finds them
# without ranking every match of a large vault.
RUNNING_SCAN = 400
RUNNING_SCORED = 60  # running turns scored by the question terms they hold (50–100 µs each on a 2-core VM)
RUNNING_TURNS_PER_SESSION = 3
# passage: the best PASSAGE_PAGES fused pages are scored again by their best passage (bm25
# over runs of PASSAGE_SIZE captured turns or body lines, the statistics taken over those runs):
# a page-level bm25 cannot tell a session that answers in neighbouring turns from one that
# names the question's words here and there (passage-level evidence, "MaxP"). A session page's
# runs come from its captured turns, all of the session where the page holds a bounded
# digest. LoCoMo dev (bench/locomo.py --offline, 757 questions; before: hit@5 0.956, MRR
# 0.819): runs of 3 / 4 / 6 turns over the top 10 gave MRR 0.830-0.835 at weight 1.0-1.5
# (top 15 / 20: within 0.003), 6 at 1.5 kept hit@5 0.954; without its margin bonus 0.822.
PASSAGE_PAGES = 10
PASSAGE_SIZE = 6  # turns (session pages) or non-empty lines (any page) in one passage
PASSAGE_ANCHORS = 12  # matching turns of one session whose runs are read (its best first)
PASSAGE_SCAN = 10_000  # observation ids of one session cut into runs (a covering-index scan)
PASSAGE_CHARS = 2000  # characters of one turn or one run of lines read (bounds the tokenising)
PASSAGE_WINDOWS = 50  # runs of lines read per page
BM25_K1, BM25_B = 1.2, 0.75  # FTS5's and tantivy's bm25 constants
# A 1–2 character unspaced word is matched by the trigrams starting with it (``pages_tri_inst``,
# one row per occurrence, ~1 µs each): at most SHORT_SCAN_ROWS occurrences are read per word
# (~100 ms), a bound only a character in most of a 100k-page CJK vault reaches.
SHORT_SCAN_ROWS = 100_000

# Authority multiplier (bounded to [AUTHORITY_MIN, AUTHORITY_MAX]): maintained rules,
# decisions, procedures and gotchas win close contests; episodic/lint evidence stays findable.
KIND_WEIGHT = {
    "rule": 1.12, "decision": 1.10, "procedure": 1.08, "gotcha": 1.08, "concept": 1.04,
    "slot": 1.04, "prompt": 1.0, "note": 1.0, "session": 0.92, "lint": 0.85, "pending": 0.85,
}
TIER_WEIGHT = {"semantic": 1.0, "procedural": 1.0, "episodic": 0.98, "working": 0.95}
PINNED_WEIGHT = 1.06
POSITIVE_TAGS = frozenset({"canonical", "important", "verified", "authoritative", "policy", "core"})
NEGATIVE_TAGS = frozenset(
    {"deprecated", "obsolete", "outdated", "historical", "draft", "wip", "test", "experimental", "stale"}
)
POSITIVE_TAG_WEIGHT, NEGATIVE_TAG_WEIGHT = 1.05, 0.88
SUPERSEDED_WEIGHT = 0.85
AUTHORITY_MIN, AUTHORITY_MAX = 0.70, 1.30


@dataclass(slots=True)
class QueryOptions:
    """Knobs of one ``memory_query`` call (units in names; defaults = DESIGN.md).

    ``limit``: hits returned (1–100). ``rrf_k``: RRF constant. ``snippet_words``: snippet
    length in words. ``raw_limit``: max ``raw_hits``. ``candidates``: per-stream depth.
    ``rerank_docs``: > 0 adds ``result["rerank"]`` for that many top hits (the reranker's input).
    """

    limit: int = 10
    explain: bool = False
    include_expired: bool = False
    include_superseded: bool = False
    raw_fallback: bool = True
    rrf_k: int = 60
    snippet_words: int = 24
    raw_limit: int = 10
    candidates: int = 60
    rerank_docs: int = 0


@dataclass(frozen=True, slots=True)
class QueryVector:
    """A query embedding plus the identity it was made with (invariant 8).

    ``vector``: ``dim`` floats. Only ``page_embeddings`` rows with the same
    ``provider``/``model``/``dim`` are compared.
    """

    vector: Sequence[float]
    provider: str
    model: str
    dim: int


@dataclass(slots=True)
class _Cand:
    page_id: int
    streams: dict[str, dict[str, Any]] = field(default_factory=dict)
    rrf: float = 0.0
    certain: float = 0.0  # the exact stream's share, added after the authority factor


def resolve_search_scopes(
    conn: sqlite3.Connection,
    *,
    workspace: str,
    project: str | None = None,
    scopes: Sequence[str] = (),
    global_: bool = False,
    reader: "Principal | None" = None,
) -> list[Scope] | None:
    """Turn the ``memory_query`` scope arguments into ``list[Scope]`` (``None`` = every project).

    ``project`` and ``scopes`` entries (``"project"`` or ``"workspace/project"``) are unioned;
    ``global_=True`` wins and returns ``None``. Fails closed: any unknown name raises. With
    ``reader``, each name resolves for that reader (``visibility.resolve_readable``): for a
    non-root reader a project it may not read is the same 404 as an unknown one.

    Raises:
        BadRequestError: no project, no scopes and not global (``scope_required``).
        NotFoundError: an unknown (or, with ``reader``, unreadable) workspace or project.
    """
    if global_:
        return None
    refs = ([project] if project else []) + [s for s in scopes if s]
    if not refs:
        raise BadRequestError("give project, scopes or global=true", code="scope_required")
    out: dict[str, Scope] = {}
    for ref in refs:
        if reader is None:
            sc = scopes_mod.resolve_ref(conn, ref, default_workspace=workspace)
        else:
            sc = visibility.resolve_readable(conn, reader, *scopes_mod.split_ref(ref, default_workspace=workspace))
        out.setdefault(sc.project_id, sc)
    return list(out.values())


def _scope_sql(scopes: list[Scope] | None, col: str) -> tuple[str, list[Any]]:
    if scopes is None:
        return "", []
    return f" AND {col} IN ({','.join('?' * len(scopes))})", [s.project_id for s in scopes]


def _scoped_match(q: str, scopes) -> str:
    """``pages_fts`` expression for ``q`` restricted to ``scopes`` inside FTS5 (its project_id column)."""
    if scopes is None:
        return "{title body} : (" + q + ")"
    projects = fts_query([s.project_id for s in scopes])
    return f"project_id : ({projects}) AND {{title body}} : ({q})"


def _fts_stream(conn, q: str, scopes, opts: QueryOptions, table: str = "pages_fts",
                exclude: Collection[int] = ()) -> list[tuple[int, float]]:
    """Pages matching ``q`` (an ``fts_query``) by bm25 (title ×``TITLE_WEIGHT``), best first.

    ``pages_fts`` filters the project inside FTS5, so the index alone ranks the scope's
    matches and only the best ``2 × candidates`` rowids are joined to ``pages`` (expiry);
    measured at 100k pages this is ~40 % less CPU than joining every match before the sort
    (bench/query_latency.py). ``pages_tri`` has no project column: its (few) matches are
    joined and filtered by project before the sort; ``exclude`` (page ids) are left out there.
    """
    expiry = "" if opts.include_expired else " AND (p.expires_at IS NULL OR julianday(p.expires_at) > julianday('now'))"
    if table == "pages_fts":
        rows = conn.execute(
            f"SELECT p.id, f.s FROM (SELECT rowid, bm25(pages_fts, {TITLE_WEIGHT}, 1.0, 0.0) AS s FROM pages_fts"
            f" WHERE pages_fts MATCH ? ORDER BY s LIMIT ?) f JOIN pages p ON p.id = f.rowid WHERE 1 = 1{expiry}"
            " ORDER BY f.s, p.id",
            [_scoped_match(q, scopes), opts.candidates * 2],
        ).fetchall()[: opts.candidates]
    else:
        where, args = _scope_sql(scopes, "+p.project_id")  # drive the join from the FTS match
        if exclude:
            where += f" AND p.id NOT IN ({','.join('?' * len(exclude))})"
            args += list(exclude)
        rows = conn.execute(
            f"SELECT p.id, bm25({table}, {TITLE_WEIGHT}, 1.0) AS s FROM {table} JOIN pages p ON p.id = {table}.rowid"
            f" WHERE {table} MATCH ?{where}{expiry} ORDER BY s, p.id LIMIT ?",
            [q, *args, opts.candidates],
        ).fetchall()
    return [(r[0], -float(r[1])) for r in rows]  # bm25 is "lower is better": report it positive


def _page_text_stream(conn, q: str, terms: list[str], scopes, opts: QueryOptions) -> list[tuple[int, float]]:
    """The fts stream: the page text index (``read.textindex``) when the connection's pool has
    a complete one, else FTS5 (``_fts_stream``). Same shape: ``[(page_id, bm25)]`` best first.

    The index ranks with top-k pruning (its cost follows the top k, FTS5's the matches); its
    best ``2 × candidates`` are checked against this read snapshot (live, not expired), since
    the index may be one writer commit ahead of or behind it.
    """
    index = getattr(conn, "text_index", None)
    found = None
    if index is not None:
        projects = None if scopes is None else [s.project_id for s in scopes]
        found = index.search(terms, projects, opts.candidates * 2)
    if found is None:
        return _fts_stream(conn, q, scopes, opts)
    if not found:
        return []
    expiry = "" if opts.include_expired else " AND (expires_at IS NULL OR julianday(expires_at) > julianday('now'))"
    live = {r[0] for r in conn.execute(
        f"SELECT id FROM pages INDEXED BY pages_live WHERE id IN ({','.join('?' * len(found))}) AND is_latest = 1{expiry}",
        [pid for pid, _ in found])}
    # Equal scores in page id order, as the FTS5 path gives them: the index orders ties by
    # its own document order, which differs between an index built page by page and one
    # rebuilt in bulk (after a restore), and the fused ranking must not depend on that.
    ranked = sorted(((pid, score) for pid, score in found if pid in live), key=lambda kv: (-round(kv[1], 5), kv[0]))
    return ranked[: opts.candidates]


def _turns_stream(conn, terms: list[str], scopes, opts: QueryOptions,
                  turn_ids: dict[int, list[int]] | None = None, *,
                  tri: TrigramTerms | None = None) -> list[tuple[int, float]]:
    """Live session pages whose observations match the question's ``terms``, best first.

    The ``TURN_CANDIDATES`` best observations (bm25, title ×``TURN_TITLE_WEIGHT``; the project
    filter runs inside FTS5) are grouped by session; a page scores its best turn. ``turn_ids``,
    when given, receives each ranked page's matching observation ids, best first (the passage
    stage's anchors). bm25 is computed for every
    matching observation, and a vault keeps many more observations than pages, so when the
    question's terms match more than ``TURN_MATCH_CAP`` observations in scope only the terms
    that each match at most that many are used (none: the stream stays idle). ``tri``: the
    question's ``trigram_terms``; its unspaced words also match turns through
    ``observations_tri`` (``_fold_tri_turns``).
    """
    def scoped(q: str) -> str:
        return "{title body} : (" + q + ")" if scopes is None else _scoped_match(q, scopes)

    # FTS5 ranks alone; only the best rowids are joined (half the CPU of joining every match).
    sql = ("SELECT o.project_id, o.session_id, f.s, o.id FROM (SELECT rowid, bm25(observations_fts,"
           f" {TURN_TITLE_WEIGHT}, 1.0, 0.0) AS s"
           " FROM observations_fts WHERE observations_fts MATCH ? ORDER BY s LIMIT ?) f"
           " JOIN observations o ON o.id = f.rowid ORDER BY f.s")

    def matches(q: str) -> int:  # capped: stops counting past TURN_MATCH_CAP
        return conn.execute("SELECT count(*) FROM (SELECT rowid FROM observations_fts WHERE observations_fts MATCH ?"
                            " LIMIT ?)", (scoped(q), TURN_MATCH_CAP + 1)).fetchone()[0]

    q = fts_query(terms)
    if q is None:
        return []
    if matches(q) > TURN_MATCH_CAP:
        q = fts_query([t for t in terms if matches(fts_query([t]) or '""') <= TURN_MATCH_CAP])
        if q is None:
            return []
    turns: dict[tuple[str, str], float] = {}
    matched: dict[tuple[str, str], list[int]] = {}
    for project_id, session_id, s, oid in conn.execute(sql, [scoped(q), TURN_CANDIDATES]).fetchall():
        turns.setdefault((project_id, session_id), -float(s))  # rows come best first
        matched.setdefault((project_id, session_id), []).append(oid)
    if tri is not None:
        _fold_tri_turns(conn, tri, scopes, turns, matched)
    if not turns:
        return []
    sids = sorted({sid for _pj, sid in turns})
    pages = conn.execute(
        f"SELECT id, project_id, session_id FROM pages WHERE session_id IN ({','.join('?' * len(sids))})"
        " AND is_latest = 1", sids,
    ).fetchall()
    ranked = []
    for pid, project_id, session_id in pages:
        best = turns.get((project_id, session_id))
        if best is not None:
            ranked.append((pid, best))
            if turn_ids is not None:
                turn_ids[pid] = matched[(project_id, session_id)]
    ranked.sort(key=lambda kv: (-kv[1], kv[0]))
    return ranked[: opts.candidates]


def _passage_stream(conn, cands: dict[int, _Cand], terms: list[str],
                    turn_ids: dict[int, list[int]]) -> list[tuple[int, float]]:
    """The best ``PASSAGE_PAGES`` fused candidates by their best passage's bm25, best first.

    A session page's passages are its session's observations cut in runs of
    ``PASSAGE_SIZE`` from the session's start (its first ``PASSAGE_SCAN``); the runs holding
    one of its matching turns (``turn_ids`` from the turns stream, the first
    ``PASSAGE_ANCHORS``) are read. Any other page, or a session page none of whose turns
    matched, is cut in runs of ``PASSAGE_SIZE`` non-empty body lines (frontmatter dropped, at
    most ``PASSAGE_WINDOWS``). Text is analysed as the page text index analyses it
    (``textindex.analyzer``: stems, folded case). bm25 (``BM25_K1``, ``BM25_B``) takes its
    statistics from these candidates' runs alone (FTS5's idf, floored at 1e-6; a session's
    unread runs count as runs without the terms), so a word in most of them (a name said in
    every session) weighs nothing. Pages with no run holding a term are left out.
    """
    top = sorted(cands.values(), key=lambda c: (-(c.rrf + c.certain), c.page_id))[:PASSAGE_PAGES]
    if not top or not terms:
        return []
    an = _analyzer()
    want = set(query_tokens(terms, an))
    if not want:
        return []
    ids = [c.page_id for c in top]
    rows = conn.execute(f"SELECT id, project_id, session_id, body FROM pages WHERE id IN ({','.join('?' * len(ids))})"
                        " AND is_latest = 1", ids).fetchall()
    passages: list[tuple[int, dict[str, int], int]] = []  # (page id, counts of the question's tokens, length)
    n = 0  # runs, read or not

    def add(pid: int, text: str) -> None:
        toks = Counter(an.analyze(index_form(text)))
        passages.append((pid, {t: toks[t] for t in want if t in toks}, toks.total()))

    size = PASSAGE_SIZE
    for pid, project_id, session_id, body in rows:
        anchors = turn_ids.get(pid) if session_id else None
        if anchors:
            seq = [r[0] for r in conn.execute("SELECT id FROM observations WHERE project_id = ? AND session_id = ?"
                                              " ORDER BY id LIMIT ?", (project_id, session_id, PASSAGE_SCAN))]
            n += (len(seq) + size - 1) // size
            runs = sorted({i // size for oid in anchors[:PASSAGE_ANCHORS]
                           if (i := bisect.bisect_left(seq, oid)) < len(seq) and seq[i] == oid})
            run_ids = [oid for r in runs for oid in seq[r * size:(r + 1) * size]]
            text = dict(conn.execute(f"SELECT id, substr(body, 1, ?) FROM observations WHERE id IN"
                                     f" ({','.join('?' * len(run_ids))})", [PASSAGE_CHARS, *run_ids]).fetchall())
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


_ANALYZER: list[Any] = []


def _analyzer():
    """The page text index's analyzer (built once per process)."""
    if not _ANALYZER:
        _ANALYZER.append(textindex_analyzer())
    return _ANALYZER[0]


@dataclass(frozen=True, slots=True)
class TrigramTerms:
    """What the trigram stream searches for one question (``trigram_terms``).

    ``match``: the ``pages_tri`` MATCH expression (``None`` = nothing to match): the trigrams of
    the unspaced runs of ≥ 3 characters, OR'ed, and the Latin/digit terms (``text.latin_terms``)
    as phrases, i.e. substrings. ``short``: the 1–2 character unspaced words, matched by the
    trigrams starting with them (``_short_word_stream``). ``latin_only``: the question has no
    unspaced word: the stream then only adds pages the fts stream did not find (a Latin word
    glued to CJK text), so a CJK page does not count its spaced Latin words twice.
    """

    match: str | None
    short: list[str]
    latin_only: bool


def trigram_terms(query: str) -> TrigramTerms:
    """Return the trigram stream's ``TrigramTerms`` for ``query`` (pure: reads no index).

    ``缓存策略`` → match ``"缓存策" OR "存策略"``; ``缓存`` → short ``["缓存"]``;
    ``我们使用Redis缓存`` → match ``"我们使" OR … OR "redis"``; ``lower database load`` →
    match ``"lower" OR "database" OR "load"`` (latin_only). An English-only vault has no
    page in ``pages_tri``, so an English question's match costs one empty lookup per term.
    """
    runs = unspaced_runs(query)
    grams, short = trigrams(runs)
    latin = latin_terms(query)
    return TrigramTerms(fts_query(list(dict.fromkeys(grams + latin))), list(dict.fromkeys(short)), not runs)


def _short_word_stream(conn, word: str, scopes, opts: QueryOptions) -> list[tuple[int, float]]:
    """Live pages of ``scopes`` holding the 1–2 character ``word``: ``[(page_id, score)]``, best first.

    Every occurrence of the word has an indexed trigram starting with it (``pages_tri`` pads
    each column with ``schema.TRI_PAD``), so a range scan of ``pages_tri_inst`` over those
    trigrams yields every page holding it, whatever other projects hold; at most
    ``SHORT_SCAN_ROWS`` occurrences are read. Score: bm25's term part without length
    normalisation, ``idf × tf × (k1 + 1) / (tf + k1)``, tf counting a title occurrence
    ``TITLE_WEIGHT`` times, idf over ``pages_tri``'s pages (N) and the scope's matches (df).
    """
    expiry = "" if opts.include_expired else " AND (p.expires_at IS NULL OR julianday(p.expires_at) > julianday('now'))"
    where, args = _scope_sql(scopes, "p.project_id")
    rows = conn.execute(
        f"SELECT p.id, t.tf FROM (SELECT doc, sum(CASE WHEN col = 'title' THEN {TITLE_WEIGHT} ELSE 1.0 END) AS tf"
        " FROM (SELECT doc, col FROM pages_tri_inst WHERE term >= ? AND term < ? LIMIT ?) GROUP BY doc) t"
        f" JOIN pages p ON p.id = t.doc WHERE p.is_latest = 1{where}{expiry}",
        [word, word + "\U0010ffff", SHORT_SCAN_ROWS, *args],
    ).fetchall()
    if not rows:
        return []
    block = conn.execute("SELECT block FROM pages_tri_data WHERE id = 1").fetchone()
    n = max(len(rows), (_varint(block[0]) if block and block[0] else None) or len(rows))
    idf = math.log(1 + (n - len(rows) + 0.5) / (len(rows) + 0.5))
    ranked = [(pid, idf * tf * (BM25_K1 + 1) / (tf + BM25_K1)) for pid, tf in rows]
    ranked.sort(key=lambda kv: (-round(kv[1], 9), kv[0]))
    return ranked


def _trigram_stream(conn, tt: TrigramTerms, scopes, opts: QueryOptions,
                    exclude: Collection[int] = ()) -> list[tuple[int, float]]:
    """The trigram stream: ``pages_tri`` bm25 for ``tt.match`` plus each short word's score
    (``_short_word_stream``), summed per page; ``[(page_id, score)]`` best first, len ≤
    ``candidates``. ``exclude``: page ids left out (the fts stream's, for a ``latin_only`` question).
    """
    scores: dict[int, float] = {}
    if tt.match:
        for pid, sc in _fts_stream(conn, tt.match, scopes, opts, table="pages_tri", exclude=exclude):
            scores[pid] = sc
    for word in tt.short:
        for pid, sc in _short_word_stream(conn, word, scopes, opts):
            if pid not in exclude:
                scores[pid] = scores.get(pid, 0.0) + sc
    ranked = sorted(scores.items(), key=lambda kv: (-round(kv[1], 9), kv[0]))
    return ranked[: opts.candidates]


_DOTTED_NUMBER = re.compile(r"\d+(?:\.\d+){2,}")
DOTTED_SCAN = 200  # phrase matches of a dotted number read to find the pages writing it as such


def _exact_stream(conn, idents: list[str], scopes, opts: QueryOptions) -> list[tuple[int, float]]:
    """Pages holding a rare identifier of the question: score Σ 1/df over the identifiers held.

    A dotted number (``2.3.1``) is a phrase of its parts to FTS5, which ``2, 3, 1``,
    ``192.2.3.1`` and ``2-3-1`` match too: its matches (and those of ``v2.3.1``) are kept to the
    pages whose text writes it with dots and no longer number around it (``_dotted_pages``).
    """
    expiry = "" if opts.include_expired else " AND (p.expires_at IS NULL OR julianday(p.expires_at) > julianday('now'))"
    where, args = _scope_sql(scopes, "+p.project_id")
    score: dict[int, float] = {}
    for ident in idents:
        dotted = _DOTTED_NUMBER.fullmatch(ident) is not None
        expr = fts_query([ident, "v" + ident] if dotted else [ident]) or '""'
        rows = conn.execute(
            "SELECT p.id FROM pages_fts JOIN pages p ON p.id = pages_fts.rowid"
            f" WHERE pages_fts MATCH ?{where}{expiry} LIMIT ?",
            [_scoped_match(expr, scopes), *args, DOTTED_SCAN if dotted else EXACT_MAX_DF + 1],
        ).fetchall()
        ids = _dotted_pages(conn, ident, [pid for (pid,) in rows]) if dotted else [pid for (pid,) in rows]
        if len(ids) > EXACT_MAX_DF:
            continue
        for pid in ids:
            score[pid] = score.get(pid, 0.0) + 1.0 / len(ids)
    return sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))


def _dotted_pages(conn, number: str, ids: list[int]) -> list[int]:
    """Of ``ids``, the pages whose title or body writes ``number`` (``2.3.1``, or ``v2.3.1``)
    with no digit, letter or dotted part joined to it."""
    if not ids:
        return []
    pattern = re.compile(r"(?<![\w.])v?" + re.escape(number) + r"(?![\w]|\.\d)", re.I)
    rows = conn.execute(f"SELECT id, title, body FROM pages WHERE id IN ({','.join('?' * len(ids))})", ids)
    return [pid for pid, title, body in rows if pattern.search(title or "") or pattern.search(body or "")]


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
        where, args = _scope_sql(scopes, "project_id")
        return conn.execute("SELECT count(*) FROM pages WHERE is_latest = 1" + where, args).fetchone()[0]
    row = conn.execute("SELECT block FROM pages_fts_data WHERE id = 1").fetchone()
    n = _varint(row[0]) if row and row[0] else None
    if n is None:
        return conn.execute("SELECT count(*) FROM pages WHERE is_latest = 1").fetchone()[0]
    return n


def _varint(buf: bytes) -> int | None:
    """Decode the SQLite varint at the start of ``buf`` (big-endian 7-bit groups; 9th byte whole)."""
    n = 0
    for i, b in enumerate(buf[:9]):
        if i == 8:
            return (n << 8) | b
        n = (n << 7) | (b & 0x7F)
        if not b & 0x80:
            return n
    return None


def _entity_stream(conn, text: str, scopes, opts: QueryOptions) -> tuple[list[tuple[int, float]], dict[int, list[str]]]:
    toks = words(text)
    grams: set[str] = set()
    for n in range(1, MAX_ENTITY_NGRAM + 1):
        for i in range(len(toks) - n + 1):
            g = " ".join(toks[i : i + n])
            grams.add(g)
            if n == 1 and len(g) > 3 and g.endswith("s"):
                grams.add(g[:-1])  # "migrations" finds the entity "migration"
        if len(grams) > 900:
            break
    if not grams:
        return [], {}
    grams_l = sorted(grams)[:900]
    where, args = _scope_sql(scopes, "e.project_id")
    ents = conn.execute(
        f"SELECT e.id, e.display_name FROM entities e WHERE e.name IN ({','.join('?' * len(grams_l))}){where}",
        [*grams_l, *args],
    ).fetchall()
    if not ents:
        return [], {}
    names = {e[0]: e[1] for e in ents}
    df = _entity_df(conn, list(names))
    if not df:
        return [], {}
    total = live_page_count(conn, scopes) or 1
    # The rarest entities carry the signal; a very common one adds little idf but many rows.
    chosen = sorted(df, key=lambda e: (df[e], e))[:MAX_ENTITIES]
    # Each entity's newest MAX_PAGES_PER_ENTITY live pages, summed by page inside SQLite (up to
    # 16 × 500 rows: a Python loop over them was most of the stream's CPU at 1M pages). The
    # sums are rounded for the order, so equal sets of entities tie on page id whatever order
    # SQLite added them in.
    one = ("SELECT page_id, ? AS eid, ? AS idf FROM (SELECT l.page_id FROM entity_page_links l"
           " JOIN pages p INDEXED BY pages_live ON p.id = l.page_id AND p.is_latest = 1"
           " WHERE l.entity_id = ? ORDER BY l.page_id DESC LIMIT ?)")
    union = " UNION ALL ".join([one] * len(chosen))
    uargs = [x for eid in chosen for x in (eid, math.log(1 + total / df[eid]), eid, MAX_PAGES_PER_ENTITY)]
    ranked = [(pid, float(sc)) for pid, sc in conn.execute(
        f"SELECT page_id, sum(idf) AS s FROM ({union}) GROUP BY page_id ORDER BY round(s, 9) DESC, page_id LIMIT ?",
        [*uargs, opts.candidates]).fetchall()]
    matched: dict[int, list[str]] = {}
    if opts.explain and ranked:  # which entities each ranked page matched
        top = {pid for pid, _ in ranked}
        for pid, eid, _idf in conn.execute(union, uargs).fetchall():
            if pid in top:
                matched.setdefault(pid, []).append(names[eid])
    return ranked, matched


def _entity_df(conn, ids: list[int]) -> dict[int, int]:
    """Document frequency of the rarest ``MAX_ENTITIES`` entities of ``ids`` that a live page
    links: ``{entity id: pages}``, for choosing them and weighing them (idf).

    An entity of at most ``DF_EXACT_MAX`` links (index range counts, stopped past it) gets its
    live, latest pages counted exactly (each link looked up in ``pages_live``, a covering index
    of the live ids: see schema.MIGRATION_10). A commoner one is ranked by its links (superseded
    and deleted versions included), and those the rare ones leave room for, rarest first, are
    looked up to ``DF_LIVE_PROBE`` live pages: an entity of a few pages edited hundreds of times
    keeps its exact count; above that its links are the count. Counting every common
    entity's live pages (a page lookup per link) made this stream 87 / 200 ms (p50 / p95) of a
    global search at 1M pages whose words were all common.
    """
    links = dict(conn.execute(
        "SELECT e.id, (SELECT count(*) FROM (SELECT 1 FROM entity_page_links l WHERE l.entity_id = e.id LIMIT ?))"
        f" FROM entities e WHERE e.id IN ({','.join('?' * len(ids))})", [DF_EXACT_MAX + 1, *ids]).fetchall())
    rare = [e for e, n in links.items() if 0 < n <= DF_EXACT_MAX]
    df: dict[int, int] = {}
    if rare:
        df.update(conn.execute(
            "SELECT l.entity_id, count(*) FROM entity_page_links l JOIN pages p INDEXED BY pages_live"
            f" ON p.id = l.page_id AND p.is_latest = 1 WHERE l.entity_id IN ({','.join('?' * len(rare))})"
            " GROUP BY l.entity_id", rare).fetchall())
    common = [e for e, n in links.items() if n > DF_EXACT_MAX]
    if len(df) < MAX_ENTITIES and common:
        full = {e: conn.execute("SELECT count(*) FROM entity_page_links WHERE entity_id = ?", (e,)).fetchone()[0]
                for e in common}
        for e in sorted(common, key=lambda e: (full[e], e)):
            if len(df) >= MAX_ENTITIES:
                break
            live = conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM entity_page_links l JOIN pages p INDEXED BY pages_live"
                " ON p.id = l.page_id AND p.is_latest = 1 WHERE l.entity_id = ? LIMIT ?)",
                (e, DF_LIVE_PROBE + 1)).fetchone()[0]
            if live:
                df[e] = live if live <= DF_LIVE_PROBE else full[e]
    return df


def _vector_stream(conn, qv: QueryVector, scopes, opts: QueryOptions,
                   index: ChunkVectors | None) -> tuple[list[tuple[int, float]], dict[int, list[tuple[int, float]]]]:
    """Pages by their chunks' cosine to the question: best chunk + ``CHUNK_NEXT_SHARE`` × the next.

    Returns ``(ranked, chunks)``: ``ranked`` = ``[(page_id, score)]`` best first, ``chunks`` =
    ``{page_id: [(chunk index, cosine), ...]}`` (explain). Only ``page_chunk_embeddings`` rows
    of the question's identity whose hash is the page's current one count
    (``read.vectors.ChunkVectors``).
    """
    import numpy as np

    q = np.asarray(qv.vector, dtype=np.float32)
    if q.shape != (qv.dim,) or not np.isfinite(q).all():
        raise BadRequestError(f"query vector must have {qv.dim} finite values", code="bad_vector")
    qn = float(np.linalg.norm(q))
    if qn == 0.0:
        return [], {}
    index = index if index is not None else ChunkVectors(ann_min_rows=0)
    near = index.nearest(conn, q / qn, Identity(qv.provider, qv.model, qv.dim),
                         None if scopes is None else [s.project_id for s in scopes], opts.candidates)
    ranked = []
    for pid, cs in near.items():
        ranked.append((pid, cs[0][1] + CHUNK_NEXT_SHARE * (cs[1][1] if len(cs) > 1 else 0.0)))
    ranked.sort(key=lambda kv: (-kv[1], kv[0]))
    return ranked, near


def _superseded_stream(conn, terms: list[str], scopes, opts: QueryOptions) -> list[tuple[int, float]]:
    if not terms:
        return []
    where, args = _scope_sql(scopes, "p.project_id")
    likes = " OR ".join(["lower(p.title || ' ' || p.body) LIKE ?"] * min(len(terms), 8))
    rows = conn.execute(
        "SELECT p.id, lower(p.title), lower(p.body) FROM pages p WHERE p.is_latest = 0"
        f" AND p.retired_reason = 'superseded'{where} AND ({likes}) LIMIT 1000",
        [*args, *(f"%{t}%" for t in terms[:8])],
    ).fetchall()
    scored = []
    for pid, title, body in rows:
        s = sum(2.0 if t in title else 0.0 for t in terms) + sum(1.0 for t in terms if t in body)
        scored.append((pid, s))
    scored.sort(key=lambda kv: (-kv[1], -kv[0]))
    return scored[: opts.candidates]


def _link_stream(conn, seeds: list[int], scopes) -> tuple[list[tuple[int, float]], dict[int, list[dict]]]:
    if not seeds:
        return [], {}
    marks = ",".join("?" * len(seeds))
    # "+" keeps the planner on the links indexes (seed ids) instead of scanning the scope's pages.
    where_a, args_a = _scope_sql(scopes, "+t.project_id")
    rows = conn.execute(
        "SELECT l.from_page_id AS seed, l.to_page_id AS nb, l.link_kind FROM links l"
        f" JOIN pages t ON t.id = l.to_page_id AND t.is_latest = 1 WHERE l.from_page_id IN ({marks}){where_a}"
        " UNION ALL "
        "SELECT l.to_page_id AS seed, l.from_page_id AS nb, l.link_kind FROM links l"
        f" JOIN pages t ON t.id = l.from_page_id AND t.is_latest = 1 WHERE l.to_page_id IN ({marks}){where_a}",
        [*seeds, *args_a, *seeds, *args_a],
    ).fetchall()
    rank_of = {pid: i + 1 for i, pid in enumerate(seeds)}
    score: dict[int, float] = {}
    via: dict[int, list[dict]] = {}
    for seed, nb, kind in rows:
        if nb in rank_of or nb is None:
            continue
        score[nb] = score.get(nb, 0.0) + 1.0 / rank_of[seed]
        via.setdefault(nb, []).append({"via_page_id": seed, "edge": kind})
    return sorted(score.items(), key=lambda kv: (-kv[1], kv[0])), via


def authority(kind: str, tier: str, pinned: bool, tags: Sequence[str], superseded: bool = False) -> float:
    """Return the bounded authority multiplier of a page (``AUTHORITY_MIN``–``AUTHORITY_MAX``)."""
    m = KIND_WEIGHT.get(kind, 1.0) * TIER_WEIGHT.get(tier, 1.0)
    if pinned:
        m *= PINNED_WEIGHT
    low = {str(t).casefold() for t in tags}
    if low & POSITIVE_TAGS:
        m *= POSITIVE_TAG_WEIGHT
    if low & NEGATIVE_TAGS:
        m *= NEGATIVE_TAG_WEIGHT
    if superseded:
        m *= SUPERSEDED_WEIGHT
    return max(AUTHORITY_MIN, min(AUTHORITY_MAX, m))


def _fuse(cands: dict[int, _Cand], name: str, ranked: list[tuple[int, float]], k: int,
          weight: float | None = None) -> None:
    w = STREAM_WEIGHTS[name] if weight is None else weight
    best = ranked[0][1] if ranked and ranked[0][1] > 0 else 0.0
    for rank, (pid, score) in enumerate(ranked, start=1):
        c = cands.setdefault(pid, _Cand(pid))
        contrib = w / (k + rank)
        if name in MARGIN_STREAMS and best > 0:
            contrib += FTS_MARGIN_WEIGHT * w * max(score, 0.0) / best / (k + 1)
        c.streams[name] = {"rank": rank, "score": round(score, 6), "rrf": round(contrib, 8)}
        if name == "exact":
            c.certain += contrib
        else:
            c.rrf += contrib


_META_SQL = """
SELECT p.id, p.path, p.title, p.kind, p.tier, p.tags, p.pinned, p.session_id, p.expires_at,
       p.is_latest, p.updated_at, p.project_id, w.name AS ws, pj.name AS pj
FROM pages p JOIN projects pj ON pj.id = p.project_id JOIN workspaces w ON w.id = p.workspace_id
WHERE p.id IN ({marks})
"""


def _candidate_rows(conn, cands: dict[int, _Cand], limit: int, include_expired: bool,
                    in_scope: set[str] | None = None):
    """Yield ``(candidate, page row)`` for the candidates that can still reach the top ``limit``.

    A candidate's final score is ``rrf × authority + certain`` with authority at most
    ``AUTHORITY_MAX``, so candidates are read best bound first, in chunks, and the reading
    stops once ``limit`` rows that qualify as hits (live, or asked for as superseded; not
    expired unless asked; in one of the ``in_scope`` projects when given) score above the
    next candidate's bound: the hits are the ones
    reading every candidate gives, for ~``2 × limit`` page rows instead of all the streams'
    candidates (~150 random reads of ``pages``). The caller still checks each row.
    """
    def bound(c: _Cand) -> float:
        return c.rrf * AUTHORITY_MAX + c.certain

    order = sorted(cands.values(), key=lambda c: (-bound(c), c.page_id))
    chunk = max(2 * limit, 20)
    scores: list[float] = []  # final scores of the rows that qualified so far
    i = 0
    while i < len(order):
        part = order[i:i + chunk]
        i += chunk
        ids = [c.page_id for c in part]
        meta = {r["id"]: r for r in conn.execute(_META_SQL.format(marks=",".join("?" * len(ids))), ids).fetchall()}
        for c in part:
            r = meta.get(c.page_id)
            if r is None:
                continue
            yield c, r
            superseded = not r["is_latest"]
            if (superseded and "superseded" not in c.streams) or (not include_expired and is_expired(r["expires_at"])):
                continue
            if in_scope is not None and r["project_id"] not in in_scope:
                continue
            auth = authority(r["kind"], r["tier"], bool(r["pinned"]), _json_list(r["tags"]), superseded)
            scores.append(c.rrf * auth + c.certain)
        if i < len(order) and len(scores) >= limit and sorted(scores, reverse=True)[limit - 1] > bound(order[i]):
            return


def memory_query(
    conn: sqlite3.Connection,
    query: str,
    scopes: list[Scope] | None,
    *,
    options: QueryOptions | None = None,
    vector: QueryVector | None = None,
    vectors: ChunkVectors | None = None,
) -> dict[str, Any]:
    """Search the compiled wiki of ``scopes`` (``None`` = every project, ``global=true``).

    Args:
        query: the natural-language question (any text; operators are inert).
        scopes: resolved scopes (``resolve_search_scopes``); ``[]`` returns nothing.
        options: ``QueryOptions`` (limit, explain, include_expired, include_superseded, ...).
        vector: optional query embedding for the vector stream.
        vectors: the process's chunk-vector copy (``ReaderPool.vectors``); None loads the
            scope's rows for this call only (tests, one-off tools).

    Returns ``{"hits": list[Hit], "raw_hits": list[RawHit]}`` plus, with ``explain``,
    ``"streams_active": list[str]``, ``"fts_query": str|None``, ``"trigram_query": str|None``,
    ``"trigram_short": list[str]`` (1–2 character unspaced words, see ``TrigramTerms``)
    and ``"stream_ms": {stage: wall ms}`` (fts, turns, exact, trigram, entity, vector, superseded,
    links, passage, hits = metadata/snippets).

    ``Hit`` = ``{"path", "title", "snippet" (~24 words), "score" (RRF × authority + the exact stream's share, desc),
    "kind", "tier", "workspace", "project", "page_id", "updated_at", "pinned", "tags",
    "session_id"? (session pages), "superseded"? (true for old versions), "expired"?,
    "score_details"? (explain: per-stream rank/score/rrf, matched_entities, graph via,
    rrf, authority, evidence_count)}``; len ≤ ``limit``.

    ``RawHit`` = ``{"observation_id", "session_id", "kind", "agent", "title", "snippet",
    "occurred_at", "workspace", "project", "score"}`` (bm25; beside page hits the question
    terms the turn holds) — project-scoped searches
    only: beside page hits, the matching turns of sessions still running (``running_hits``);
    when no page matched, any matching observation (``raw_search``); len ≤ ``raw_limit``.

    Raises:
        BadRequestError: a malformed query vector.
    """
    opts = options or QueryOptions()
    limit = max(1, min(opts.limit, MAX_LIMIT))
    terms = query_terms(query)
    q = fts_query(terms)
    out: dict[str, Any] = {"hits": [], "raw_hits": []}
    if opts.explain:
        out.update(streams_active=[], fts_query=q)
    if scopes is not None and not scopes:
        return out

    cands: dict[int, _Cand] = {}
    active: list[str] = []
    k = opts.rrf_k
    depth = max(opts.candidates, limit * 3)
    opts_d = replace(opts, candidates=depth)
    lap = _Laps()
    turn_ids: dict[int, list[int]] = {}

    def add(name: str, ranked: list[tuple[int, float]], weight: float | None = None) -> None:
        if ranked:
            active.append(name)
            _fuse(cands, name, ranked, k, weight)
        lap(name)

    fts_ids: list[int] = []
    tt = trigram_terms(query)
    if q:
        fts = _page_text_stream(conn, q, terms, scopes, opts_d)
        fts_ids = [pid for pid, _ in fts]
        add("fts", fts)
        add("turns", _turns_stream(conn, terms, scopes, opts_d, turn_ids, tri=tt))
    idents = identifier_terms(query)
    if idents:
        add("exact", _exact_stream(conn, idents, scopes, opts_d))
    if opts.explain:
        out.update(trigram_query=tt.match, trigram_short=tt.short)
    if tt.match or tt.short:
        add("trigram", _trigram_stream(conn, tt, scopes, opts_d, fts_ids if tt.latin_only else ()))
    ent, matched = _entity_stream(conn, query, scopes, opts_d)
    add("entity", ent)
    chunk_hits: dict[int, list[tuple[int, float]]] = {}
    if vector is not None:
        vec, chunk_hits = _vector_stream(conn, vector, scopes, opts_d, vectors)
        add("vector", vec, None if cands else VECTOR_ALONE_WEIGHT)
    if opts.include_superseded:
        add("superseded", _superseded_stream(conn, terms, scopes, opts_d))
    seeds = [c.page_id for c in sorted(cands.values(), key=lambda c: (-c.rrf - c.certain, c.page_id))[:SEED_COUNT]]
    nbs, via = _link_stream(conn, seeds, scopes)
    add("links", nbs)
    if q and cands:
        add("passage", _passage_stream(conn, cands, terms, turn_ids))

    hits: list[dict[str, Any]] = []
    in_scope = None if scopes is None else {sc.project_id for sc in scopes}
    if cands:
        for c, r in _candidate_rows(conn, cands, limit, opts.include_expired, in_scope):
            pid = c.page_id
            superseded = not r["is_latest"]
            if superseded and "superseded" not in c.streams:
                continue  # entity/link rows may point at retired versions
            expired = is_expired(r["expires_at"])
            if expired and not opts.include_expired:
                continue
            if in_scope is not None and r["project_id"] not in in_scope:
                continue  # whatever stream brought it (a stale entity link of a moved page), never out of scope
            tags = _json_list(r["tags"])
            auth = authority(r["kind"], r["tier"], bool(r["pinned"]), tags, superseded)
            hit: dict[str, Any] = {
                "path": r["path"], "title": r["title"], "snippet": "", "score": c.rrf * auth + c.certain,
                "kind": r["kind"], "tier": r["tier"], "workspace": r["ws"], "project": r["pj"],
                "page_id": pid, "updated_at": r["updated_at"], "pinned": bool(r["pinned"]), "tags": tags,
            }
            if r["session_id"]:
                hit["session_id"] = r["session_id"]
            if superseded:
                hit["superseded"] = True
            if expired:
                hit["expired"] = True
            if opts.explain:
                details: dict[str, Any] = {"streams": c.streams, "rrf": round(c.rrf, 8), "authority": round(auth, 4)}
                if c.certain:
                    details["certain"] = round(c.certain, 8)
                if pid in matched:
                    details["matched_entities"] = matched[pid]
                if pid in chunk_hits and "vector" in c.streams:
                    c.streams["vector"]["chunks"] = [{"chunk": ci, "cosine": round(cs, 6)} for ci, cs in chunk_hits[pid][:3]]
                if "links" in c.streams:
                    details["graph"] = via.get(pid, [])
                hit["score_details"] = details
            hits.append(hit)
        hits.sort(key=lambda h: (-h["score"], h["page_id"]))
        hits = hits[:limit]
        _fill_snippets(conn, hits, terms, opts.snippet_words)
        if opts.rerank_docs > 0:
            out["rerank"] = rerank_input(conn, hits[:opts.rerank_docs], terms,
                                         {pid for pid, c in cands.items() if c.certain})
        for h in hits:
            h["score"] = round(h["score"], 8)
        if opts.explain and hits:
            _fill_explain_extras(conn, hits)
    lap("hits")

    out["hits"] = hits
    if scopes is not None and opts.raw_fallback and q:
        if hits:
            out["raw_hits"] = running_hits(conn, q, idents, terms, scopes, limit=opts.raw_limit,
                                           n_words=opts.snippet_words, tt=tt)
        else:
            out["raw_hits"] = raw_search(conn, q, terms, scopes, limit=opts.raw_limit, n_words=opts.snippet_words,
                                         tt=tt)
        if out["raw_hits"]:
            active.append("raw")
    if opts.explain:
        out["streams_active"] = active
        out["stream_ms"] = lap.ms
    return out


class _Laps:
    """Wall time (ms) spent in each stage of one query, for ``explain`` (``stream_ms``)."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}
        self._t = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.ms[name] = round((now - self._t) * 1000, 3)
        self._t = now


def _json_list(text: str | None) -> list[str]:
    try:
        v = json.loads(text or "[]")
    except ValueError:
        return []
    return [str(x) for x in v] if isinstance(v, list) else []


def _fill_snippets(conn, hits: list[dict[str, Any]], terms: list[str], n_words: int) -> None:
    if not hits:
        return
    ids = [h["page_id"] for h in hits]
    bodies = dict(
        conn.execute(f"SELECT id, body FROM pages WHERE id IN ({','.join('?' * len(ids))})", ids).fetchall()
    )
    for h in hits:
        h["snippet"] = snippet(bodies.get(h["page_id"]) or "", terms, n_words=n_words)


RERANK_WORDS = 120  # words of a page shown to the reranker, around the question's terms


def rerank_input(conn: sqlite3.Connection, hits: list[dict[str, Any]], terms: list[str],
                 certain: set[int]) -> dict[str, Any]:
    """The reranker's input for ``hits``: ``{"texts": {page_id: title + passage}, "certain": [page_id]}``.

    The passage is the ``RERANK_WORDS`` words of the body around the question's terms (a
    cross-encoder reads ~512 tokens at most).
    """
    ids = [h["page_id"] for h in hits]
    if not ids:
        return {"texts": {}, "certain": []}
    bodies = dict(conn.execute(f"SELECT id, body FROM pages WHERE id IN ({','.join('?' * len(ids))})", ids).fetchall())
    texts = {h["page_id"]: f"{h['title']}\n{snippet(bodies.get(h['page_id']) or '', terms, n_words=RERANK_WORDS)}"
             for h in hits}
    return {"texts": texts, "certain": sorted(certain & set(ids))}


def _fill_explain_extras(conn, hits: list[dict[str, Any]]) -> None:
    ids = [h["page_id"] for h in hits]
    marks = ",".join("?" * len(ids))
    ev = dict(conn.execute(
        f"SELECT page_id, count(*) FROM page_evidence WHERE page_id IN ({marks}) GROUP BY page_id", ids
    ).fetchall())
    paths: dict[int, str] = {}
    via_ids = {v["via_page_id"] for h in hits for v in h["score_details"].get("graph", [])}
    if via_ids:
        vm = ",".join("?" * len(via_ids))
        paths = dict(conn.execute(f"SELECT id, path FROM pages WHERE id IN ({vm})", list(via_ids)).fetchall())
    for h in hits:
        d = h["score_details"]
        d["evidence_count"] = int(ev.get(h["page_id"], 0))
        for v in d.get("graph", []):
            v["via_path"] = paths.get(v["via_page_id"])


def raw_search(
    conn: sqlite3.Connection,
    q: str,
    terms: list[str],
    scopes: list[Scope],
    *,
    limit: int = 10,
    n_words: int = 24,
    tt: TrigramTerms | None = None,
) -> list[dict[str, Any]]:
    """Bounded bm25 search over raw ``observations`` of ``scopes`` (the ``raw_hits`` fallback).

    ``q`` is an ``fts_query`` expression; ``tt`` (``trigram_terms`` of the question), when
    given, adds the observations its unspaced words match in ``observations_tri``
    (``_raw_tri_rows``; an observation found by both keeps its higher score). Returns
    ``list[RawHit]`` best first, len ≤ ``limit``.
    """
    limit = max(1, min(limit, 100))
    rows = conn.execute(
        f"SELECT {_RAW_COLS}, bm25(observations_fts, 1.0, 1.0, 0.0) AS s FROM observations_fts"
        " JOIN observations o ON o.id = observations_fts.rowid WHERE observations_fts MATCH ? ORDER BY s LIMIT ?",
        [_scoped_match(q, scopes), limit],
    ).fetchall()
    scored = [(r, -float(r["s"])) for r in rows]
    if tt is not None:
        scored = _merge_raw(scored, _raw_tri_rows(conn, tt, scopes, limit), limit)
    names = {s.project_id: s for s in scopes}
    return [_raw_hit(r, names[r["project_id"]], score, terms, n_words) for r, score in scored]


def running_hits(
    conn: sqlite3.Connection,
    q: str,
    idents: list[str],
    terms: list[str],
    scopes: list[Scope],
    *,
    limit: int = 10,
    n_words: int = 24,
    tt: TrigramTerms | None = None,
) -> list[dict[str, Any]]:
    """The ``raw_hits`` shown beside page hits: turns of sessions still running that match the
    question and that their session's page does not hold yet.

    A session's page is written when it ends, so until then its turns reach a page search
    only here (and a session reopened after its end has new turns its page lacks): an
    identifier or a finding of the running session stays visible even when pages sharing the
    question's other words fill ``hits``. Read: the newest ``RUNNING_SCAN`` observations of
    ``scopes`` matching ``q`` (an ``fts_query`` expression), and as many holding one of
    ``idents`` (``text.identifier_terms``), and the ``RUNNING_SCAN`` best that ``tt``'s
    unspaced-script words match in ``observations_tri``, without bm25 (ranking every match costs ~40 ms at
    500k observations); kept: those whose session has not ended and has no live page, or a
    page last written before the turn was stored. Ranked: turns holding an identifier first,
    then by the distinct question ``terms`` they hold (``text.terms_held``, the RawHit's
    ``score``), then newest; at most ``RUNNING_TURNS_PER_SESSION`` a session. Returns
    ``list[RawHit]``, len ≤ ``limit``.
    """
    if limit < 1:
        return []
    where, args = _scope_sql(scopes, "project_id")
    if conn.execute(f"SELECT 1 FROM sessions WHERE ended_at IS NULL{where} LIMIT 1", args).fetchone() is None:
        return []  # no session of the scope is running: nothing to read
    ident_ids: set[int] = set()
    ids: dict[int, None] = {}
    for expr, ident in [(q, False)] + ([(iq, True)] if (iq := fts_query(idents)) else []):
        for (oid,) in conn.execute(
            "SELECT rowid FROM observations_fts WHERE observations_fts MATCH ? ORDER BY rowid DESC LIMIT ?",
            [_scoped_match(expr, scopes), RUNNING_SCAN],
        ):
            ids[oid] = None
            if ident:
                ident_ids.add(oid)
    if tt is not None:
        ids.update((oid, None) for oid, _score in _obs_tri_hits(conn, tt, scopes, RUNNING_SCAN))
    if not ids:
        return []
    rows = conn.execute(
        # CROSS JOIN: from the matched ids (the planner preferred the index of open sessions:
        # 17 s with 25k of them and 800 ids).
        f"SELECT {_RAW_COLS} FROM observations o CROSS JOIN sessions s"
        " ON s.project_id = o.project_id AND s.session_id = o.session_id"
        f" WHERE o.id IN ({','.join('?' * len(ids))}) AND s.ended_at IS NULL"
        " AND coalesce(julianday(o.created_at) > (SELECT max(julianday(p.updated_at)) FROM pages p"
        "   WHERE p.session_id = o.session_id AND p.project_id = o.project_id AND p.is_latest = 1), 1)", [*ids],
    ).fetchall()
    # Scored: the turns holding an identifier and the newest others, RUNNING_SCORED in all.
    rows = sorted(rows, key=lambda r: (r["id"] not in ident_ids, -r["id"]))[:RUNNING_SCORED]
    names = {s.project_id: s for s in scopes}
    held = {r["id"]: terms_held(f"{r['title'] or ''}\n{r['body'] or ''}", terms) for r in rows}
    per_session: Counter[tuple[str, str]] = Counter()
    out = []
    for r in sorted(rows, key=lambda r: (r["id"] not in ident_ids, -held[r["id"]], -r["id"])):
        key = (r["project_id"], r["session_id"])
        if r["project_id"] not in names or per_session[key] >= RUNNING_TURNS_PER_SESSION:
            continue
        per_session[key] += 1
        out.append(_raw_hit(r, names[r["project_id"]], float(held[r["id"]]), terms, n_words))
        if len(out) >= min(limit, 100):
            break
    return out


_RAW_COLS = "o.id, o.session_id, o.kind, o.agent, o.title, o.body, o.occurred_at, o.project_id"


def _raw_hit(r: sqlite3.Row, sc: Scope, score: float, terms: list[str], n_words: int) -> dict[str, Any]:
    return {
        "observation_id": r["id"], "session_id": r["session_id"], "kind": r["kind"], "agent": r["agent"],
        "title": r["title"], "snippet": snippet(r["body"] or r["title"] or "", terms, n_words=n_words),
        "occurred_at": r["occurred_at"], "workspace": sc.workspace, "project": sc.project,
        "score": float(f"{score:.6g}"),  # bm25 of a small vault is ~1e-6: keep its digits
    }


# -- observations_tri (schema.MIGRATION_13): a captured turn's word inside an unspaced-script
# sentence. Only a question with such a word reads it; an English vault's table is empty.
def _obs_tri_hits(conn, tt: TrigramTerms, scopes, limit: int) -> list[tuple[int, float]]:
    """Observations of ``scopes`` matching ``tt`` in ``observations_tri``: ``[(observation id,
    score)]`` best first, len ≤ ``limit``; ``[]`` when ``tt.latin_only``.

    Scored as ``_trigram_stream`` scores pages: bm25 of ``tt.match`` (title
    ×``TURN_TITLE_WEIGHT``) plus, per 1–2 character word, ``idf × tf × (k1 + 1) / (tf + k1)``
    over the trigrams starting with it (a range scan of ``observations_tri_inst``, at most
    ``SHORT_SCAN_ROWS`` occurrences). The scope is ``observations.project_id`` (the index has
    no project column, so a moved observation needs no re-indexing).
    """
    if tt.latin_only or not (tt.match or tt.short):
        return []
    where, args = _scope_sql(scopes, "+o.project_id")  # drive the join from the index
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
        block = conn.execute("SELECT block FROM observations_tri_data WHERE id = 1").fetchone()
        n = max(len(rows), (_varint(block[0]) if block and block[0] else None) or len(rows))
        idf = math.log(1 + (n - len(rows) + 0.5) / (len(rows) + 0.5))
        for oid, tf in rows:
            scores[oid] = scores.get(oid, 0.0) + idf * tf * (BM25_K1 + 1) / (tf + BM25_K1)
    return sorted(scores.items(), key=lambda kv: (-round(kv[1], 9), kv[0]))[:limit]


def _raw_tri_rows(conn, tt: TrigramTerms, scopes, limit: int) -> list[tuple[sqlite3.Row, float]]:
    """``raw_search``'s rows for the observations ``_obs_tri_hits`` finds: ``[(row, score)]`` best first."""
    hits = _obs_tri_hits(conn, tt, scopes, limit)
    if not hits:
        return []
    rows = {r["id"]: r for r in conn.execute(
        f"SELECT {_RAW_COLS} FROM observations o"
        f" WHERE o.id IN ({','.join('?' * len(hits))})", [oid for oid, _ in hits]).fetchall()}
    return [(rows[oid], sc) for oid, sc in hits if oid in rows]


def _merge_raw(a: list[tuple[Any, float]], b: list[tuple[Any, float]], limit: int) -> list[tuple[Any, float]]:
    """``a`` and ``b`` (``(row, score)``, best first) as one list by score desc (an id in both
    keeps its higher score; ties keep ``a`` first), len ≤ ``limit``."""
    best: dict[int, tuple[Any, float]] = {}
    for r, sc in a + b:
        if r["id"] not in best or sc > best[r["id"]][1]:
            best[r["id"]] = (r, sc)
    return sorted(best.values(), key=lambda rs: -rs[1])[:limit]


def _fold_tri_turns(conn, tt: TrigramTerms, scopes, turns: dict[tuple[str, str], float],
                    matched: dict[tuple[str, str], list[int]]) -> None:
    """Add the ``TURN_CANDIDATES`` best ``_obs_tri_hits`` to ``_turns_stream``'s per-session
    ``turns`` (best score, kept when higher) and ``matched`` (observation ids, appended)."""
    hits = _obs_tri_hits(conn, tt, scopes, TURN_CANDIDATES)
    if not hits:
        return
    session_of = {oid: (pj, sid) for oid, pj, sid in conn.execute(
        f"SELECT id, project_id, session_id FROM observations WHERE id IN ({','.join('?' * len(hits))})",
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
