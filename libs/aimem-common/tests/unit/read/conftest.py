"""Fixtures for read-side unit tests: a migrated DB populated with plain SQL (no NATS)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from aimem_common.read.pool import ReaderPool

_SUPPORT = Path(__file__).resolve().parents[2] / "support" / "sqlseed.py"
_spec = importlib.util.spec_from_file_location("aimem_test_sqlseed", _SUPPORT)
sqlseed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sqlseed)


@pytest.fixture
def seeder(tmp_path: Path):
    s = sqlseed.SqlSeeder(tmp_path / "db" / "memory.sqlite")
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def pool(seeder: SqlSeeder, tmp_path: Path):
    p = ReaderPool(tmp_path / "db" / "memory.sqlite", size=2, wait_s=2)
    try:
        yield p
    finally:
        p.close()
