"""Query-service test support: the SQL seeder (shared with the read-side unit tests)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_SUPPORT = Path(__file__).resolve().parents[3] / "libs" / "aimem-common" / "tests" / "support" / "sqlseed.py"
_spec = importlib.util.spec_from_file_location("aimem_test_sqlseed", _SUPPORT)
sqlseed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sqlseed)
