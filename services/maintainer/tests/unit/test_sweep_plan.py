"""The sweep plan over a seeded store: exactly the expected ids per pass."""

from __future__ import annotations

from aimem_common.config import DecaySettings
from aimem_common.read.scopes import all_scopes
from aimem_maintainer.sweep import plan_sweep

from aimem_testing.seed import NOW


def test_plan_selects_exactly_the_expected_pages(seed):
    a = seed.project("alpha")
    b = seed.project("beta")  # same paths in another project never cross
    ids = {}
    ids["fresh"] = seed.page(a, "sessions/fresh.md", age_days=5)
    ids["old"] = seed.page(a, "sessions/old.md", age_days=90)  # e^-1.8 = 0.165 → cold
    ids["old_but_read"] = seed.page(a, "sessions/read.md", age_days=90, access_count=4, accessed_days_ago=2)
    ids["old_pinned"] = seed.page(a, "notes-old.md", age_days=400, pinned=True)
    ids["old_note"] = seed.page(a, "note-old.md", age_days=200)
    ids["old_concept"] = seed.page(a, "concepts/x.md", age_days=900)  # semantic: no decay
    ids["old_slot"] = seed.page(a, "_slots/focus.md", age_days=900, tier="episodic")  # slots pinned
    ids["low_salience"] = seed.page(a, "sessions/meh.md", age_days=10, salience=0.2)  # 0.2·e^-0.2 = 0.164
    ids["ttl_pinned"] = seed.page(a, "concepts/ttl.md", pinned=True, expires_at="2026-05-01")
    ids["ttl_future"] = seed.page(a, "sessions/ttl-future.md", expires_at="2027-01-01")
    ids["tomb_old"] = seed.page(a, "sessions/gone.md", is_latest=0, retired_reason="evicted", superseded_days_ago=200)
    ids["tomb_young"] = seed.page(a, "sessions/gone2.md", is_latest=0, retired_reason="evicted", superseded_days_ago=20)
    ids["superseded_old"] = seed.page(a, "sessions/v.md", is_latest=0, retired_reason="superseded", superseded_days_ago=400)
    seed.page(b, "sessions/old.md", age_days=1)

    scopes = {s.project: s for s in all_scopes(seed.conn)}
    plan = plan_sweep(seed.conn, scopes["alpha"], DecaySettings(), NOW)
    assert plan.ids() == {
        "expired": [ids["ttl_pinned"]],
        "evicted": sorted([ids["old"], ids["old_note"], ids["low_salience"]]),
        "purged": [ids["tomb_old"]],
    }
    assert plan.prune_observations == 0 and plan.prune_before is None
    assert plan_sweep(seed.conn, scopes["beta"], DecaySettings(), NOW).empty


def test_observation_prune_never_removes_last_copy(seed):
    a = seed.project("alpha")
    live = seed.page(a, "sessions/s1.md", age_days=1, session_id="s1")
    evicting = seed.page(a, "sessions/s2.md", age_days=200, session_id="s2")  # evicted by this very run
    seed.session(a, "s1", summary_page_id=live, observations=3, obs_age_days=40)
    seed.session(a, "s2", summary_page_id=evicting, observations=2, obs_age_days=40)
    seed.session(a, "s3", summary_page_id=None, observations=4, obs_age_days=40)  # never summarised
    seed.session(a, "s4", summary_page_id=live, observations=5, obs_age_days=3)  # too young
    scope = all_scopes(seed.conn)[0]
    off = plan_sweep(seed.conn, scope, DecaySettings(), NOW)
    assert off.prune_observations == 0
    plan = plan_sweep(seed.conn, scope, DecaySettings(observation_retention_days=30), NOW)
    assert plan.prune_sessions == ["s1"] and plan.prune_observations == 3
    assert plan.ids()["evicted"] == [evicting]
