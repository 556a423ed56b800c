"""Page hits: the typed ``Hit`` and how the fused candidates become hits.

Which candidates qualify, reading only those that can win, snippets, explain details and the
reranker's input.

A candidate qualifies as a hit when its page row is live (or superseded and brought by the
superseded stream), not expired (unless asked), and in a searched project (``qualify``: the
one rule); its score is ``rrf × authority + certain`` (``fusion``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aimem_common.read.pages import is_expired
from aimem_common.read.text import snippet
from aimem_common.search.fusion import Cand, authority
from aimem_common.search.sql import json_list, marks
from aimem_common.search.stream import Run

RERANK_WORDS = 120  # words of a page shown to the reranker, around the question's terms

_META_SQL = """
SELECT p.id, p.path, p.title, p.kind, p.tier, p.tags, p.pinned, p.session_id, p.expires_at,
       p.is_latest, p.updated_at, p.project_id, w.name AS ws, pj.name AS pj
FROM pages p JOIN projects pj ON pj.id = p.project_id JOIN workspaces w ON w.id = p.workspace_id
WHERE p.id IN ({marks})
"""


@dataclass(slots=True)
class Hit:
    """One page hit (``to_json`` is its wire shape, DESIGN.md "Read side").

    ``score``: ``rrf × authority + certain`` (rounded to 8 digits on the wire). ``session_id``,
    ``superseded``, ``expired`` and ``score_details`` (explain) appear only when set.
    """

    path: str
    title: str
    score: float
    kind: str
    tier: str
    workspace: str
    project: str
    page_id: int
    updated_at: str
    pinned: bool
    tags: list[str]
    snippet: str = ""
    session_id: str | None = None
    superseded: bool = False
    expired: bool = False
    score_details: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The hit as the API and MCP return it (keys in the order clients have always seen)."""
        out: dict[str, Any] = {
            "path": self.path, "title": self.title, "snippet": self.snippet, "score": round(self.score, 8),
            "kind": self.kind, "tier": self.tier, "workspace": self.workspace, "project": self.project,
            "page_id": self.page_id, "updated_at": self.updated_at, "pinned": self.pinned, "tags": self.tags,
        }
        if self.session_id:
            out["session_id"] = self.session_id
        if self.superseded:
            out["superseded"] = True
        if self.expired:
            out["expired"] = True
        if self.score_details is not None:
            out["score_details"] = self.score_details
        return out


@dataclass(frozen=True, slots=True)
class Qualified:
    """A candidate whose page row may be a hit, with its authority (computed once, here)."""

    cand: Cand
    row: sqlite3.Row
    authority: float
    tags: list[str]

    @property
    def score(self) -> float:
        """The hit score: ``rrf × authority + certain``."""
        return self.cand.rrf * self.authority + self.cand.certain


def qualify(c: Cand, r: sqlite3.Row, include_expired: bool, in_scope: set[str] | None) -> Qualified | None:
    """``c``'s page row ``r`` as a hit candidate with its authority, or None when it may not be a hit.

    Not a hit: a superseded version no superseded stream brought (entity/link rows may point
    at retired versions), an expired page unless asked for, a page outside ``in_scope`` (project
    ids; whatever stream brought it, e.g. a stale entity link of a moved page).
    """
    superseded = not r["is_latest"]
    if superseded and "superseded" not in c.streams:
        return None
    if not include_expired and is_expired(r["expires_at"]):
        return None
    if in_scope is not None and r["project_id"] not in in_scope:
        return None
    tags = json_list(r["tags"])
    return Qualified(c, r, authority(r["kind"], r["tier"], bool(r["pinned"]), tags, superseded), tags)


def candidate_rows(conn: sqlite3.Connection, cands: dict[int, Cand], limit: int, include_expired: bool,
                   in_scope: set[str] | None = None) -> Iterator[Qualified]:
    """Yield the qualifying candidates (``qualify``) that can still reach the top ``limit``.

    A candidate's final score is ``rrf × authority + certain`` with authority at most
    ``AUTHORITY_MAX`` (``Cand.bound``), so candidates are read best bound first, in chunks, and
    the reading stops once ``limit`` qualifying rows score above the next candidate's bound:
    the hits are the ones reading every candidate gives, for ~``2 × limit`` page rows instead
    of all the streams' candidates (~150 random reads of ``pages``).
    """
    order = sorted(cands.values(), key=lambda c: (-c.bound, c.page_id))
    chunk = max(2 * limit, 20)
    scores: list[float] = []  # final scores of the rows that qualified so far
    i = 0
    while i < len(order):
        part = order[i:i + chunk]
        i += chunk
        ids = [c.page_id for c in part]
        meta = {r["id"]: r for r in conn.execute(_META_SQL.format(marks=marks(len(ids))), ids).fetchall()}
        for c in part:
            r = meta.get(c.page_id)
            q = None if r is None else qualify(c, r, include_expired, in_scope)
            if q is not None:
                scores.append(q.score)
                yield q
        if i < len(order) and len(scores) >= limit and sorted(scores, reverse=True)[limit - 1] > order[i].bound:
            return


def page_hits(run: Run, limit: int) -> list[Hit]:
    """The top ``limit`` hits of ``run.cands``: score desc, page id asc; snippets filled.

    With explain each hit has ``score_details``: ``streams`` (each stream's rank, score and
    share; the vector's best chunks), ``rrf``, ``authority``, ``certain``?, ``matched_entities``?,
    ``graph``? (link seeds, with their paths) and ``evidence_count``.
    """
    opts = run.opts
    in_scope = None if run.scopes is None else {sc.project_id for sc in run.scopes}
    hits: list[Hit] = []
    for q in candidate_rows(run.conn, run.cands, limit, opts.include_expired, in_scope):
        r, c = q.row, q.cand
        hit = Hit(path=r["path"], title=r["title"], score=q.score, kind=r["kind"], tier=r["tier"],
                  workspace=r["ws"], project=r["pj"], page_id=c.page_id, updated_at=r["updated_at"],
                  pinned=bool(r["pinned"]), tags=q.tags, session_id=r["session_id"] or None,
                  superseded=not r["is_latest"], expired=is_expired(r["expires_at"]))
        if opts.explain:
            hit.score_details = _details(run, c, q.authority)
        hits.append(hit)
    hits.sort(key=lambda h: (-h.score, h.page_id))
    hits = hits[:limit]
    _fill_snippets(run.conn, hits, run.question.terms, opts.snippet_words, run.bodies)
    return hits


def _details(run: Run, c: Cand, auth: float) -> dict[str, Any]:
    details: dict[str, Any] = {"streams": c.streams, "rrf": round(c.rrf, 8), "authority": round(auth, 4)}
    if c.certain:
        details["certain"] = round(c.certain, 8)
    pid = c.page_id
    if pid in run.matched_entities:
        details["matched_entities"] = run.matched_entities[pid]
    if pid in run.chunks and "vector" in c.streams:
        c.streams["vector"]["chunks"] = [{"chunk": ci, "cosine": round(cs, 6)} for ci, cs in run.chunks[pid][:3]]
    if "links" in c.streams:
        details["graph"] = run.via.get(pid, [])
    return details


def _bodies(conn: sqlite3.Connection, ids: list[int]) -> dict[int, str]:
    return dict(conn.execute(f"SELECT id, body FROM pages WHERE id IN ({marks(len(ids))})", ids).fetchall())


def _fill_snippets(conn: sqlite3.Connection, hits: list[Hit], terms: list[str], n_words: int,
                   read: dict[int, str]) -> None:
    """Fill each hit's snippet from its page body; ``read``: live bodies this query read already
    (page id -> body, same snapshot); the others are read here (a superseded hit's too)."""
    if not hits:
        return
    missing = [h.page_id for h in hits if h.page_id not in read]
    bodies = {**read, **_bodies(conn, missing)} if missing else read
    for h in hits:
        h.snippet = snippet(bodies.get(h.page_id) or "", terms, n_words=n_words)


def fill_explain_extras(conn: sqlite3.Connection, hits: list[Hit]) -> None:
    """Add ``evidence_count`` and each link seed's ``via_path`` to the hits' ``score_details``."""
    ids = [h.page_id for h in hits]
    ev = dict(conn.execute(
        f"SELECT page_id, count(*) FROM page_evidence WHERE page_id IN ({marks(len(ids))}) GROUP BY page_id", ids
    ).fetchall())
    paths: dict[int, str] = {}
    via_ids = {v["via_page_id"] for h in hits for v in h.score_details.get("graph", [])}
    if via_ids:
        paths = dict(conn.execute(f"SELECT id, path FROM pages WHERE id IN ({marks(len(via_ids))})",
                                  list(via_ids)).fetchall())
    for h in hits:
        d = h.score_details
        d["evidence_count"] = int(ev.get(h.page_id, 0))
        for v in d.get("graph", []):
            v["via_path"] = paths.get(v["via_page_id"])


def rerank_input(conn: sqlite3.Connection, hits: list[Hit], terms: list[str], certain: set[int]) -> dict[str, Any]:
    """The reranker's input for ``hits``: ``{"texts": {page_id: title + passage}, "certain": [page_id]}``.

    The passage is the ``RERANK_WORDS`` words of the body around the question's terms (a
    cross-encoder reads ~512 tokens at most).
    """
    ids = [h.page_id for h in hits]
    if not ids:
        return {"texts": {}, "certain": []}
    bodies = _bodies(conn, ids)
    texts = {h.page_id: f"{h.title}\n{snippet(bodies.get(h.page_id) or '', terms, n_words=RERANK_WORDS)}"
             for h in hits}
    return {"texts": texts, "certain": sorted(certain & set(ids))}
