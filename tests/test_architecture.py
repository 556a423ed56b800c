"""Import boundaries (STYLE.md "Tests"): services import only aimem_common, never each other;
the CLI talks to services over HTTP/NATS or through aimem_common and never imports one; test
support (aimem_testing) is imported by no shipped package; only the writer opens the
read-write DB; nobody reads os.environ but config."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from aimem_common.config import SERVICE_MODULES

REPO = Path(__file__).resolve().parents[1]
# Package name -> its source directory (services/<service>/src/<package>).
SERVICES = {module: REPO / "services" / name / "src" / module for name, module in SERVICE_MODULES.items()}
COMMON = REPO / "libs/aimem-common/src/aimem_common"
CLI = REPO / "cli/src/aimem_cli"
TESTING = "aimem_testing"


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            # importlib.import_module("pkg") / __import__("pkg") with a literal name
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in {"import_module", "__import__"} and isinstance(node.args[0].value, str):
                out.add(node.args[0].value)
    return out


def reads_environ(path: Path) -> bool:
    """True if the code (not its docstrings) touches ``os.environ`` or ``os.getenv``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv"}:
            if isinstance(node.value, ast.Name) and node.value.id == "os":
                return True
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            if any(a.name in {"environ", "getenv"} for a in node.names):
                return True
    return False


def py_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def test_services_never_import_each_other() -> None:
    bad = []
    for name, root in SERVICES.items():
        for f in py_files(root):
            for imp in imports_of(f):
                top = imp.split(".")[0]
                if top in SERVICES and top != name:
                    bad.append(f"{f.relative_to(REPO)} imports {imp}")
    assert bad == []


def test_every_service_package_is_checked() -> None:
    assert all(root.is_dir() for root in SERVICES.values()), SERVICES


def test_cli_imports_no_service() -> None:
    """The CLI reaches a service over HTTP/NATS, or runs it as a child process by module name."""
    bad = [
        f"{f.relative_to(REPO)} imports {imp}"
        for f in py_files(CLI)
        for imp in imports_of(f)
        if imp.split(".")[0] in SERVICES
    ]
    assert bad == []


def test_shipped_code_never_imports_test_support() -> None:
    bad = [
        f"{f.relative_to(REPO)} imports {imp}"
        for root in [COMMON, CLI, *SERVICES.values()]
        for f in py_files(root)
        for imp in imports_of(f)
        if imp.split(".")[0] == TESTING
    ]
    assert bad == []


def test_common_imports_no_service() -> None:
    bad = [
        f"{f.relative_to(REPO)} imports {imp}"
        for f in py_files(COMMON)
        for imp in imports_of(f)
        if imp.split(".")[0] in SERVICES or imp.split(".")[0] == "aimem_cli"
    ]
    assert bad == []


def test_only_writer_opens_db_read_write() -> None:
    bad = []
    for root in [*[r for n, r in SERVICES.items() if n != "aimem_writer"], CLI]:
        for f in py_files(root):
            text = f.read_text()
            if "open_writer" in text:
                bad.append(str(f.relative_to(REPO)))
    # The CLI's `restore` verifies (and migrates) the staged copy, never the live DB, and
    # refuses while a writer runs.
    allowed = {"cli/src/aimem_cli/commands/disk.py"}
    assert [b for b in bad if b not in allowed] == []


def test_no_environ_reads_outside_config() -> None:
    allowed = {
        COMMON / "config.py",
        CLI / "hookclient.py",  # the hot-path hook client reads its switches without pydantic
        CLI / "hookconfig.py",  # ... and AIMEM_INGRESS_URL / AIMEM_DATA_DIR / the token
        CLI / "commands/up.py",  # passes the environment on to its children
        CLI / "managed.py",  # `aimem run` passes the environment (plus AIMEM_RUN_ID) on to the agent it launches
    }
    bad = []
    for root in [COMMON, CLI, *SERVICES.values()]:
        for f in py_files(root):
            if f in allowed:
                continue
            if reads_environ(f):
                bad.append(str(f.relative_to(REPO)))
    assert bad == []


# -- the scope lookup is written once -------------------------------------------------------
# A read of the workspaces/projects tables (by name, by id, a listing or a count), or a join
# that picks a scope by its name, belongs in ``aimem_common/read/scopes.py`` (the writer calls
# those functions on its own connection). Writes (INSERT/UPDATE/DELETE) stay with the writer.
_SCOPE_READ = re.compile(r"(?<!DELETE )\bFROM\s+(?:workspaces|projects)\b", re.I)
_SCOPE_BY_NAME = re.compile(r"\bJOIN\s+(?:workspaces|projects)\s+(\w+)\s+ON\b.*?\b\1\.name\s*=", re.I | re.S)
READ_LAYER = COMMON / "read"


def sql_strings(path: Path) -> list[str]:
    """Every string literal of ``path`` (implicit concatenations joined; f-string parts joined)."""
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            out.append(" ".join(v.value for v in node.values if isinstance(v, ast.Constant)))
    return out


def scope_sql_copies(root: Path) -> list[str]:
    bad = []
    for f in py_files(root):
        if READ_LAYER in f.parents:
            continue
        name = f.relative_to(REPO) if REPO in f.parents else f.name
        hits = [s for s in sql_strings(f) if _SCOPE_READ.search(s) or _SCOPE_BY_NAME.search(s)]
        # an f-string's literal part is also a Constant node: keep the longest text of each
        hits = [s for s in hits if not any(s != t and s in t for t in hits)]
        bad.extend(f"{name}: {' '.join(s.split())[:100]}" for s in dict.fromkeys(hits))
    return bad


def test_scope_lookup_sql_only_in_the_read_layer() -> None:
    assert [b for root in [COMMON, CLI, *SERVICES.values()] for b in scope_sql_copies(root)] == []


def test_scope_lookup_guard_catches_a_copy(tmp_path: Path) -> None:
    (tmp_path / "copy.py").write_text(
        'SQL = ("SELECT p.id FROM projects p JOIN workspaces w ON w.id = p.workspace_id"\n'
        '       " WHERE w.name = ? AND p.name = ?")\n'
        'BY_NAME = f"SELECT g.path FROM pages g JOIN projects pr ON pr.id = g.project_id WHERE pr.name = {1}"\n'
        'OK = "DELETE FROM projects WHERE id = ?"\n')
    assert [b.split(": ", 1)[1][:40] for b in scope_sql_copies(tmp_path)] == [
        "SELECT p.id FROM projects p JOIN workspa", "SELECT g.path FROM pages g JOIN projects"]


READ = COMMON / "read"
SEARCH = COMMON / "search"
SEARCH_MAX_LINES = 400
# What a stream module may import from aimem_common: the stream contract, the shared SQL, the
# question, fusion helpers, the trigram-matched turns, errors and the read layer. Never another
# stream, the hit/raw assembly, the query or the service layer (event loop, bus, embedder).
STREAM_MAY_IMPORT = ("aimem_common.search.stream", "aimem_common.search.sql", "aimem_common.search.question",
                     "aimem_common.search.fusion", "aimem_common.search.observations", "aimem_common.errors",
                     "aimem_common.models", "aimem_common.read")


def stream_may_import(imp: str) -> bool:
    """True for a stdlib/third-party import or one of ``STREAM_MAY_IMPORT`` (a module or a name in it)."""
    return not imp.startswith("aimem_common") or any(imp == m or imp.startswith(m + ".") for m in STREAM_MAY_IMPORT)


def async_defs(path: Path) -> list[str]:
    return [n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.AsyncFunctionDef)]


def test_read_layer_is_sync_functions_of_a_connection() -> None:
    """``read/`` holds no ``async def``: the event-loop side of reading lives in ``search/`` and ``readpool``."""
    bad = [f"{f.relative_to(REPO)}: {name}" for f in py_files(READ) for name in async_defs(f)]
    assert bad == []


def test_read_layer_never_imports_search() -> None:
    """Search is built on the read layer, never the other way round."""
    bad = [f"{f.relative_to(REPO)} imports {imp}" for f in py_files(READ) for imp in imports_of(f)
           if imp.startswith("aimem_common.search")]
    assert bad == []


def test_no_search_module_over_400_lines() -> None:
    sizes = {str(f.relative_to(REPO)): len(f.read_text().splitlines()) for f in py_files(SEARCH)}
    assert sizes and {f: n for f, n in sizes.items() if n > SEARCH_MAX_LINES} == {}


def test_stream_modules_import_only_what_they_need() -> None:
    streams = [f for f in py_files(SEARCH / "streams") if f.name != "__init__.py"]
    assert len(streams) >= 9, streams
    bad = [f"{f.relative_to(REPO)} imports {imp}" for f in streams for imp in imports_of(f)
           if not stream_may_import(imp)]
    assert bad == []


def test_stream_import_guard_catches_a_stream_importing_another(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("from aimem_common.search.streams import fts\n"
                                     "from aimem_common.search.service import Searcher\n"
                                     "from aimem_common.search.sql import marks\n")
    imports = imports_of(tmp_path / "bad.py")
    assert sorted(i for i in imports if not stream_may_import(i)) == [
        "aimem_common.search.service", "aimem_common.search.service.Searcher", "aimem_common.search.streams",
        "aimem_common.search.streams.fts"]


# One place per agent client (issue 28): what aimem knows about a client lives in
# `aimem_common/clients/`, stdlib only, because the hook client imports it on every hook call.
CLIENTS_DIR = COMMON / "clients"
HOOK_CLIENT_STDLIB_MODULES = (CLIENTS_DIR, COMMON / "kinds.py", COMMON / "text.py")
# Native event names that are also ordinary words elsewhere (a kind, a plugin hook argument).
_NOT_CLIENT_SPECIFIC = {"event"}


def _stdlib_or(allowed: tuple[str, ...], imp: str) -> bool:
    top = imp.split(".")[0]
    return top in sys.stdlib_module_names or top == "__future__" or imp.startswith(allowed)


def test_hook_client_support_is_stdlib_only() -> None:
    """The client tables, the kinds and the text helpers import only the stdlib and each other."""
    allowed = ("aimem_common.clients", "aimem_common.kinds", "aimem_common.text")
    bad = []
    for root in HOOK_CLIENT_STDLIB_MODULES:
        for f in [root] if root.is_file() else py_files(root):
            bad += [f"{f.relative_to(REPO)} imports {imp}" for imp in imports_of(f) if not _stdlib_or(allowed, imp)]
    assert not bad, bad


def test_hook_client_imports_no_pydantic_nor_typer() -> None:
    """``aimem hook`` runs on every agent event: pydantic alone costs ~100 ms to import."""
    code = ("import sys, aimem_cli.hookclient; "
            "print(' '.join(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'typer', 'httpx')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "", f"aimem_cli.hookclient imports {out.strip()}"


def _string_constants(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]


def client_event_names_outside(roots: list[Path]) -> list[str]:
    from aimem_common.clients import CLIENTS
    from aimem_common.kinds import ObservationKind

    native = {name for c in CLIENTS.values() if c.name != "generic" for name in c.events}
    native -= {k.value for k in ObservationKind} | _NOT_CLIENT_SPECIFIC
    found = []
    for root in roots:
        for f in py_files(root):
            if CLIENTS_DIR in f.parents:
                continue
            found += [f"{f.relative_to(REPO)}: {text!r}" for text in _string_constants(f)
                      if text.casefold() in native]
    return found


def test_client_event_names_only_in_the_clients_package() -> None:
    """A client's native hook event names are spelled in `aimem_common/clients/` only: the
    ingress mapping, the hook client and the installers read them from there."""
    roots = [COMMON, CLI, *SERVICES.values()]
    assert not client_event_names_outside(roots), client_event_names_outside(roots)


def test_client_event_guard_catches_a_copy(tmp_path: Path) -> None:
    (tmp_path / "copy.py").write_text('EVENTS = ("sessionStart", "beforeSubmitPrompt")\n')
    global REPO
    saved, REPO = REPO, tmp_path
    try:
        assert len(client_event_names_outside([tmp_path])) == 2
    finally:
        REPO = saved


def import_cycles(root: Path, package: str) -> list[list[str]]:
    """Cycles among ``package``'s modules, counting imports inside functions too."""
    def name(f: Path) -> str:
        rel = f.relative_to(root).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        return ".".join((package, *parts))

    modules = {name(f): f for f in py_files(root)}
    graph = {m: {i for i in imports_of(f) if i in modules and i != m} for m, f in modules.items()}
    cycles, done = [], set()

    def walk(m: str, path: list[str]) -> None:
        for n in sorted(graph[m]):
            if n in path:
                cycles.append(path[path.index(n):] + [n])
            elif n not in done:
                walk(n, path + [n])
        done.add(m)

    for m in sorted(graph):
        if m not in done:
            walk(m, [m])
    return cycles


def test_cli_commands_import_no_circle() -> None:
    """A command module never imports one that imports it back (``exporting`` and
    ``importing`` share ``importsend`` instead)."""
    cycles = [c for c in import_cycles(CLI, "aimem_cli") if any(".commands." in m for m in c)]
    assert not cycles, cycles
