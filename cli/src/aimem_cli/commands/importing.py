"""``aimem import``: bring the agents' own transcripts (and ``aimem export`` folders) into memory.

Finds each client's transcripts where it keeps them (or under ``--path``), reads only what
is new since the last run (state in ``<client data dir>/import-state.json``), and posts
batches to ingress ``/hook/import``: the same normaliser, sanitizer and project identity
as live hooks, idempotency keys from where each event came from, historical session ends
(pages, no handoffs). A progress bar on a terminal, a one-line summary otherwise,
``--json`` for scripts. Exit 1 with a one-line message when the server refuses or is down.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

from aimem_cli.commands.importsend import import_failed as _fail
from aimem_cli.commands.importsend import ingress_sender
from aimem_cli.hookconfig import client_settings
from aimem_cli.importer import Importer, discover, files_under
from aimem_cli.transcripts import READERS

CLIENTS = ("all", *READERS)


def parse_since(value: str | None) -> datetime | None:
    """``--since``: an ISO date or time (naive = UTC) or ``<N>d`` (days ago)."""
    if not value:
        return None
    try:
        if value.endswith("d") and value[:-1].isdigit():
            return datetime.fromtimestamp(time.time() - int(value[:-1]) * 86400, UTC)
        dt = datetime.fromisoformat(value)
    except ValueError:
        _fail(f"--since {value!r}: use YYYY-MM-DD, an ISO time or Nd (days)")
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def register(app: typer.Typer) -> None:
    """Add ``import`` to the CLI."""

    @app.command("import")
    def import_cmd(
        client: str = typer.Option("all", "--client", help=f"One of {', '.join(CLIENTS)}."),
        path: Path = typer.Option(None, "--path", help="A copied transcripts folder (or one file) instead "
                                                          "of the clients' own places."),
        since: str = typer.Option(None, "--since", help="Only events since this date (YYYY-MM-DD, ISO, or Nd)."),
        project: str = typer.Option(None, "--project", help="Only sessions of this project."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Read and count; send and remember nothing."),
        as_json: bool = typer.Option(False, "--json", help="Print the counters as JSON."),
        server: str = typer.Option(None, "--server", help="Ingress URL (default: as the hook client)."),
        token: str = typer.Option(None, "--token", help="Bearer token (default: as the hook client)."),
        home: Path = typer.Option(None, "--home", help="Where the clients keep their files (default: ~)."),
        from_export: Path = typer.Option(None, "--from-export", help="Restore an `aimem export` folder "
                                                                       "or zip instead."),
        query_server: str = typer.Option(None, "--query-server", help="--from-export: the query service URL "
                                                                         "for page writes (default: config)."),
        workspace: str = typer.Option(None, "--workspace", help="--from-export: restore into this workspace."),
    ) -> None:
        """Import the agents' own transcripts: idempotent, incremental, historical (no handoffs)."""
        if client not in CLIENTS:
            _fail(f"--client {client!r}: use one of {', '.join(CLIENTS)}")
        data_dir, cfg = client_settings()
        url, tok = server or str(cfg["url"]), token or cfg["token"]
        if from_export is not None:
            from aimem_cli.commands.exporting import restore_export

            result = restore_export(from_export, server=url, token=tok, query_server=query_server,
                                    workspace=workspace, project=project, dry_run=dry_run)
            typer.echo(json.dumps(result) if as_json else
                       f"restored {result['pages']} pages, {result['sessions']} sessions "
                       f"({result['observations']} observations) into {result['workspace']}/{result['project']}")
            return
        files = (files_under(path, client) if path else discover(client, home or Path.home()))
        importer = Importer(sender=None if dry_run else ingress_sender(url, tok),
                            state_path=None if dry_run else data_dir / "import-state.json",
                            since=parse_since(since), project=project)
        stats = _run_with_progress(importer, files, show=not as_json and sys.stderr.isatty())
        out = stats.to_json() | {"dry_run": dry_run}
        if as_json:
            typer.echo(json.dumps(out))
            return
        typer.echo(
            f"{'read' if dry_run else 'imported'} {stats.files} files ({stats.files_unchanged} unchanged), "
            f"{stats.sessions} sessions, {stats.lines} lines → {stats.events} events"
            + ("" if dry_run else f" ({stats.accepted} accepted, {stats.duplicates} already there)")
            + f"; skipped: {stats.sessions_skipped_capture} sessions with capture off, "
              f"{stats.events_excluded} events on excluded files, {stats.malformed_lines} malformed lines, {stats.truncated_files} truncated files; "
              f"{stats.seconds:.1f} s")


def _run_with_progress(importer: Importer, files: list, *, show: bool):
    if not show:
        return importer.run(files)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  transient=True) as bar:
        task = bar.add_task("files", total=len(files))
        importer.on_file = lambda: bar.advance(task)
        return importer.run(files)
