"""``aimem bootstrap [PATH]``: write a repository's first overview page (``bootstrap.md``).

The page comes from ``aimem_cli.bootstrap`` (rule-based: README, docs, manifests, git
log) and is written through the query service's ``/admin/pages`` like any page: a re-run
supersedes it and the earlier version stays in the history (git and retired versions).
The project is the one the hook client would use for PATH (``.aimem.toml``, else the
folder name); ``capture = false`` refuses. ``--print`` shows the page without writing.
When the maintainer answers on the bus with a configured LLM (job ``bootstrap``), its
introduction (summary, architecture, how to work) goes above the facts; otherwise — no
LLM, no bus, a timeout — the page is the rule-based one (``--no-llm`` skips the asking).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from aimem_cli.bootstrap import PAGE_PATH, render, survey, with_introduction
from aimem_cli.importer import project_identity


def register(app: typer.Typer) -> None:
    """Add ``bootstrap`` to the CLI."""
    from aimem_cli.commands.base import JsonOpt, ServerOpt, TokenOpt, assigned_project, client, emit, fail

    @app.command("bootstrap")
    def bootstrap(
        path: Path = typer.Argument(Path("."), help="The repository (default: the current directory)."),
        workspace: str = typer.Option(None, "--workspace", help="Default: from .aimem.toml, else 'default'."),
        project: str = typer.Option(None, "--project", help="Default: the project hooks use for PATH."),
        print_only: bool = typer.Option(False, "--print", help="Print the page; write nothing."),
        llm: bool = typer.Option(True, "--llm/--no-llm", help="Ask the maintainer's LLM for an introduction."),
        nats: str = typer.Option(None, "--nats", help="NATS URL of the maintainer (default: settings)."),
        server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
    ) -> None:
        """Write a first overview page of a repository from its README, manifests and git history."""
        if not path.is_dir():
            fail(f"{path} is not a directory")
        title, body = render(survey(path))
        source = "aimem bootstrap"
        intro = introduction(body, nats) if llm else None
        if intro:
            body, source = with_introduction(body, intro), "aimem bootstrap (rule-based + LLM)"
        if print_only:
            typer.echo(json.dumps({"path": PAGE_PATH, "title": title, "body": body}) if as_json else body)
            return
        ident = project_identity(str(path.resolve()))
        if ident is not None and not ident.capture and not project:
            fail(f"{path} says capture = false in .aimem.toml; nothing is written")
        ws = workspace or (ident.workspace if ident else None) or "default"
        pj = project or (ident.project if ident else None)
        if not pj:
            fail("no project: pass --project")
        if not project:  # the project the hooks' events from PATH land in (`api-2` for a second `api`)
            local = pj
            pj, exists = assigned_project(ident, ws, local, server, token)
            if exists is False and pj != local:
                # A page written now would make a project without this checkout's keys, which
                # its first session would not find (it would get yet another name).
                fail(f"{path.resolve()} has no project yet ({ws}/{local} is another repository's): "
                     "run an agent session there first, or pass --project")
        payload = {"workspace": ws, "project": pj, "path": PAGE_PATH, "title": title, "body": body,
                   "frontmatter": {"tags": ["bootstrap", "overview"], "source": source}}
        with client(server, token) as c:
            data = c.post("/admin/pages", payload)
        emit(data, as_json, lambda d: typer.echo(
            f"{'created' if d.get('created') else ('updated' if d.get('changed') else 'unchanged')} "
            f"{ws}/{pj}:{PAGE_PATH} (page {d.get('page_id')}, version {d.get('version')})"))


def introduction(overview: str, nats_url: str | None, timeout_s: float = 120.0) -> dict | None:
    """The maintainer's LLM introduction of ``overview``, or None (no LLM, no bus, any failure)."""
    import asyncio

    import nats.errors

    from aimem_common import config, maint_rpc
    from aimem_common.bus import connect
    from aimem_common.errors import AimemError

    try:
        settings = config.load(check_writable=False)
    except config.ConfigError:
        return None
    bus_cfg = settings.bus.model_copy(update={"nats_url": nats_url} if nats_url else {})

    async def ask() -> dict:
        nc = await asyncio.wait_for(connect(bus_cfg, name="aimem-bootstrap", reconnect=False), 5.0)
        try:
            return await maint_rpc.call(nc, "bootstrap", workspace=settings.workspace_default, project=None,
                                        actor="cli", args={"overview": overview[:16 * 1024]}, timeout_s=timeout_s)
        finally:
            await nc.close()

    try:
        result = asyncio.run(ask())
    except (AimemError, OSError, asyncio.TimeoutError, nats.errors.Error):  # no bus, no maintainer, no LLM
        return None
    return result if result.get("mode") == "llm" else None
