"""Maintainer test fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from aimem_testing.seed import NOW, Seeder


@pytest.fixture
def seed(tmp_path: Path) -> Seeder:
    s = Seeder(tmp_path / "memory.sqlite", clock_start=NOW)
    try:
        yield s
    finally:
        s.close()
