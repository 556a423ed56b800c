"""Fixtures for read-side unit tests: a migrated DB populated with plain SQL (no NATS)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aimem_common.readpool import ReaderPool
from aimem_testing.seed import Seeder



@pytest.fixture
def seeder(tmp_path: Path):
    s = Seeder(tmp_path / "db" / "memory.sqlite")
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def pool(seeder: Seeder, tmp_path: Path):
    p = ReaderPool(tmp_path / "db" / "memory.sqlite", size=2, wait_s=2)
    try:
        yield p
    finally:
        p.close()
