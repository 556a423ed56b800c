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
        COMMON / "config/loader.py",  # `load`, the one config-read path, and `child_environ`
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
# Words that are also some client's event name (Pi and OMP name events `input`, `context`,
# `tool_result`) but mean other things elsewhere (an embedding request's `input`, a transcript's
# `tool_result` block).
_NOT_CLIENT_SPECIFIC = {"event", "input", "context", "tool_result"}


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
    graph = {m: {i for i in module_imports(f, modules) if i != m} for m, f in modules.items()}
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


def module_imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The ``modules`` that ``path`` imports, inside functions too. ``from pkg import sub`` is an
    import of the module ``pkg.sub``, not of ``pkg`` (which Python loads first as its parent
    anyway): otherwise every package that lists its own modules would be a circle."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names} & set(modules)
            out |= subs
            if len(subs) < len(node.names) and node.module in modules:
                out.add(node.module)
    return out


# Packages whose modules still import each other in a circle (through an import inside a
# function or under TYPE_CHECKING); an entry may only leave this list.
CIRCLES_KNOWN = {"aimem_query", "aimem_ingress"}


def test_no_import_circle() -> None:
    """No module of the CLI, ``aimem_common`` or a service imports one that imports it back, not
    even from inside a function: such a pair is one module in two files."""
    packages = {"aimem_cli": CLI, "aimem_common": COMMON, **SERVICES}
    found = {pkg: cycles for pkg, root in packages.items() if (cycles := import_cycles(root, pkg))}
    assert {pkg: c for pkg, c in found.items() if pkg not in CIRCLES_KNOWN} == {}
    assert CIRCLES_KNOWN <= set(found), f"no circle left, drop from CIRCLES_KNOWN: {CIRCLES_KNOWN - set(found)}"


def test_import_circle_guard_catches_a_lazy_circle(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg import a, b\n")  # a package listing its modules: no circle
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.c import g\n")
    (pkg / "c.py").write_text("from pkg.a import x\n")
    assert import_cycles(pkg, "pkg") == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]


def test_cli_commands_import_no_circle() -> None:
    """A command module never imports one that imports it back (``exporting`` and
    ``importing`` share ``importsend`` instead)."""
    cycles = [c for c in import_cycles(CLI, "aimem_cli") if any(".commands." in m for m in c)]
    assert not cycles, cycles


# One search request (issue 28): ``aimem_common/search/params.py`` declares every search
# parameter, its bounds and its docs; the interfaces take that model (REST body and query
# string) or subclass it (MCP), and none declares a search parameter of its own.
# Names only a search has (``limit``, ``project``, ``explain``... are other requests' too).
SEARCH_ONLY_FIELDS = ("global_", "include_superseded", "scopes")


def test_mcp_memory_query_args_are_the_search_params() -> None:
    """The MCP ``memory_query`` arguments subclass ``SearchParams`` and redeclare only ``query``
    (required there), from the same ``QUERY_FIELD`` declaration."""
    from aimem_common.search.params import SearchParams
    from aimem_mcp.tools.memory_query import Args

    assert issubclass(Args, SearchParams)
    own = set(Args.__annotations__)
    assert own <= {"query"}, f"memory_query declares its own search parameters: {own - {'query'}}"
    base, mine = SearchParams.model_fields, Args.model_fields
    assert list(mine) == list(base)
    for name, field in mine.items():
        for attr in ("description", "validation_alias", "alias", "metadata"):
            if name == "query" and attr == "metadata":
                continue  # the tool adds min_length=1 to the shared bounds
            assert getattr(field, attr) == getattr(base[name], attr), (name, attr)
    assert {type(m).__name__ for m in base["query"].metadata} <= {type(m).__name__ for m in mine["query"].metadata}


def test_rest_search_parameters_come_from_the_one_model(tmp_path: Path) -> None:
    """``GET /api/v1/search`` lists exactly ``SearchParams``'s fields, with its docs, and the
    ``POST`` body is a subclass adding none."""
    from aimem_common.config import Settings
    from aimem_common.search.params import SearchParams
    from aimem_query.api.search import SearchRequest
    from aimem_query.app import create_app

    get = create_app(Settings(data_dir=tmp_path)).openapi()["paths"]["/api/v1/search"]["get"]
    declared = {f.alias or name: f for name, f in SearchParams.model_fields.items()}
    assert [p["name"] for p in get["parameters"]] == list(declared)
    for p in get["parameters"]:
        assert p.get("description") == declared[p["name"]].description, p["name"]
    assert issubclass(SearchRequest, SearchParams) and not set(SearchRequest.__annotations__)


def _declared_search_fields(path: Path) -> list[str]:
    """Search parameters ``path`` declares itself: class fields or function parameters named as one."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ClassDef):
            out += [f"{node.name}.{s.target.id}" for s in node.body if isinstance(s, ast.AnnAssign)
                    and isinstance(s.target, ast.Name) and s.target.id in SEARCH_ONLY_FIELDS]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out += [f"{node.name}({a.arg})" for a in [*node.args.args, *node.args.kwonlyargs]
                    if a.arg in SEARCH_ONLY_FIELDS]
    return out


def test_no_interface_declares_a_search_parameter_of_its_own() -> None:
    """No service module declares ``global_``, ``include_superseded`` or ``scopes`` as a model
    field or a route parameter: the search model is their one place. (The writer's transaction
    ``scopes`` are the projects a batch touches, not search parameters. The web form and the
    ``aimem search`` flags are made from ``param_specs()``: ``services/query/tests/unit/
    test_web_search_form.py`` and ``cli/tests/test_search_flags.py`` hold them to the model.)"""
    found = {}
    for name, src in SERVICES.items():
        for f in py_files(src):
            if name == "aimem_writer":
                continue
            if (names := _declared_search_fields(f)):
                found[str(f.relative_to(REPO))] = names
    assert found == {}, f"declare search parameters in aimem_common/search/params.py only: {found}"


def test_search_results_stay_typed_until_the_edge() -> None:
    """``memory_query`` and ``Searcher.search`` return a ``SearchResult`` of ``Hit``/``RawHit``;
    inside ``search/`` only ``result.py`` turns it into JSON (the interfaces call ``to_json``)."""
    import typing

    from aimem_common.search.query import memory_query
    from aimem_common.search.result import SearchResult
    from aimem_common.search.service import Searcher

    assert typing.get_type_hints(memory_query)["return"] is SearchResult
    assert Searcher.search.__annotations__["return"] in (SearchResult, "SearchResult")
    hints = typing.get_type_hints(SearchResult)
    assert "Hit" in str(hints["hits"]) and "RawHit" in str(hints["raw_hits"])
    serialise = [f"{f.relative_to(REPO)}:{n.lineno}" for f in py_files(SEARCH) if f.name != "result.py"
                 for n in ast.walk(ast.parse(f.read_text())) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == "to_json"]
    assert serialise == [], f"search/ serialises hits before the edge: {serialise}"
