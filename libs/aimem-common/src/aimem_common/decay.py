"""The retention formula of the forget sweep (DESIGN.md "Decay"): only episodic pages decay.

``retention = salience·exp(−λ·Δt) + σ·ln(1+access_count)·exp(−μ·days_since_access)
· (1 + breadth_weight·ln(1 + max(distinct_actors−1, 0)))`` with Δt in days since the page
version was written. Only episodic, unpinned pages decay; below ``cold_threshold`` a page
is evicted. Shared by the maintainer's sweep and the web's page screen (its decay state).
"""

from __future__ import annotations

import math

from aimem_common.config import DecaySettings


def retention(
    decay: DecaySettings,
    *,
    salience: float | None,
    age_days: float,
    access_count: int,
    days_since_access: float | None,
    distinct_actors: int = 1,
) -> float:
    """Return the retention score (dimensionless, ≥ 0) of one page.

    Args:
        salience: the page's salience; None means ``decay.salience_default``.
        age_days: days since the page version was written (Δt), clamped at 0.
        access_count: number of retrieval hits.
        days_since_access: days since the last hit; None = never accessed (no reinforcement).
        distinct_actors: distinct operators that accessed it (breadth term, opt-in).
    """
    s = decay.salience_default if salience is None else salience
    base = s * math.exp(-decay.lambda_ * max(0.0, age_days))
    if access_count <= 0 or days_since_access is None:
        return base
    reinforce = decay.sigma * math.log1p(access_count) * math.exp(-decay.mu * max(0.0, days_since_access))
    breadth = 1.0 + decay.breadth_weight * math.log1p(max(distinct_actors - 1, 0))
    return base + reinforce * breadth


def is_cold(decay: DecaySettings, score: float) -> bool:
    """Return True when ``score`` is below ``decay.cold_threshold`` (evict)."""
    return score < decay.cold_threshold
