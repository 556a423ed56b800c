"""Direct-disk lifecycle commands: ``aimem reindex --data-dir``, the replica restore.

These run against the data directory itself, not through the API, so they refuse while a
writer is alive on it (DESIGN.md invariant 9: the writer holds ``db/writer.lock``).
"""

from __future__ import annotations

from pathlib import Path

import typer


def restore_replica(settings) -> None:
    """Run ``aimem_writer.restore.restore_from_replica`` for ``aimem restore --from-replica``.

    Prints one summary line (and the reconciled paths' counts); exits 1 with the reason on
    a refusal (writer alive, data dir not empty, nothing configured) or a failed git/litestream.
    """
    from aimem_common.errors import AimemError

    try:
        from aimem_writer.restore import remove_partial, restore_from_replica
    except ImportError:
        typer.echo("aimem restore --from-replica needs the aimem-writer package installed", err=True)
        raise typer.Exit(1)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        report = restore_from_replica(settings)
    except AimemError as exc:
        if exc.code == "restore_failed":
            remove_partial(settings)
        typer.echo(f"aimem restore: {exc.message}", err=True)
        raise typer.Exit(1)
    typer.echo(
        f"restored {settings.data_dir} in {report.seconds.get('total', 0):.1f} s: "
        f"db {'from the bucket' if report.db_restored else 'rebuilt from the wiki' if report.wiki_cloned else 'empty'}, "
        f"wiki {'cloned' if report.wiki_cloned else 'written from the DB'}; "
        f"{len(report.reindexed)} pages reindexed from the wiki, {len(report.written_back)} written back from the DB; "
        f"wiki at {report.final_commit or '-'}"
    )


def register(app: typer.Typer) -> None:
    """Add the direct-disk commands to ``app``."""

    @app.command("replicate-db")
    def replicate_db(
        data_dir: Path = typer.Option(None, "--data-dir", help="The aimem data directory (default: settings)."),
    ) -> None:
        """Run Litestream on db/memory.sqlite with the [replication] settings (compose sidecar).

        Writes <data_dir>/db/litestream.yml from the settings and replaces this process with
        ``litestream replicate`` (AWS_CA_BUNDLE dropped: Litestream refuses custom CAs). The
        bucket credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
        """
        import os

        from aimem_common import config
        from aimem_common.replication import litestream_binary, litestream_env, write_litestream_config

        try:
            settings = config.load(data_dir)
        except config.ConfigError as exc:
            typer.echo(f"aimem replicate-db: {exc.message}", err=True)
            raise typer.Exit(2)
        if not settings.replication.s3_bucket:
            typer.echo("aimem replicate-db: replication.s3_bucket is not set", err=True)
            raise typer.Exit(2)
        try:
            binary = litestream_binary()
        except FileNotFoundError as exc:
            typer.echo(f"aimem replicate-db: {exc}", err=True)
            raise typer.Exit(2)
        cfg = write_litestream_config(settings)
        os.execve(binary, [binary, "replicate", "-config", str(cfg)], litestream_env(config.child_environ()))

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
