"""Layering rules of issue 28: frozen migrations, one-way writer and bus, short modules.

Shipped migrations are frozen literals, the writer's batch path flows one way, the bus sits
below ingress batching, no source module grows past 600 lines, and every module says what it
is in its docstring's first line."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMON = REPO / "libs/aimem-common/src/aimem_common"
WRITER = REPO / "services/writer/src/aimem_writer"


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


MIGRATIONS_DIR = COMMON / "db/migrations"


def _migration_modules() -> list[Path]:
    return sorted(p for p in MIGRATIONS_DIR.glob("m*.py"))


def test_migrations_are_literal_sql() -> None:
    """Each ``db/migrations/mNN_*.py`` assigns ``SQL`` once, from one string literal: no f-string,
    ``.format``, concatenation or helper call, so editing a helper can never change a shipped
    migration."""
    modules = _migration_modules()
    assert len(modules) >= 16, modules
    for path in modules:
        assigned = []
        for node in _tree(path).body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                assigned += [t.id for t in targets if isinstance(t, ast.Name)]
                assert isinstance(node.value, ast.Constant) and isinstance(node.value.value, str), (
                    f"{path.name} line {node.lineno}: a migration is one literal SQL string (frozen once shipped)")
        assert assigned == ["SQL"], f"{path.name} assigns {assigned}: one ``SQL`` literal per migration module"
        for node in ast.walk(_tree(path)):
            assert not isinstance(node, ast.JoinedStr), f"f-string in {path.name} line {node.lineno}"
            assert not (isinstance(node, ast.Attribute) and node.attr == "format"), (
                f".format in {path.name} line {node.lineno}")


def test_migrations_import_no_run_time_helpers() -> None:
    """A migration module imports nothing (run-time SQL helpers live in ``db/trigram.py``), and
    ``db/schema.py`` imports only the migration modules it puts in order."""
    for path in _migration_modules():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom):
                assert node.module == "__future__", f"{path.name} imports {node.module}"
            assert not isinstance(node, ast.Import), f"{path.name} imports"
    for node in ast.walk(_tree(COMMON / "db/schema.py")):
        if isinstance(node, ast.ImportFrom):
            assert node.module in ("__future__", "aimem_common.db.migrations"), f"schema.py imports {node.module}"
        assert not isinstance(node, ast.Import)


def test_every_migration_module_is_in_the_list_once() -> None:
    """``schema.MIGRATIONS`` is the one place migrations are ordered: it lists every module under
    ``db/migrations/`` exactly once, under the number its file name gives (``mNN_...``)."""
    from aimem_common.db import schema
    from aimem_common.db.migrations import __name__ as package

    listed = dict(schema.MIGRATIONS)
    assert len(listed) == len(schema.MIGRATIONS), "a version is listed twice"
    by_file = {int(p.stem[1:3]): importlib.import_module(f"{package}.{p.stem}").SQL for p in _migration_modules()}
    assert sorted(by_file) == sorted(listed), (sorted(by_file), sorted(listed))
    for version, sql in by_file.items():
        assert listed[version] is sql, f"MIGRATIONS[{version}] is not m{version:02d}_*.SQL"


def _writer_imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("aimem_writer"):
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("aimem_writer"))
    return out


# The consumer's parts, each one job; control flows from the consumer into them, never back.
CONSUMER_PARTS = ("pacing", "inplace", "storefaults", "settlement", "gitcheckpoints", "messages",
                  "commands", "ledger", "batch")


def test_the_consumer_s_parts_never_call_back_into_it() -> None:
    """No part of the batch path imports ``aimem_writer.consumer``, and the consumer hands
    ``InPlaceRetry`` none of its own methods (consumer → inplace → consumer was a bounce)."""
    for name in CONSUMER_PARTS:
        assert "aimem_writer.consumer" not in _writer_imports(WRITER / f"{name}.py"), f"{name}.py imports the consumer"
    tree = _tree(WRITER / "consumer.py")
    own = {n.name for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "Consumer"
           for n in c.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "InPlaceRetry":
            passed = {a.attr for arg in [*node.args, *(k.value for k in node.keywords)] for a in ast.walk(arg)
                      if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) and a.value.id == "self"}
            assert not passed & own, f"the consumer passes its own methods to InPlaceRetry: {passed & own}"


def test_batch_types_and_ledger_sql_have_one_home() -> None:
    """Batch types are defined in ``commands.py`` only, and ``ingest_keys``/``dead_letters``
    SQL of the batch path lives in ``ledger.py`` (``ops/`` handlers keep their own)."""
    for path in WRITER.glob("*.py"):
        tree = _tree(path)
        if path.name != "commands.py":
            defined = {c.name for c in tree.body if isinstance(c, ast.ClassDef)}
            assert not defined & {"Incoming", "Outcome", "BatchResult"}, path.name
        if path.name != "ledger.py":
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lstrip().upper()\
                        .startswith(("INSERT", "UPDATE", "SELECT", "DELETE")):
                    assert not any(t in node.value for t in ("ingest_keys", "dead_letters")), (
                        f"{path.name}: ledger SQL belongs in ledger.py")


def test_writer_modules_stay_under_600_lines() -> None:
    """A module over 600 lines is a module doing several jobs (STYLE.md "Layout")."""
    long = {str(p.relative_to(WRITER)): n for p in WRITER.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}, f"split these by job: {long}"


BUS = COMMON / "bus"


def test_the_bus_sits_below_ingress_batching() -> None:
    """``aimem_common/bus/`` never imports ``aimem_common.bundles`` (the Gatherer uses the bus,
    not the reverse), and ``bus.py`` is a package of one-job modules, none over 600 lines."""
    assert BUS.is_dir() and not (COMMON / "bus.py").exists()
    for path in BUS.glob("*.py"):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("aimem_common.bundles"), f"bus/{path.name} imports bundles"
                assert not (node.module == "aimem_common" and any(a.name == "bundles" for a in node.names))
        assert len(path.read_text().splitlines()) <= 600, f"bus/{path.name} is over 600 lines"
    assert "aimem_common.bus" in {n.module for n in ast.walk(_tree(COMMON / "bundles.py"))
                                  if isinstance(n, ast.ImportFrom)}


def test_no_source_file_over_600_lines() -> None:
    """No shipped source file (libraries, services, CLI) is over 600 lines, migrations included:
    a file that long does several jobs and a reader cannot change one rule without reading it all."""
    sources = [p for root in ("libs", "services", "cli") for p in (REPO / root).glob("**/src/**/*.py")
               if ".venv" not in p.parts and "node_modules" not in p.parts]
    assert len(sources) > 100, len(sources)
    long = {str(p.relative_to(REPO)): n for p in sources if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}, f"split these by job: {long}"


def _shipped_sources() -> list[Path]:
    return [p for root in ("libs", "services", "cli") for p in (REPO / root).glob("**/src/**/*.py")
            if ".venv" not in p.parts and "node_modules" not in p.parts]


def multi_line_summaries(paths: list[Path]) -> list[str]:
    """Modules whose docstring does not start with a one-line summary (a first paragraph of one
    line); the reasons and the measurements belong below it."""
    bad = []
    for path in paths:
        doc = ast.get_docstring(_tree(path), clean=True)
        lines = (doc or "").splitlines()
        if len(lines) > 1 and lines[1].strip():
            bad.append(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}: {lines[0]}")
    return bad


def test_every_module_docstring_starts_with_one_line() -> None:
    """A reader wants one line of what a module is before the why (issue 28)."""
    sources = _shipped_sources()
    assert len(sources) > 100, len(sources)
    assert multi_line_summaries(sources) == []


def test_the_summary_guard_catches_a_wrapped_first_line(tmp_path: Path) -> None:
    wrapped, fine = tmp_path / "wrapped.py", tmp_path / "fine.py"
    wrapped.write_text('"""The writer\'s ledger SQL: ``ingest_keys`` and\n``dead_letters``."""\n')
    fine.write_text('"""The writer\'s ledger SQL.\n\n``ingest_keys`` and\n``dead_letters``.\n"""\n')
    assert multi_line_summaries([wrapped, fine]) == [f"{wrapped}: The writer's ledger SQL: ``ingest_keys`` and"]
