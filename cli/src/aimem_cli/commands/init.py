"""``aimem init``: write a ``.aimem.toml`` marker at the top of this repository.

The marker fixes the project's names (what every hook, ``aimem`` command and agent uses)
and its capture rules (``capture``, ``exclude``); see ``aimem_cli.identity``. Commit it so
every clone and worktree shares it.

A blank ``--project ''`` or ``--workspace ''`` is refused (exit 1, one line), never replaced by
the default name.

Outside any git repository ``init`` refuses (exit 1, one line) unless ``--force``: a marker in
a folder such as the home directory would name every non-repository folder below it. (It
stops at repositories below it anyway unless it says ``scope = "tree"``: see
``aimem_cli.identity``.)
"""

from __future__ import annotations

from pathlib import Path

import typer

from aimem_cli.identity import MARKER, checkout_top, render_marker, resolve


def register(app: typer.Typer) -> None:
    """Add ``init`` to ``app``."""

    @app.command("init")
    def init(
        project: str = typer.Option(None, "--project", "-p", help="Project name (default: the repository's)."),
        workspace: str = typer.Option(None, "--workspace", "-w", help="Workspace name (default: default)."),
        no_capture: bool = typer.Option(False, "--no-capture", help="Never record anything from here."),
        exclude: list[str] = typer.Option([], "--exclude", help="A path glob never recorded (repeatable)."),
        directory: Path = typer.Option(None, "--dir", help="Where to write (default: this checkout's top level)."),
        force: bool = typer.Option(False, "--force",
                                   help="Replace an existing marker; write one outside any git repository."),
    ) -> None:
        """Write a .aimem.toml marker naming this repository's project and its capture rules."""
        from aimem_common.models import validate_name
        from aimem_common.errors import AimemError

        for flag, given in (("--project", project), ("--workspace", workspace)):
            if given is not None and not given.strip():
                typer.echo(f"aimem: {flag} is blank; give a name or leave the option out", err=True)
                raise typer.Exit(1)
        here = Path.cwd()
        target = (directory or Path(checkout_top(here) or here)).resolve()
        if checkout_top(target) is None and not force:
            typer.echo(f"aimem: {target} is not inside a git repository; a marker here would name every folder"
                       " below it (run it in a repository, or pass --force)", err=True)
            raise typer.Exit(1)
        ident = resolve(target)
        name = project or ident.project
        try:
            validate_name(name or "", "project")
            validate_name(workspace or ident.workspace or "default", "workspace")
        except AimemError as exc:
            typer.echo(f"aimem: {exc.message}", err=True)
            raise typer.Exit(1) from None
        path = target / MARKER
        if path.exists() and not force:
            typer.echo(f"aimem: {path} exists (use --force to replace it)", err=True)
            raise typer.Exit(1)
        text = render_marker(project=name, workspace=workspace or ident.workspace, capture=not no_capture,
                             exclude=exclude)
        tmp = path.with_name(MARKER + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        typer.echo(f"wrote {path}: workspace {workspace or ident.workspace or 'default'}, project {name}"
                   + ("" if not no_capture else ", capture off"))
