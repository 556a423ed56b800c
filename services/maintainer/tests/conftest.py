"""Maintainer test fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from aimem_common.testing.seedstore import Seed


@pytest.fixture
def seed(tmp_path: Path) -> Seed:
    s = Seed(tmp_path / "memory.sqlite")
    try:
        yield s
    finally:
        s.conn.close()
