"""``aimem import``: bring the agents' own transcripts (and ``aimem export`` folders) into memory.

Finds each client's transcripts where it keeps them (or under ``--path``), reads only what
is new since the last run (state in ``<client data dir>/import-state.json``), and posts
batches to ingress ``/hook/import``: the same normaliser, sanitizer and project identity
as live hooks, idempotency keys from where each event came from, historical session ends
(pages, no handoffs). A progress bar on a terminal, then a summary a person reads
(``summary``), ``--json`` for scripts.

Exit status: 0 when everything read was imported, was there already or was skipped on
purpose; 1 with a one-line message naming the path and why when the input cannot be read
(``_inputs``), or when the server refused or could not be reached (what it
acknowledged so far stays, and a re-run goes on from there); 2 when the run finished but some
lines could not be read (malformed) or the server rejected some events. One import runs at a
time per client data dir (``import.lock``, shared with the backfill on start).

Imports travel in the server's bulk lane ("Live first"): while the writer is busy with live
work or has ``ingress.max_import_delay_s`` of imports in front of it, ingress answers 429 and
this command waits as ``Retry-After`` says, for as long as the server keeps answering
(``SATURATED_PATIENCE_S`` without one accepted batch ends the run with status 1).
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

from aimem_cli.commands.importsend import import_failed as _fail
from aimem_cli.commands.importsend import ingress_sender
from aimem_cli.hookconfig import client_settings
from aimem_cli.importer import Importer, ImportStats, discover, files_under
from aimem_cli.transcripts import READERS

CLIENTS = ("all", *READERS)
# A bulk job in the background: on a busy machine the agents' live work (and the stack serving
# their hooks) gets the CPU first. Only ever raised: a process cannot lower it back.
IMPORT_NICE = 10


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
        """Import the agents' own transcripts: idempotent, incremental, historical (no handoffs).

        Exit status: 0 all imported (or there already, or skipped on purpose); 1 the input cannot be
        read (a missing --path or client folder, a file that is no transcript), or the server refused
        or is down; 2 some lines were malformed or some events rejected (named in the summary).
        """
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
        try:
            os.nice(IMPORT_NICE)
        except OSError:  # not permitted here: the import runs at the caller's priority
            pass
        files = _inputs(client, path, home or Path.home())
        importer = Importer(sender=None if dry_run else ingress_sender(url, tok),
                            state_path=None if dry_run else data_dir / "import-state.json",
                            since=parse_since(since), project=project)
        stats = _locked_run(importer, files, data_dir, locked=not dry_run, show=not as_json and sys.stderr.isatty())
        out = stats.to_json() | {"dry_run": dry_run}
        typer.echo(json.dumps(out) if as_json else summary(stats, dry_run=dry_run))
        if stats.failed and not dry_run:  # a dry run attempts nothing, so nothing failed
            raise typer.Exit(2)


def _inputs(client: str, path: Path | None, home: Path) -> list[tuple[str, Path]]:
    """The transcripts to read: under ``--path``, else where ``client`` keeps them.

    Input that cannot be read is one line on stderr and exit 1, never "nothing new": a
    ``--path`` that does not exist, cannot be read, or holds no transcript of ``client``
    (a file: which format it is not); a named client whose folder does not exist; Crush's
    ``projects.json`` that is not JSON or not its shape (with ``all``, a note on stderr and
    the other clients are imported)."""
    who = "any client's" if client == "all" else f"a {client}"
    if path is not None:
        path = path.expanduser()
        if not path.exists():
            _fail(f"--path {path}: no such file or folder")
        if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
            _fail(f"--path {path}: not readable (permission denied)")
        files = files_under(path, client)
        if not files and path.is_file():
            _fail(f"--path {path}: not {who} transcript (known by its name and first lines: rollout-*.jsonl, "
                  "session-*.json, crush.db, or JSON lines of Claude Code, Codex, Copilot CLI or Pi)")
        if not files:
            _fail(f"--path {path}: no file in it is {who} transcript")
        return files
    crush = READERS["crush"]
    if client in ("crush", "all") and (why := crush.problem(home)):
        if client == "crush":
            _fail(why)
        typer.echo(f"note: Crush's sessions skipped: {why}", err=True)
    files = discover(client, home)
    if not files and client != "all" and not READERS[client].root(home).exists():
        _fail(f"no {client} transcripts: {READERS[client].root(home)} does not exist")
    return files


def summary(stats: ImportStats, *, dry_run: bool = False) -> str:
    """The run told to a person: a headline that says whether anything new was imported, then
    found / new / already there / skipped (captured live, excluded files, ``capture = false``) /
    malformed (first ``file:line``s, then a count) / rejected, and where the counts come from."""
    n = f"{stats.events:,}"
    read = (f"{stats.files:,} files ({stats.files_unchanged:,} unchanged), {stats.sessions:,} sessions, "
            f"{stats.lines:,} lines → {n} events")
    if dry_run:
        lines = [f"dry run: read {read}; nothing sent"]
    elif stats.new:
        lines = [f"imported {stats.new:,} new events from {read}"]
    else:
        lines = [f"nothing new to import: read {read}"]
    if not dry_run and stats.events:
        lines.append(f"  new:            {stats.new:,}")
        lines.append(f"  already there:  {stats.already:,}")
        lines.append(f"  captured live:  {stats.captured_live:,} (hooks stored those sessions as they happened;"
                     " live capture wins)")
    skipped = []
    if stats.events_excluded:
        skipped.append(f"{stats.events_excluded:,} events naming excluded files")
    if stats.sessions_skipped_capture:
        skipped.append(f"{stats.sessions_skipped_capture:,} sessions of repositories with capture = false")
    if stats.sessions_skipped_filter:
        skipped.append(f"{stats.sessions_skipped_filter:,} sessions of other projects (--project)")
    if stats.sessions_without_project:
        skipped.append(f"{stats.sessions_without_project:,} sessions without a project (no cwd)")
    if skipped:
        lines.append("  not sent:       " + "; ".join(skipped))
    if stats.malformed_lines:
        more = stats.malformed_lines - len(stats.malformed_at)
        where = ", ".join(stats.malformed_at) + (f" and {more:,} more" if more > 0 else "")
        lines.append(f"  malformed:      {stats.malformed_lines:,} lines not readable: {where}")
    if stats.rejected_events:
        more = stats.rejected_events - len(stats.rejected)
        lines.append(f"  rejected:       {stats.rejected_events:,} events the server could not read: "
                     + "; ".join(stats.rejected) + (f" and {more:,} more" if more > 0 else ""))
    if stats.truncated_files:
        lines.append(f"  unfinished:     {stats.truncated_files:,} files end in a partial line, read next run")
    if not dry_run and stats.new:
        lines.append("  (counted when the server accepted each batch; the writer applies imports after live"
                     " work, so they may take a moment to be searchable)")
    lines.append(f"{stats.seconds:.1f} s" + ("; some input could not be imported (exit 2)" if stats.failed else ""))
    return "\n".join(lines)


IMPORT_LOCK_WAIT_S = 600.0


def _locked_run(importer: Importer, files: list, data_dir: Path, *, locked: bool, show: bool) -> ImportStats:
    """Run under the import lock (one writer of the import state; a new project's backfill on
    start takes it too), waiting up to ``IMPORT_LOCK_WAIT_S`` for a running one."""
    if not locked:
        return _run_with_progress(importer, files, show=show)
    from aimem_cli.backfill import import_lock

    with import_lock(data_dir, wait_s=0) as got:
        if got:
            return _run_with_progress(importer, files, show=show)
    typer.echo("waiting for another import (or a new project's backfill) to finish…", err=True)
    with import_lock(data_dir, wait_s=IMPORT_LOCK_WAIT_S) as got:
        if not got:
            _fail(f"another import held {data_dir / 'import.lock'} for {IMPORT_LOCK_WAIT_S:.0f} s; try again later")
        return _run_with_progress(importer, files, show=show)


def _run_with_progress(importer: Importer, files: list, *, show: bool):
    if not show:
        return importer.run(files)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  transient=True) as bar:
        task = bar.add_task("files", total=len(files))
        importer.on_file = lambda: bar.advance(task)
        return importer.run(files)
