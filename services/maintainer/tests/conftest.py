"""Maintainer test fixtures: a seeded store, the fake LLM servers and an LLM client on them."""

from __future__ import annotations

from pathlib import Path

import pytest

from aimem_common.telemetry import Telemetry
from aimem_maintainer import llm as llmmod
from aimem_maintainer.metrics import MaintMetrics
from aimem_testing.fake_llm import FakeLLM
from aimem_testing.seed import NOW, Seeder


@pytest.fixture
def seed(tmp_path: Path) -> Seeder:
    s = Seeder(tmp_path / "memory.sqlite", clock_start=NOW)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def fakes():
    """Two fake LLM servers on loopback (``aimem_testing.fake_llm``): (primary, fallback)."""
    with FakeLLM() as a, FakeLLM() as b:
        yield a, b


@pytest.fixture
def llm_client():
    """``make(settings) -> (LlmClient, MaintMetrics)``: the maintainer's client over the
    candidates ``settings`` configures, with fresh metrics to read its counters from."""

    def make(settings):
        metrics = MaintMetrics.create(Telemetry("maintainer"))
        return llmmod.LlmClient(llmmod.build_candidates(settings), metrics), metrics

    return make
