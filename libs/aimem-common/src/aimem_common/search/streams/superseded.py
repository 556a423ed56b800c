"""superseded: older versions of pages matching the question's terms (only with ``include_superseded``).

A substring match (``LIKE``) over at most 8 terms and 1,000 retired versions; a term in the
title counts 2, in the body 1. Their hits carry ``superseded: true`` and a lower authority.
"""

from __future__ import annotations

from aimem_common.search.sql import scope_sql
from aimem_common.search.stream import Ranked, Run, stream

WEIGHT = 0.6
MAX_TERMS = 8
MAX_ROWS = 1000


@stream("superseded", weight=WEIGHT)
def rank(run: Run) -> Ranked | None:
    """Superseded versions holding the question's terms: ``[(page_id, score)]`` best first (newest on ties)."""
    if not run.opts.include_superseded:
        return None
    terms = run.question.terms
    if not terms:
        return []
    where, args = scope_sql(run.scopes, "p.project_id")
    likes = " OR ".join(["lower(p.title || ' ' || p.body) LIKE ?"] * min(len(terms), MAX_TERMS))
    rows = run.conn.execute(
        "SELECT p.id, lower(p.title), lower(p.body) FROM pages p WHERE p.is_latest = 0"
        f" AND p.retired_reason = 'superseded'{where} AND ({likes}) LIMIT {MAX_ROWS}",
        [*args, *(f"%{t}%" for t in terms[:MAX_TERMS])],
    ).fetchall()
    scored = []
    for pid, title, body in rows:
        s = sum(2.0 if t in title else 0.0 for t in terms) + sum(1.0 for t in terms if t in body)
        scored.append((pid, s))
    scored.sort(key=lambda kv: (-kv[1], -kv[0]))
    return scored[: run.opts.candidates]
