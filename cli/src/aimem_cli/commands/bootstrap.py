"""``aimem bootstrap [PATH]``: write a repository's first overview page (``bootstrap.md``).

The page comes from ``aimem_cli.bootstrap`` (rule-based: README, docs, manifests, git
log) and is written through the query service's ``/admin/pages`` like any page: a re-run
supersedes it and the earlier version stays in the history (git and retired versions).
The project is the one the hook client would use for PATH (``.aimem.toml``, else the
folder name); ``capture = false`` refuses. ``--print`` shows the page without writing.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from aimem_cli.bootstrap import PAGE_PATH, render, survey
from aimem_cli.importer import project_identity


def register(app: typer.Typer) -> None:
    """Add ``bootstrap`` to the CLI."""
    from aimem_cli.commands.base import JsonOpt, ServerOpt, TokenOpt, client, emit, fail

    @app.command("bootstrap")
    def bootstrap(
        path: Path = typer.Argument(Path("."), help="The repository (default: the current directory)."),
        workspace: str = typer.Option(None, "--workspace", help="Default: from .aimem.toml, else 'default'."),
        project: str = typer.Option(None, "--project", help="Default: the project hooks use for PATH."),
        print_only: bool = typer.Option(False, "--print", help="Print the page; write nothing."),
        server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
    ) -> None:
        """Write a first overview page of a repository from its README, manifests and git history."""
        if not path.is_dir():
            fail(f"{path} is not a directory")
        title, body = render(survey(path))
        if print_only:
            typer.echo(json.dumps({"path": PAGE_PATH, "title": title, "body": body}) if as_json else body)
            return
        ident = project_identity(str(path.resolve()))
        if ident is not None and not ident.capture and not project:
            fail(f"{path} says capture = false in .aimem.toml; nothing is written")
        ws = workspace or (ident.workspace if ident else "default")
        pj = project or (ident.project if ident else None)
        if not pj:
            fail("no project: pass --project")
        payload = {"workspace": ws, "project": pj, "path": PAGE_PATH, "title": title, "body": body,
                   "frontmatter": {"tags": ["bootstrap", "overview"], "source": "aimem bootstrap"}}
        with client(server, token) as c:
            data = c.post("/admin/pages", payload)
        emit(data, as_json, lambda d: typer.echo(
            f"{'created' if d.get('created') else ('updated' if d.get('changed') else 'unchanged')} "
            f"{ws}/{pj}:{PAGE_PATH} (page {d.get('page_id')}, version {d.get('version')})"))
