"""Reciprocal rank fusion of the streams and the bounded authority multiplier.

A page's fused score is ``Σ w_s / (k + rank_s)`` over the streams that ranked it (``k`` =
``settings.retrieval.rrf_k``, 60; ``w_s`` each stream's weight), plus for the bm25 streams a
bounded margin bonus; its hit score is that × ``authority`` (kind, tier, pinned, tags,
superseded) + the exact stream's share (``Cand.certain``, added after authority so a page
naming a rare identifier is never outvoted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# RRF alone discards how *much* better the bm25 leader is (k=60 makes ranks 1 and 6 differ by
# 8%, less than the authority spread), so a bm25 stream (``margin=True``) adds a bounded margin
# bonus: FTS_MARGIN_WEIGHT × (bm25 / best bm25) × the rank-1 RRF share. Close contests stay close.
FTS_MARGIN_WEIGHT = 0.5

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
class Cand:
    """A page some stream ranked: its per-stream explain entries and its fused shares."""

    page_id: int
    streams: dict[str, dict[str, Any]] = field(default_factory=dict)
    rrf: float = 0.0
    certain: float = 0.0  # the exact stream's share, added after the authority factor

    @property
    def bound(self) -> float:
        """The highest hit score this candidate can reach (authority at ``AUTHORITY_MAX``)."""
        return self.rrf * AUTHORITY_MAX + self.certain


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


def fuse(cands: dict[int, Cand], name: str, ranked: list[tuple[int, float]], k: int, weight: float, *,
         margin: bool = False, certain: bool = False) -> None:
    """Add one stream's ``ranked`` (``[(page_id, score)]`` best first) to ``cands``.

    Each page gets ``weight / (k + rank)`` (plus the margin bonus with ``margin``) into its
    ``rrf``, or into ``certain`` with ``certain``; its ``streams[name]`` records rank, score and
    that share (explain).
    """
    best = ranked[0][1] if ranked and ranked[0][1] > 0 else 0.0
    for rank, (pid, score) in enumerate(ranked, start=1):
        c = cands.setdefault(pid, Cand(pid))
        contrib = weight / (k + rank)
        if margin and best > 0:
            contrib += FTS_MARGIN_WEIGHT * weight * max(score, 0.0) / best / (k + 1)
        c.streams[name] = {"rank": rank, "score": round(score, 6), "rrf": round(contrib, 8)}
        if certain:
            c.certain += contrib
        else:
            c.rrf += contrib


def top(cands: dict[int, Cand], n: int) -> list[Cand]:
    """The ``n`` best fused candidates (``rrf + certain`` desc, page id asc)."""
    return sorted(cands.values(), key=lambda c: (-(c.rrf + c.certain), c.page_id))[:n]
