"""Wiring aimem into agent clients in one step, and taking it out again (issue 30):
``setup-agent --client X`` (hooks + MCP + the instructions block) and ``uninstall [--client
X] [--purge-data --confirm]`` (everything aimem installed; the data dir only when asked).
Both reuse the installers' plans (``aimem_cli.installers``): merges, never clobbers, and only
aimem's own entries are removed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import typer

from aimem_cli.commands.base import fail
from aimem_cli.commands.hooks import (
    CODEX_HOME_HELP, _hook_target, _target, server_credential, stack_urls,
)
from aimem_cli.commands.operate import (
    INSTRUCTION_FILES, INSTRUCTIONS, _fmt_bytes, _tree_size, remove_block, upsert_block,
)
from aimem_cli.installers import CLIENTS, InstallError, apply, diff, plan_hooks, plan_mcp, plan_unhooks, plan_unmcp
from aimem_cli.installers.base import FileChange, read_text


def _instruction_change(path: Path, remove: bool) -> list[FileChange]:
    old = read_text(path)
    if remove:
        if old is None:
            return []
        new = remove_block(old)
        return [FileChange(path, old, new if new.strip() else None)]
    return [FileChange(path, old, upsert_block(old, INSTRUCTIONS))]


def _apply(changes: list[FileChange], dry_run: bool) -> None:
    text = diff(changes)
    if dry_run:
        typer.echo(text or "no changes", nl=not text)
        return
    touched = apply(changes)
    for path in touched:
        typer.echo(f"updated {path}")
    if not touched:
        typer.echo("already up to date")


def setup_agent(
    client: str = typer.Option(..., "--client", help=f"one of: {', '.join(CLIENTS)}"),
    scope: str = typer.Option("user", "--scope", help="user (your home) or project (this directory)"),
    project_dir: Path = typer.Option(None, "--project-dir", help="the repository whose instruction file gets "
                                     "the aimem block (default: here)"),
    no_instructions: bool = typer.Option(False, "--no-instructions", help="hooks and MCP only"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the diff, write nothing"),
    port_base: int = typer.Option(None, "--port-base", help="the stack's port base"),
    home: Path = typer.Option(None, "--home", hidden=True),
    codex_home: Path = typer.Option(None, "--codex-home", envvar="CODEX_HOME", help=CODEX_HOME_HELP),
    api_key: str = typer.Option(None, "--api-key", help="a user's API key to send instead of the root token"),
    data_dir: Path = typer.Option(None, "--data-dir", help="the server's data dir (its root token)"),
) -> None:
    """Wire aimem into one client in one step: lifecycle hooks, the MCP server and the
    instructions block (CLAUDE.md / AGENTS.md / GEMINI.md of --project-dir). Idempotent."""
    if client not in CLIENTS:
        fail(f"unknown client {client!r}; expected one of {', '.join(CLIENTS)}")
    token = server_credential(api_key, data_dir, create=not dry_run)
    ingress, mcp_url = stack_urls(None, port_base, data_dir)
    target = _target(scope, project_dir, home, ingress, codex_home, token, _hook_target(token, home))
    try:
        changes = plan_hooks(client, target)
        changes += plan_mcp(client, target, mcp_url)
    except InstallError as exc:
        fail(str(exc))
    if not no_instructions:
        changes += _instruction_change((project_dir or Path.cwd()).resolve() / INSTRUCTION_FILES[client], False)
    _apply(changes, dry_run)


def purge_plan(data_dir: Path) -> dict:
    files, size = _tree_size(data_dir) if data_dir.is_dir() else (0, 0)
    return {"data_dir": str(data_dir), "files": files, "bytes": size}


def uninstall(
    client: str = typer.Option(None, "--client", help=f"only this client (default: all of {', '.join(CLIENTS)})"),
    scope: str = typer.Option("user", "--scope", help="user (your home) or project (this directory)"),
    project_dir: Path = typer.Option(None, "--project-dir", help="the repository whose instruction files lose "
                                     "the aimem block (default: here)"),
    purge_data: bool = typer.Option(False, "--purge-data", help="also delete the server's data dir (with --confirm; "
                                    "the stack must be stopped)"),
    confirm: bool = typer.Option(False, "--confirm", help="with --purge-data: really delete it"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print what would change, write nothing"),
    home: Path = typer.Option(None, "--home", hidden=True),
    codex_home: Path = typer.Option(None, "--codex-home", envvar="CODEX_HOME", help=CODEX_HOME_HELP),
    data_dir: Path = typer.Option(None, "--data-dir", help="the server's data dir (for --purge-data)"),
) -> None:
    """Remove what aimem installed: its hooks, its MCP entry and its instructions block (only
    aimem's own entries; everything else in those files stays). The data dir is deleted only
    with --purge-data --confirm (a preview without --confirm)."""
    clients = [client] if client else list(CLIENTS)
    if client and client not in CLIENTS:
        fail(f"unknown client {client!r}; expected one of {', '.join(CLIENTS)}")
    target = _target(scope, project_dir, home, "http://127.0.0.1:8701", codex_home)
    changes: list[FileChange] = []
    try:
        for c in clients:
            try:
                changes += plan_unhooks(c, target)
            except InstallError as exc:
                if "no " not in str(exc):  # a client without a file in this scope: nothing installed
                    raise
            changes += plan_unmcp(c, target)
    except InstallError as exc:
        fail(str(exc))
    where = (project_dir or Path.cwd()).resolve()
    for name in dict.fromkeys(INSTRUCTION_FILES[c] for c in clients):
        changes += _instruction_change(where / name, True)
    _apply(changes, dry_run)
    if not purge_data:
        return
    from aimem_cli.commands.base import load_settings
    from aimem_cli.commands.disk import stack_alive

    settings = load_settings(data_dir)
    why = stack_alive(settings)
    if why:
        fail(f"the stack is running on {settings.data_dir} ({why}): stop it before --purge-data")
    plan = purge_plan(settings.data_dir)
    if not confirm or dry_run:
        typer.echo(f"Would delete the data dir {plan['data_dir']} ({plan['files']} files, "
                   f"{_fmt_bytes(plan['bytes'])}); re-run with --purge-data --confirm")
        if not dry_run:
            raise typer.Exit(1)
        return
    shutil.rmtree(settings.data_dir)
    typer.echo(f"Deleted the data dir {plan['data_dir']} ({plan['files']} files, {_fmt_bytes(plan['bytes'])})")


def register(app: typer.Typer) -> None:
    """Add ``setup-agent`` and ``uninstall`` to ``app``."""
    app.command("setup-agent")(setup_agent)
    app.command("uninstall")(uninstall)
