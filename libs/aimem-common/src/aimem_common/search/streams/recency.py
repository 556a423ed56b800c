"""recency: for a question that asks for the newest of something, the fused top by page time.

Idle unless the question carries a recency cue (``Question.recency``: "latest", "most recent",
"newest", "last time", "currently", "now"). Then the ``RECENCY_PAGES`` best fused
candidates of the streams before it are ranked by their page's ``updated_at``, newest first.
It only reorders pages the question's words already found (a page no other stream ranked gets
nothing). Its score is how much newer a page is than the oldest of them (seconds), and like a
bm25 stream it adds the bounded margin bonus on that score: RRF alone gives two candidates
shares 1.6% apart, too little to move a newer page past an older, slightly better match; with
the bonus the newest gets at least ``0.5 × WEIGHT / 61`` more than the oldest, while a clearly
better match still keeps its place. A hit's explain shows the stream's rank and score; the
query's explain names the cue (``recency``).

LoCoMo dev (bench/locomo.py, conversations 0–2 tuned, 3–4 the check): 4 + 1 questions carry a
cue; weights 0.5 / 1 / 2, 5 / 10 / 20 pages, with or without the bonus moved none of their
evidence sessions once the cues were settled (``question.RECENCY_CUES``), so both halves keep
their figures; ``WEIGHT`` and the bonus are set by what the stream is for (the newer of two
close matches first; its tests).
"""

from __future__ import annotations

from datetime import datetime

from aimem_common.search.fusion import top
from aimem_common.search.sql import marks
from aimem_common.search.stream import Ranked, Run, stream

WEIGHT = 1.0
RECENCY_PAGES = 10  # fused candidates ordered by page time


@stream("recency", weight=WEIGHT, margin=True)
def rank(run: Run) -> Ranked | None:
    """The ``RECENCY_PAGES`` best fused candidates by page time, newest first (the higher page
    id first on equal times): ``[(page_id, seconds newer than the oldest of them)]``; None
    without a recency cue."""
    if run.question.recency is None:
        return None
    ids = [c.page_id for c in top(run.cands, RECENCY_PAGES)]
    if not ids:
        return []
    rows = run.conn.execute(f"SELECT id, updated_at FROM pages WHERE id IN ({marks(len(ids))})", ids).fetchall()
    times = [(pid, _unix_s(at)) for pid, at in rows]
    oldest = min(t for _, t in times)
    return sorted(((pid, t - oldest) for pid, t in times), key=lambda kv: (-kv[1], -kv[0]))


def _unix_s(stamp: str | None) -> float:
    """``updated_at`` (RFC 3339, ``Z`` or an offset) as Unix seconds; 0.0 when unreadable."""
    try:
        return datetime.fromisoformat(stamp or "").timestamp()
    except ValueError:
        return 0.0
