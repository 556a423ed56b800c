"""links: one-hop neighbours (either direction) of the top fused hits of the streams before it.

A neighbour scores Σ 1/rank of the seeds it is linked with; the seeds themselves are left out.
"""

from __future__ import annotations

from aimem_common.search.fusion import top
from aimem_common.search.sql import marks, scope_sql
from aimem_common.search.stream import Ranked, Run, stream

WEIGHT = 0.5
SEED_COUNT = 5  # top fused hits whose link neighbours join the links stream


@stream("links", weight=WEIGHT)
def rank(run: Run) -> Ranked | None:
    """Link neighbours of the ``SEED_COUNT`` best candidates: ``[(page_id, score)]`` best first;
    ``run.via`` = ``{neighbour: [{"via_page_id", "edge"}]}`` (explain)."""
    seeds = [c.page_id for c in top(run.cands, SEED_COUNT)]
    if not seeds:
        return []
    m = marks(len(seeds))
    # "+" keeps the planner on the links indexes (seed ids) instead of scanning the scope's pages.
    where, args = scope_sql(run.scopes, "+t.project_id")
    rows = run.conn.execute(
        "SELECT l.from_page_id AS seed, l.to_page_id AS nb, l.link_kind FROM links l"
        f" JOIN pages t ON t.id = l.to_page_id AND t.is_latest = 1 WHERE l.from_page_id IN ({m}){where}"
        " UNION ALL "
        "SELECT l.to_page_id AS seed, l.from_page_id AS nb, l.link_kind FROM links l"
        f" JOIN pages t ON t.id = l.from_page_id AND t.is_latest = 1 WHERE l.to_page_id IN ({m}){where}",
        [*seeds, *args, *seeds, *args],
    ).fetchall()
    rank_of = {pid: i + 1 for i, pid in enumerate(seeds)}
    score: dict[int, float] = {}
    for seed, nb, kind in rows:
        if nb in rank_of or nb is None:
            continue
        score[nb] = score.get(nb, 0.0) + 1.0 / rank_of[seed]
        run.via.setdefault(nb, []).append({"via_page_id": seed, "edge": kind})
    return sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))
