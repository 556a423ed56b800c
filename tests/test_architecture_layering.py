"""Layering rules of issue 28: shipped migrations are frozen literals, the writer's batch path
flows one way, the bus sits below ingress batching, and no source module grows past 600 lines."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMON = REPO / "libs/aimem-common/src/aimem_common"
WRITER = REPO / "services/writer/src/aimem_writer"


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def test_migrations_are_literal_sql() -> None:
    """Every ``MIGRATION_N`` in ``db/schema.py`` is one string literal: no f-string, ``.format``,
    concatenation or helper call, so editing a helper can never change a shipped migration."""
    path = COMMON / "db/schema.py"
    found, bad = [], []
    for node in _tree(path).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name) and t.id.startswith("MIGRATION_")]
            if names:
                found += names
                if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                    bad += names
    assert found and not bad, f"migrations must be literal SQL strings (frozen once shipped): {bad}"
    for node in ast.walk(_tree(path)):
        assert not isinstance(node, ast.JoinedStr), f"f-string in schema.py line {node.lineno}"
        assert not (isinstance(node, ast.Attribute) and node.attr == "format"), (
            f".format in schema.py line {node.lineno}")


def test_schema_imports_no_run_time_helpers() -> None:
    """``db/schema.py`` imports nothing of aimem's: run-time SQL helpers live in ``db/trigram.py``."""
    for node in ast.walk(_tree(COMMON / "db/schema.py")):
        if isinstance(node, ast.ImportFrom):
            assert node.module == "__future__", f"schema.py imports {node.module}"
        assert not isinstance(node, ast.Import)
