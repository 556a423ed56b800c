"""Direct-disk lifecycle commands: ``aimem reindex --data-dir``.

These run against the data directory itself, not through the API, so they refuse while a
writer is alive on it (DESIGN.md invariant 9: the writer holds ``db/writer.lock``).
"""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add the direct-disk commands to ``app``."""

    @app.command("reindex")
    def reindex(
        data_dir: Path = typer.Option(..., "--data-dir", help="The aimem data directory (holds wiki/ and db/)."),
    ) -> None:
        """Rebuild an empty SQLite index from the wiki (workspaces, projects, pages, links, FTS).

        Refuses while a writer is alive on DATA_DIR or when the database already has rows:
        move db/memory.sqlite (and its -wal/-shm) aside first. Sessions, observations,
        handoffs and audit rows live only in SQLite and are not rebuilt.
        """
        from aimem_common import config
        from aimem_common.errors import AimemError

        try:
            from aimem_writer.reindex import rebuild
        except ImportError:
            typer.echo("aimem reindex needs the aimem-writer package installed", err=True)
            raise typer.Exit(1)
        try:
            settings = config.load(data_dir, check_writable=True)
            report = rebuild(settings)
        except AimemError as exc:
            typer.echo(f"aimem reindex: {exc.message}", err=True)
            raise typer.Exit(1)
        typer.echo(
            f"reindexed {report.pages} pages in {report.projects} projects of {report.workspaces} workspaces "
            f"from {settings.wiki_dir}"
        )
        for line in report.skipped:
            typer.echo(f"skipped {line}", err=True)
