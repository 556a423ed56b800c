"""The retention formula against hand-computed values (DESIGN.md "Decay")."""

from __future__ import annotations

import pytest

from pathlib import Path

from aimem_common import config
from aimem_common.config import DecaySettings
from aimem_common.decay import is_cold, retention

D = DecaySettings()  # λ=0.02, σ=0.6, μ=0.04, cold=0.20


def test_defaults_match_design():
    assert (D.lambda_, D.sigma, D.mu, D.cold_threshold, D.hard_delete_after_days) == (0.02, 0.6, 0.04, 0.20, 180)


def test_age_only():
    # 1.0 · e^(−0.02·30) = e^(−0.6) = 0.548811636…
    assert retention(D, salience=None, age_days=30, access_count=0, days_since_access=None) == pytest.approx(
        0.5488116361, abs=1e-9
    )


def test_age_plus_reinforcement():
    # e^(−2) + 0.6·ln(1+3)·e^(−0.04·10) = 0.135335283 + 0.557556540 = 0.692891823
    got = retention(D, salience=1.0, age_days=100, access_count=3, days_since_access=10)
    assert got == pytest.approx(0.6928918232, abs=1e-9)


def test_cold_threshold_boundary():
    # e^(−1.60) = 0.2018965 (kept) ; e^(−1.62) = 0.1978987 (cold)
    keep = retention(D, salience=None, age_days=80, access_count=0, days_since_access=None)
    cold = retention(D, salience=None, age_days=81, access_count=0, days_since_access=None)
    assert keep == pytest.approx(0.2018965180, abs=1e-9) and not is_cold(D, keep)
    assert cold == pytest.approx(0.1978986991, abs=1e-9) and is_cold(D, cold)


def test_salience_and_breadth():
    # 0.5·e^(−0.2) + 0.6·ln 2·e^(−0.2)·(1 + 0.5·ln 3) = 0.409365 + 0.527540 = 0.936905
    d = DecaySettings(breadth_weight=0.5)
    got = retention(d, salience=0.5, age_days=10, access_count=1, days_since_access=5, distinct_actors=3)
    assert got == pytest.approx(0.9369049675, abs=1e-9)


def test_never_accessed_has_no_reinforcement_and_negative_age_clamps():
    assert retention(D, salience=1.0, age_days=-5, access_count=7, days_since_access=None) == 1.0


def test_toml_value_reaches_a_module(tmp_path: Path) -> None:
    """A value set only in config.toml changes what the decay module computes."""
    (tmp_path / "config.toml").write_text("[decay]\nlambda = 0.1\nsigma = 0.0\n")
    s = config.load(tmp_path, environ={"AIMEM_DECAY__SIGMA": "0"})
    got = retention(s.decay, salience=1.0, age_days=10, access_count=0, days_since_access=None)
    assert got == pytest.approx(2.718281828 ** -1.0)
    default = config.load(tmp_path / "other", environ={})
    assert retention(default.decay, salience=1.0, age_days=10, access_count=0, days_since_access=None) == pytest.approx(
        2.718281828 ** -0.2
    )
