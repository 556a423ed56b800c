"""``memory_query``: hybrid retrieval over the compiled wiki (DESIGN.md "Read side").

Inside one read snapshot: the streams (``search.streams``, in ``ORDER``) each rank pages, are
fused by RRF and multiplied by authority (``fusion``), the candidates that can win are read
(``hits``), and project-scoped searches add ``raw_hits`` (``raw``). Sync: runs on a reader
thread (``ReaderPool.run``); the caller bumps access counts (``search.access``).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from aimem_common.errors import BadRequestError
from aimem_common.models import Scope
from aimem_common.read import scopes as scopes_mod
from aimem_common.read import visibility
from aimem_common.read.vectors import ChunkVectors
from aimem_common.search.fusion import fuse
from aimem_common.search.hits import fill_explain_extras, page_hits, rerank_input
from aimem_common.search.question import Question, QueryOptions, QueryVector
from aimem_common.search.raw import raw_hits
from aimem_common.search.result import SearchResult
from aimem_common.search.stream import Run
from aimem_common.search.streams import STREAMS

if TYPE_CHECKING:
    from aimem_common.auth import Principal

MAX_LIMIT = 100


def memory_query(
    conn: sqlite3.Connection,
    query: str,
    scopes: list[Scope] | None,
    *,
    options: QueryOptions | None = None,
    vector: QueryVector | None = None,
    vectors: ChunkVectors | None = None,
) -> SearchResult:
    """Search the compiled wiki of ``scopes`` (``None`` = every project, ``global=true``).

    Args:
        query: the natural-language question (any text; operators are inert).
        scopes: resolved scopes (``resolve_search_scopes``); ``[]`` returns nothing.
        options: ``QueryOptions`` (limit, explain, include_expired, include_superseded, ...).
        vector: optional query embedding for the vector stream.
        vectors: the process's chunk-vector copy (``ReaderPool.vectors``); None loads the
            scope's rows for this call only (tests, one-off tools).

    Returns a ``SearchResult``: ``hits`` (``Hit``, score desc, len ≤ ``limit``), ``raw_hits``
    (``RawHit``: project-scoped searches only, len ≤ ``raw_limit``); with ``explain``, its
    ``explain`` (``streams_active``, ``fts_query``, ``trigram_query``, ``trigram_short``,
    ``recency``? (the question's recency cue, when it asks for the newest of something),
    ``stream_ms``) and per-hit ``score_details``; with ``rerank_docs``, ``rerank``
    (``rerank_input``). ``to_json`` is its wire shape.

    Raises:
        BadRequestError: a malformed query vector.
    """
    opts = options or QueryOptions()
    limit = max(1, min(opts.limit, MAX_LIMIT))
    question = Question.of(query)
    out = SearchResult()
    explain: dict[str, Any] | None = None
    if opts.explain:
        explain = out.explain = {"streams_active": [], "fts_query": question.fts}
    if scopes is not None and not scopes:
        return out
    if explain is not None:
        explain.update(trigram_query=question.tri.match, trigram_short=question.tri.short)
        if question.recency:
            explain["recency"] = question.recency

    run = Run(conn, question, scopes, replace(opts, candidates=max(opts.candidates, limit * 3)), vector, vectors)
    active: list[str] = []
    lap = _Laps()
    for s in STREAMS:
        weight = s.alone_weight if s.alone_weight is not None and not run.cands else s.weight
        ranked = s.rank(run)
        if ranked is None:  # idle for this question
            continue
        if ranked:
            active.append(s.name)
            fuse(run.cands, s.name, ranked, opts.rrf_k, weight, margin=s.margin, certain=s.certain)
        lap(s.name)

    hits = page_hits(run, limit) if run.cands else []
    if opts.rerank_docs > 0 and run.cands:
        out.rerank = rerank_input(conn, hits[:opts.rerank_docs], question.terms,
                                  {pid for pid, c in run.cands.items() if c.certain})
    if explain is not None and hits:
        fill_explain_extras(conn, hits)
    lap("hits")
    out.hits = hits
    if scopes is not None and opts.raw_fallback and question.fts:
        out.raw_hits = raw_hits(conn, question, scopes, pages_found=bool(hits), limit=opts.raw_limit,
                                n_words=opts.snippet_words)
        if out.raw_hits:
            active.append("raw")
    if explain is not None:
        explain["streams_active"] = active
        explain["stream_ms"] = lap.ms
    return out


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


class _Laps:
    """Wall time (ms) spent in each stage of one query, for ``explain`` (``stream_ms``)."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}
        self._t = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.ms[name] = round((now - self._t) * 1000, 3)
        self._t = now
