"""``aimem replica``: a read replica on another node (query + mcp-gateway on a followed DB copy).

Litestream's follow mode (``litestream restore -f``) keeps ``<data_dir>/db/memory.sqlite`` a
read-only copy of the writer node's DB, about a second behind (``bench/read_replica``); the
query service and the MCP gateway read it as they would the primary's. Their writes (MCP
write tools, admin API, access bumps) still go over the bus to the one writer, so
``bus.nats_url`` must name the primary's NATS (or the cluster). A write is therefore visible
on the replica about a second after its reply, not at once.
"""

from __future__ import annotations

from pathlib import Path

import typer

from aimem_common import config
from aimem_common.replication import litestream_binary, litestream_env, write_litestream_config

from aimem_cli.commands.base import port_base_option
from aimem_cli.commands.up import Supervisor, ensure_root_token, log, private_data_dir, run_foreground

REPLICA_SERVICES = ["query", "mcp-gateway"]


def replica(
    data_dir: Path = typer.Option(None, "--data-dir", help="This node's data directory (gets db/ only)."),
    port_base: int = port_base_option("First service port (default 8701)."),
    host: str = typer.Option(None, "--host", help="Bind address of the services (default 127.0.0.1)."),
    log_dir: Path = typer.Option(None, "--log-dir", help="Write each process's log to <dir>/<name>.log."),
    follow_interval_s: float = typer.Option(1.0, "--follow-interval", help="Seconds between Litestream polls."),
    health_timeout_s: float = typer.Option(60.0, "--health-timeout", help="Seconds to wait for every /healthz."),
) -> None:
    """Run a read replica: Litestream follows the primary's DB; query and mcp-gateway serve it.

    Needs ``replication.s3_bucket`` (the primary's bucket) and ``bus.nats_url`` (the primary's
    NATS) in the config; refuses a data dir where a writer runs. Without a configured root
    token it generates its own in ``<data_dir>/auth/token``, as ``aimem up`` does (user API
    keys, in the replicated database, work on both).
    """
    overrides = {k: v for k, v in (("port_base", port_base), ("host", host)) if v is not None}
    try:
        settings = config.load(data_dir, **overrides)
    except config.ConfigError as exc:
        typer.echo(f"aimem replica: {exc.message}", err=True)
        raise typer.Exit(2)
    if not settings.replication.s3_bucket:
        typer.echo("aimem replica: replication.s3_bucket (the primary's bucket) is not set", err=True)
        raise typer.Exit(2)
    lock = settings.db_path.parent / "writer.lock"
    if lock.exists():
        from aimem_cli.commands.admin import stack_alive

        why = stack_alive(settings)
        if why and "writer" in why:
            typer.echo(f"aimem replica: {why}; a replica never runs beside a writer", err=True)
            raise typer.Exit(2)
    private_data_dir(settings.data_dir)
    token_note = ensure_root_token(settings, "aimem replica")  # as `aimem up`: never open
    if log_dir:
        log_dir.mkdir(parents=True, exist_ok=True)
    settings.db_path.parent.mkdir(parents=True, exist_ok=True)
    for stale in settings.db_path.parent.glob(settings.db_path.name + "*"):
        stale.unlink()  # follow mode restores from scratch; an old copy would be refused
    cfg = write_litestream_config(settings, settings.db_path.parent / "litestream-follow.yml")
    follow = [litestream_binary(), "restore", "-config", str(cfg), "-f", "-follow-interval",
              f"{follow_interval_s:g}s", "-o", str(settings.db_path), str(settings.db_path)]
    env = config.child_environ()
    env.update(AIMEM_DATA_DIR=str(settings.data_dir), AIMEM_PORT_BASE=str(settings.port_base),
               AIMEM_HOST=settings.host, AIMEM_BUS__NATS_URL=settings.bus.nats_url, PYTHONUNBUFFERED="1",
               # follow mode rewrites the file under SQLite: a kept connection never sees it
               AIMEM_QUERY__READ_REOPEN="true")
    sup = Supervisor(settings, [], litestream_env(env), log_dir, litestream=follow, services=REPLICA_SERVICES)
    log(f"read replica of s3://{settings.replication.s3_bucket}/{settings.replication.s3_path} in {settings.data_dir}")
    log(token_note)
    run_foreground(sup, health_timeout_s, "replica healthy:")


def register(app: typer.Typer) -> None:
    """Add ``replica`` to the CLI."""
    app.command("replica")(replica)
