"""``raw_hits``: captured observations shown beside or instead of page hits (project-scoped only).

Beside page hits, the best turns of sessions still running (no page yet: what a session is doing
right now is not hidden by pages that share the question's other words, ``running_hits``); when
no page matched, any matching observation of the scope (``raw_search``).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass
from typing import Any

from aimem_common.models import Scope
from aimem_common.read.text import fts_query, snippet, terms_held
from aimem_common.search.observations import obs_tri_hits
from aimem_common.search.question import Question
from aimem_common.search.sql import marks, scope_sql, scoped_match

# Beside page hits: the newest RUNNING_SCAN observations matching the question (and as many
# holding its identifiers) are kept to the turns of running sessions their page does not hold
# yet, at most RUNNING_TURNS_PER_SESSION of one session (a busy session would fill the list with
# near-duplicates of its one matching tool output). A running session's turns are among the
# newest rows, so reading the newest matches (FTS5 walks its doclists from the end: 1.8 ms p50
# for 400 of 500k observations, where bm25 for those 400 rows alone took 38 ms) finds them
# without ranking every match of a large vault.
RUNNING_SCAN = 400
RUNNING_SCORED = 60  # running turns scored by the question terms they hold (50–100 µs each on a 2-core VM)
RUNNING_TURNS_PER_SESSION = 3
MAX_RAW = 100

_RAW_COLS = "o.id, o.session_id, o.kind, o.agent, o.title, o.body, o.occurred_at, o.project_id"


@dataclass(slots=True)
class RawHit:
    """One raw observation hit (``to_json`` is its wire shape).

    ``score``: bm25 (``raw_search``) or the question terms the turn holds (``running_hits``).
    """

    observation_id: int
    session_id: str
    kind: str
    agent: str | None
    title: str | None
    snippet: str
    occurred_at: str
    workspace: str
    project: str
    score: float

    @classmethod
    def of(cls, r: sqlite3.Row, sc: Scope, score: float, terms: list[str], n_words: int) -> "RawHit":
        """The hit of observation row ``r`` (``_RAW_COLS``) in scope ``sc``."""
        return cls(r["id"], r["session_id"], r["kind"], r["agent"], r["title"],
                   snippet(r["body"] or r["title"] or "", terms, n_words=n_words), r["occurred_at"],
                   sc.workspace, sc.project, float(f"{score:.6g}"))  # bm25 of a small vault is ~1e-6: keep its digits

    def to_json(self) -> dict[str, Any]:
        """The raw hit as the API and MCP return it."""
        return {"observation_id": self.observation_id, "session_id": self.session_id, "kind": self.kind,
                "agent": self.agent, "title": self.title, "snippet": self.snippet, "occurred_at": self.occurred_at,
                "workspace": self.workspace, "project": self.project, "score": self.score}


def raw_hits(conn: sqlite3.Connection, question: Question, scopes: list[Scope], *, pages_found: bool,
             limit: int, n_words: int) -> list[RawHit]:
    """``running_hits`` beside page hits (``pages_found``), else ``raw_search``."""
    if pages_found:
        return running_hits(conn, question, scopes, limit=limit, n_words=n_words)
    return raw_search(conn, question, scopes, limit=limit, n_words=n_words)


def raw_search(conn: sqlite3.Connection, question: Question, scopes: list[Scope], *, limit: int = 10,
               n_words: int = 24) -> list[RawHit]:
    """Bounded bm25 search over the raw ``observations`` of ``scopes`` (the no-page fallback).

    ``question.fts`` is matched in ``observations_fts``; the question's unspaced words also
    match in ``observations_tri`` (``obs_tri_hits``; an observation found by both keeps its
    higher score). Returns ``list[RawHit]`` best first, len ≤ ``limit``.
    """
    limit = max(1, min(limit, MAX_RAW))
    rows = conn.execute(
        f"SELECT {_RAW_COLS}, bm25(observations_fts, 1.0, 1.0, 0.0) AS s FROM observations_fts"
        " JOIN observations o ON o.id = observations_fts.rowid WHERE observations_fts MATCH ? ORDER BY s LIMIT ?",
        [scoped_match(question.fts, scopes), limit],
    ).fetchall()
    scored = _merge([(r, -float(r["s"])) for r in rows], _tri_rows(conn, question, scopes, limit), limit)
    names = {s.project_id: s for s in scopes}
    return [RawHit.of(r, names[r["project_id"]], score, question.terms, n_words) for r, score in scored]


def running_hits(conn: sqlite3.Connection, question: Question, scopes: list[Scope], *, limit: int = 10,
                 n_words: int = 24) -> list[RawHit]:
    """The turns of sessions still running that match the question and that their session's
    page does not hold yet.

    A session's page is written when it ends, so until then its turns reach a page search
    only here (and a session reopened after its end has new turns its page lacks): an
    identifier or a finding of the running session stays visible even when pages sharing the
    question's other words fill ``hits``. Read: the newest ``RUNNING_SCAN`` observations of
    ``scopes`` matching ``question.fts``, and as many holding one of its identifiers, and the
    ``RUNNING_SCAN`` best that its unspaced-script words match in ``observations_tri``, without
    bm25 (ranking every match costs ~40 ms at 500k observations); kept: those whose session has
    not ended and has no live page, or a page last written before the turn was stored. Ranked:
    turns holding an identifier first, then by the distinct question terms they hold
    (``text.terms_held``, the RawHit's ``score``), then newest; at most
    ``RUNNING_TURNS_PER_SESSION`` a session. Returns ``list[RawHit]``, len ≤ ``limit``.
    """
    if limit < 1:
        return []
    where, args = scope_sql(scopes, "project_id")
    if conn.execute(f"SELECT 1 FROM sessions WHERE ended_at IS NULL{where} LIMIT 1", args).fetchone() is None:
        return []  # no session of the scope is running: nothing to read
    ident_ids: set[int] = set()
    ids: dict[int, None] = {}
    iq = fts_query(question.idents)
    for expr, ident in [(question.fts, False)] + ([(iq, True)] if iq else []):
        for (oid,) in conn.execute(
            "SELECT rowid FROM observations_fts WHERE observations_fts MATCH ? ORDER BY rowid DESC LIMIT ?",
            [scoped_match(expr, scopes), RUNNING_SCAN],
        ):
            ids[oid] = None
            if ident:
                ident_ids.add(oid)
    ids.update((oid, None) for oid, _score in obs_tri_hits(conn, question.tri, scopes, RUNNING_SCAN))
    if not ids:
        return []
    rows = conn.execute(
        # CROSS JOIN: from the matched ids (the planner preferred the index of open sessions:
        # 17 s with 25k of them and 800 ids).
        f"SELECT {_RAW_COLS} FROM observations o CROSS JOIN sessions s"
        " ON s.project_id = o.project_id AND s.session_id = o.session_id"
        f" WHERE o.id IN ({marks(len(ids))}) AND s.ended_at IS NULL"
        " AND coalesce(julianday(o.created_at) > (SELECT max(julianday(p.updated_at)) FROM pages p"
        "   WHERE p.session_id = o.session_id AND p.project_id = o.project_id AND p.is_latest = 1), 1)", [*ids],
    ).fetchall()
    # Scored: the turns holding an identifier and the newest others, RUNNING_SCORED in all.
    rows = sorted(rows, key=lambda r: (r["id"] not in ident_ids, -r["id"]))[:RUNNING_SCORED]
    names = {s.project_id: s for s in scopes}
    held = {r["id"]: terms_held(f"{r['title'] or ''}\n{r['body'] or ''}", question.terms) for r in rows}
    per_session: Counter[tuple[str, str]] = Counter()
    out = []
    for r in sorted(rows, key=lambda r: (r["id"] not in ident_ids, -held[r["id"]], -r["id"])):
        key = (r["project_id"], r["session_id"])
        if r["project_id"] not in names or per_session[key] >= RUNNING_TURNS_PER_SESSION:
            continue
        per_session[key] += 1
        out.append(RawHit.of(r, names[r["project_id"]], float(held[r["id"]]), question.terms, n_words))
        if len(out) >= min(limit, MAX_RAW):
            break
    return out


def _tri_rows(conn: sqlite3.Connection, question: Question, scopes: list[Scope],
              limit: int) -> list[tuple[sqlite3.Row, float]]:
    """``raw_search``'s rows for the observations ``obs_tri_hits`` finds: ``[(row, score)]`` best first."""
    hits = obs_tri_hits(conn, question.tri, scopes, limit)
    if not hits:
        return []
    rows = {r["id"]: r for r in conn.execute(
        f"SELECT {_RAW_COLS} FROM observations o WHERE o.id IN ({marks(len(hits))})", [oid for oid, _ in hits]
    ).fetchall()}
    return [(rows[oid], sc) for oid, sc in hits if oid in rows]


def _merge(a: list[tuple[Any, float]], b: list[tuple[Any, float]], limit: int) -> list[tuple[Any, float]]:
    """``a`` and ``b`` (``(row, score)``, best first) as one list by score desc (an id in both
    keeps its higher score; ties keep ``a`` first), len ≤ ``limit``."""
    best: dict[int, tuple[Any, float]] = {}
    for r, sc in a + b:
        if r["id"] not in best or sc > best[r["id"]][1]:
            best[r["id"]] = (r, sc)
    return sorted(best.values(), key=lambda rs: -rs[1])[:limit]
