"""``aimem install-hooks | uninstall-hooks | install-mcp | finalize-session``.

The installers merge into each client's own settings file (``aimem_cli.installers``):
existing hooks are kept, running twice changes nothing, ``--dry-run`` prints the unified
diff instead of writing, and ``uninstall-hooks`` removes only the handlers running
``aimem hook``.
"""

from __future__ import annotations

from pathlib import Path

import typer

from aimem_cli.installers import CLIENTS, InstallError, apply, diff, plan_hooks, plan_mcp, plan_unhooks
from aimem_cli.installers.plans import Target

DEFAULT_MCP_URL = "http://127.0.0.1:8703/mcp"
DEFAULT_INGRESS_URL = "http://127.0.0.1:8701"
FINALIZE_NOTE = "Codex before 0.145, Antigravity and any client without a reliable session end"


def _target(scope: str, project_dir: Path | None, home: Path | None, ingress_url: str) -> Target:
    if scope not in ("user", "project"):
        raise typer.BadParameter("--scope must be user or project")
    return Target(scope=scope, home=(home or Path.home()), project_dir=(project_dir or Path.cwd()).resolve(),
                  ingress_url=ingress_url)


def _run(plan, dry_run: bool) -> None:
    try:
        changes = plan()
    except InstallError as exc:
        typer.echo(f"aimem: {exc}", err=True)
        raise typer.Exit(1) from None
    text = diff(changes)
    if dry_run:
        typer.echo(text or "no changes", nl=not text)
        return
    touched = apply(changes)
    for path in touched:
        typer.echo(f"updated {path}")
    if not touched:
        typer.echo("already up to date")


def register(app: typer.Typer) -> None:
    """Add the hook and MCP installer commands and ``finalize-session`` to ``app``."""

    client_help = f"one of: {', '.join(CLIENTS)}"

    @app.command("install-hooks")
    def install_hooks(
        client: str = typer.Option(..., "--client", help=client_help),
        scope: str = typer.Option("user", "--scope", help="user (your home) or project (this directory)"),
        dry_run: bool = typer.Option(False, "--dry-run", help="print the diff, write nothing"),
        project_dir: Path = typer.Option(None, "--project-dir", help="project root for --scope project"),
        home: Path = typer.Option(None, "--home", hidden=True),
        ingress_url: str = typer.Option(DEFAULT_INGRESS_URL, "--ingress-url",
                                        help="default ingress for the OpenCode plugin"),
    ) -> None:
        """Wire `aimem hook` into a client's lifecycle hooks (merges, never clobbers)."""
        target = _target(scope, project_dir, home, ingress_url)
        _run(lambda: plan_hooks(client, target), dry_run)
        if client == "codex" and not dry_run:
            typer.echo("codex: hooks need `[features] codex_hooks = true` in ~/.codex/config.toml "
                       "on versions that still gate them")

    @app.command("uninstall-hooks")
    def uninstall_hooks(
        client: str = typer.Option(..., "--client", help=client_help),
        scope: str = typer.Option("user", "--scope"),
        dry_run: bool = typer.Option(False, "--dry-run"),
        project_dir: Path = typer.Option(None, "--project-dir"),
        home: Path = typer.Option(None, "--home", hidden=True),
    ) -> None:
        """Remove only aimem's hook handlers from a client's settings."""
        target = _target(scope, project_dir, home, DEFAULT_INGRESS_URL)
        _run(lambda: plan_unhooks(client, target), dry_run)

    @app.command("install-mcp")
    def install_mcp(
        client: str = typer.Option(..., "--client", help=client_help),
        scope: str = typer.Option("user", "--scope"),
        dry_run: bool = typer.Option(False, "--dry-run"),
        url: str = typer.Option(DEFAULT_MCP_URL, "--url", help="the aimem MCP endpoint"),
        project_dir: Path = typer.Option(None, "--project-dir"),
        home: Path = typer.Option(None, "--home", hidden=True),
    ) -> None:
        """Register the aimem MCP server (Streamable HTTP) with a client."""
        target = _target(scope, project_dir, home, DEFAULT_INGRESS_URL)
        _run(lambda: plan_mcp(client, target, url), dry_run)

    @app.command("finalize-session")
    def finalize_session(
        agent: str = typer.Option(..., "--agent", help=f"the client whose session ends ({FINALIZE_NOTE})"),
        session_id: str = typer.Option(None, "--session-id", help="default: its latest session start"),
        cwd: str = typer.Option(None, "--cwd", help="default: the session's cwd, else this directory"),
    ) -> None:
        """End a session by hand: the same session-end path as a native hook."""
        from aimem_cli.hookclient import finalize_session as send

        sid, status = send(agent, session_id=session_id, cwd=cwd)
        if sid is None:
            typer.echo(f"aimem: no recorded session for {agent}; pass --session-id", err=True)
            raise typer.Exit(1)
        if status == 0:
            typer.echo(f"session {sid}: not sent (.aimem.toml here says capture = false)")
            return
        if status is None or status >= 300:
            typer.echo(f"session {sid}: spooled (server answered {status}); it is sent on the next drain")
            raise typer.Exit(0 if status is None or status in (429, 503) else 1)
        typer.echo(f"session {sid}: end accepted")
