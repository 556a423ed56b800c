"""What every operator command shares.

The --server/--token/--json/--workspace/--project options, the HTTP client to the query
service, scope defaults, and table/JSON output.

A failure prints one line ``aimem: <reason>`` on stderr and exits 1 (``fail``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from aimem_cli.client import CliError, Client
from aimem_common import config

ServerOpt = typer.Option(None, "--server", help="Query service URL (default: settings.server_url).")
TokenOpt = typer.Option(None, "--token", help="Bearer token (default: AIMEM_AUTH__TOKEN, config.toml, the data dir's "
                        "auth/token, else the hook client's token).")
JsonOpt = typer.Option(False, "--json", help="Print JSON instead of a table.")
WsOpt = typer.Option(None, "--workspace", "-w", help="Workspace (default: settings.workspace_default).")
PjOpt = typer.Option(None, "--project", "-p", help="Project (default: the one this checkout's sessions are filed "
                     "under: .aimem.toml, else the server's project for its repository: api-2 for a 2nd 'api').")


def fail(message: str) -> None:
    """Print ``aimem: <message>`` on stderr and exit 1."""
    typer.echo(f"aimem: {message}", err=True)
    raise typer.Exit(1)


# The highest port base whose whole span of service ports (config.PORT_OFFSETS) is a TCP port.
MAX_PORT_BASE = 65535 - max(config.PORT_OFFSETS.values())


def check_port_base(value: int | None) -> int | None:
    """Typer callback of every ``--port-base``: None (not given) or 1..``MAX_PORT_BASE`` (the
    stack uses that port and the next ones); anything else is one line and exit 1."""
    if value is not None and not 1 <= value <= MAX_PORT_BASE:
        fail(f"--port-base {value} is out of range: the stack uses it and the "
             f"{max(config.PORT_OFFSETS.values())} ports after it, so it must be 1..{MAX_PORT_BASE}")
    return value


def port_base_option(help: str) -> Any:
    """The ``--port-base`` option (default: not given), checked by ``check_port_base``."""
    return typer.Option(None, "--port-base", help=help, callback=check_port_base)


def load_settings(data_dir: Path | None = None) -> config.Settings:
    try:
        return config.load(data_dir, check_writable=False)
    except config.ConfigError as exc:
        fail(exc.message)
        raise  # unreachable


@contextmanager
def client(server: str | None, token: str | None, *, forbidden: str | None = None) -> Iterator[Client]:
    """Yield a ``Client`` for the configured server; turn ``CliError`` into exit 1 (its one
    line, or ``forbidden`` for an answer of HTTP 403 when given)."""
    s = load_settings()
    c = Client(server or s.server_url, token if token is not None else default_token(s))
    try:
        yield c
    except CliError as exc:
        fail(forbidden if forbidden is not None and exc.status == 403 else str(exc))
    finally:
        c.close()


def default_token(settings: config.Settings) -> str | None:
    """The bearer token of a command without ``--token``: the settings' root token (env,
    ``config.toml``, else ``<data_dir>/auth/token``), else the one the hook client sends
    (``aimem_cli.hookconfig.client_config``), so commands run outside the server's data dir
    still authenticate."""
    if settings.auth.token:
        return settings.auth.token
    from aimem_cli.hookconfig import client_settings

    return client_settings()[1]["token"]


def scope(workspace: str | None, project: str | None, server: str | None = None,
          token: str | None = None) -> tuple[str, str]:
    """The workspace/project a command means: the options, else this checkout's project.

    ``--project`` wins as given. Otherwise the project is the one the hooks' events from this
    directory land in: its identity (``aimem_cli.identity.resolve``: ``.aimem.toml`` marker,
    else the repository with its root, ``origin`` and ``.git/aimem-id``, else the
    directory's name) is sent to the query service (``GET /api/v1/projects/resolve``, one
    round trip, at ``server`` with ``token`` as ``client`` would), which answers the
    project holding those keys — ``api-2`` for a second repository named ``api`` — or, for
    a checkout it has never seen, the name its first event would create (the local name
    unless another repository has it). A marker-named project or a plain directory (no
    keys) is its name: no round trip. A non-root caller that may not read the answer keeps
    the local name (its read then fails as any unreadable project does). A failed round
    trip is one line and exit 1 (``fail``).
    """
    from aimem_cli.identity import resolve

    s = load_settings()
    here = resolve(Path.cwd())
    ws = workspace or here.workspace or s.workspace_default
    if project:
        return ws, project
    return ws, assigned_project(here, ws, here.project or Path.cwd().name, server, token)[0]


def assigned_project(here: Any, workspace: str, local: str, server: str | None,
                     token: str | None) -> tuple[str, bool | None]:
    """The project the server files events with identity ``here`` (an
    ``aimem_cli.identity.Identity``) under in ``workspace``, ``local`` being its local name
    (see ``scope``), as ``(name, exists)``: ``(local, None)`` without identity keys or for a
    marker-named project (found by name; nothing asked), else one ``GET
    /api/v1/projects/resolve`` (``exists`` False: an identity the server has not seen, named
    as its first event would create it); ``(local, None)`` when a non-root caller may not
    read the answer (404 ``not_found``). Any other failure is one line and exit 1."""
    if here.explicit or not (here.root or here.origin or here.repo_id):
        return local, None
    keys = {**here.as_query(), "workspace": workspace, "project": local}
    with client(server, token) as c:
        try:
            answer = c.get("/api/v1/projects/resolve", **keys)
        except CliError as exc:
            if exc.status == 404 and exc.code == "not_found":
                return local, None
            raise
    return str(answer["project"]), bool(answer["exists"])


def project_prefix(workspace: str, project: str) -> str:
    """Return the ``/api/v1`` prefix of one project's routes (names URL-quoted)."""
    from urllib.parse import quote

    return f"/api/v1/workspaces/{quote(workspace, safe='')}/projects/{quote(project, safe='')}"


def emit(data: Any, as_json: bool, human: Callable[[Any], None]) -> None:
    if as_json:
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    else:
        human(data)


def table(rows: list[dict[str, Any]], cols: list[str], empty: str = "(none)") -> None:
    """Print ``rows`` as an aligned text table with the given columns."""
    if not rows:
        typer.echo(empty)
        return
    cells = [[_cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    typer.echo("  ".join(c.upper().ljust(w) for c, w in zip(cols, widths)).rstrip())
    for row in cells:
        typer.echo("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.3f}"
    text = str(v).replace("\n", " ")
    return text if len(text) <= 80 else text[:77] + "..."


