"""The data directory itself.

``backup`` (over the API, while the stack runs), ``restore`` and ``reindex`` (direct-disk,
while it is stopped), ``replicate-db`` (Litestream on the DB).

``restore`` and ``reindex`` run against the data directory, not through the API, so they
refuse while a writer is alive on it (DESIGN.md invariant 9: the writer holds
``db/writer.lock``). ``restore`` also refuses while a service port of this config listens
or an aimem process runs on the same data dir; it stages and verifies the archive beside
the live data, then swaps it in, rolling back on a failed rename.

``reindex`` is the writer's own rebuild (``python -m aimem_writer.reindex``), run as a child
process: the CLI never imports a service package, and says so plainly when the writer is
not installed.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

from aimem_cli.client import CliError
from aimem_cli.commands.base import ServerOpt, TokenOpt, client, fail, load_settings
from aimem_common import config

# The writer's rebuild and replica-restore entry points (modules run with `python -m`).
WRITER_REINDEX = "aimem_writer.reindex"
WRITER_RESTORE = "aimem_writer.restore"


def backup(
    to: Path = typer.Option(..., "--to", help="Where to write the .tar.gz."),
    server: str = ServerOpt, token: str = TokenOpt,
) -> None:
    """Download a consistent backup (DB snapshot + wiki + workstream ledger segments + config.toml) while the stack runs."""
    to = to.expanduser()
    if to.is_dir():
        to = to / f"aimem-backup-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.tar.gz"
    if not to.parent.is_dir():
        fail(f"directory {to.parent} does not exist")
    with client(server, token) as c:
        n = c.download("/admin/backup", to)
    typer.echo(f"backup written to {to} ({n / 1e6:.2f} MB)")


def stack_alive(settings: config.Settings) -> str | None:
    """Return why the stack looks alive for ``settings.data_dir`` (None when it is down).

    Checks, in order: the writer's ``flock`` on ``db/writer.lock``; a listening service
    port of this config; a live aimem service process whose data dir is this one.
    """
    lock = settings.data_dir / "db" / "writer.lock"
    if lock.exists():
        try:
            fd = os.open(lock, os.O_RDWR)
        except OSError:
            fd = None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
            except BlockingIOError:
                return f"a writer holds {lock}"
            finally:
                os.close(fd)
    pid = _aimem_process(settings.data_dir)
    if pid is not None:
        return f"another aimem process is alive (pid {pid})"
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    for svc in config.SERVICES:
        port = settings.port(svc)
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex((host, port)) == 0:
                return f"{svc} port {port} is listening"
    return None


def _aimem_process(data_dir: Path) -> int | None:
    """Return the pid of a live aimem service/supervisor using ``data_dir`` (Linux /proc)."""
    me = os.getpid()
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    target = data_dir.resolve()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) in (me, os.getppid()):
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv if a]
        is_service = any(a in config.SERVICE_MODULES.values() for a in args)
        is_up = "up" in args and any(a.endswith(("aimem_cli", "aimem")) for a in args)
        if not (is_service or is_up):
            continue
        dirs = []
        if "--data-dir" in args and args.index("--data-dir") + 1 < len(args):
            dirs.append(args[args.index("--data-dir") + 1])
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        for kv in env:
            if kv.startswith(b"AIMEM_DATA_DIR="):
                dirs.append(kv.split(b"=", 1)[1].decode(errors="replace"))
        if not dirs:
            dirs.append("data")
        for d in dirs:
            p = Path(d)
            if (p if p.is_absolute() else cwd / p).resolve() == target:
                return int(entry.name)
    return None


def verify_staged(staged: Path) -> dict[str, Any]:
    """Open the staged store: integrity check, schema version, migrations, git repo; make
    its workstream ledger segments (``raw/workstreams/``) match its rows
    (``aimem_common.archive.reconcile_segments``: a segment appended after the snapshot is
    dropped, one purged meanwhile or missing from an older archive is written from the rows).

    Raises:
        CliError: the snapshot is corrupt, newer than this release, or the wiki repo is broken.
    """
    from aimem_common.archive import reconcile_segments
    from aimem_common.db.connect import open_writer
    from aimem_common.db.schema import SCHEMA_VERSION

    db = staged / "db" / "memory.sqlite"
    try:
        probe = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            ok = probe.execute("PRAGMA integrity_check").fetchone()[0]
            version = probe.execute("PRAGMA user_version").fetchone()[0]
        finally:
            probe.close()
    except sqlite3.Error as exc:
        raise CliError(f"the archive's database cannot be opened: {exc}") from exc
    if ok != "ok":
        raise CliError(f"the archive's database failed its integrity check: {ok}")
    if version > SCHEMA_VERSION:
        raise CliError(f"the archive's database is schema v{version}, newer than this release (v{SCHEMA_VERSION})")
    try:
        conn = open_writer(db)  # applies pending migrations to the staged copy only
        pages = conn.execute("SELECT count(*) FROM pages WHERE is_latest = 1").fetchone()[0]
        conn.execute("PRAGMA journal_mode = DELETE")
        try:
            segments = reconcile_segments(staged, conn)
        except OSError as exc:
            raise CliError(f"cannot restore the workstream ledger segments: {exc}") from exc
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise CliError(f"cannot migrate the archive's database: {exc}") from exc
    wiki = staged / "wiki"
    if (wiki / ".git").exists():
        import pygit2

        try:
            repo = pygit2.Repository(str(wiki))
            if not repo.head_is_unborn:
                repo.head.peel(pygit2.Commit)
        except (pygit2.GitError, KeyError) as exc:
            raise CliError(f"the archive's wiki repository is broken: {exc}") from exc
    return {"pages": pages, "schema_version": max(version, SCHEMA_VERSION), "segments": segments}


def swap_in(data_dir: Path, staged: Path, stamp: str) -> None:
    """Move the live wiki/, db/, raw/ (and config.toml) aside, the staged ones in, then drop the old.

    Raises:
        CliError: a rename failed; moves already made are reversed, or, when that fails
            too, the message names the directory holding the previous data.
    """
    previous = data_dir / f".restore-previous-{stamp}"
    previous.mkdir()
    names = [n for n in ("wiki", "db", "raw", "config.toml") if (staged / n).exists()]
    done: list[tuple[Path, Path]] = []
    try:
        for n in names:
            if (data_dir / n).exists():
                (data_dir / n).rename(previous / n)
                done.append((previous / n, data_dir / n))
            (staged / n).rename(data_dir / n)
            done.append((data_dir / n, staged / n))
    except OSError as exc:
        try:
            for src, dst in reversed(done):
                src.rename(dst)
        except OSError as exc2:
            raise CliError(
                f"INCONSISTENT STATE: restore failed ({exc}) and could not roll back ({exc2}); "
                f"the previous wiki/ and db/ are in {previous}; move them back by hand") from exc2
        shutil.rmtree(previous, ignore_errors=True)
        raise CliError(f"restore failed while swapping, nothing changed: {exc}") from exc
    shutil.rmtree(previous, ignore_errors=True)


def drop_text_index(search_dir: Path) -> None:
    """Remove the page text index (``<data_dir>/search``) of the database a restore replaced.

    The index is keyed by page ids of the DB it was built from: kept beside a restored DB it
    would hold the newer text of every page changed after the backup (and miss its restored
    version), while its completeness marker tells readers to trust it. Without it the
    writer rebuilds it from the restored DB at its next start (searches use FTS5 meanwhile).
    The marker goes first, so a half-removed index is never read.
    """
    from aimem_common.read import textindex

    textindex.marker_path(search_dir).unlink(missing_ok=True)
    shutil.rmtree(search_dir, ignore_errors=True)


def restore(
    source: Path = typer.Option(None, "--from", help="A backup tarball from `aimem backup`."),
    from_replica: bool = typer.Option(False, "--from-replica",
                                      help="Restore from the off-node replicas (git remote + Litestream bucket)."),
    data_dir: Path = typer.Option(None, "--data-dir", help="Data dir to restore into (default: settings)."),
    force: bool = typer.Option(False, "--force", help="Overwrite a data dir that is not empty."),
) -> None:
    """Restore a backup, or the replicas, into the data dir (direct-disk; the stack must be stopped).

    ``--from-replica`` runs the writer's replica restore (``python -m aimem_writer.restore``):
    it clones the wiki from ``replication.git_remote``, restores the DB from
    ``replication.s3_bucket`` with Litestream and reconciles the two; the data dir must hold
    no DB and no wiki yet.
    """
    from aimem_common.archive import extract_archive
    from aimem_common.errors import AimemError

    settings = load_settings(data_dir)
    ddir = settings.data_dir
    if from_replica == (source is not None):
        fail("pass exactly one of --from TARBALL or --from-replica")
    if from_replica:
        why = stack_alive(settings)
        if why:
            fail(f"{why}; stop it before restoring")
        _run_writer_module(WRITER_RESTORE, "restore --from-replica", ddir, "replica restore")
        return
    if not source.is_file():
        fail(f"{source} is not a file")
    why = stack_alive(settings)
    if why:
        fail(f"{why}; stop it before restoring")
    ddir.mkdir(parents=True, exist_ok=True)
    if any((ddir / n).exists() and any((ddir / n).iterdir()) for n in ("wiki", "db")) and not force:
        fail("data dir not empty; pass --force to overwrite")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
    staged = ddir / f".restore-staging-{stamp}"
    staged.mkdir()
    try:
        try:
            extract_archive(source, staged)
        except AimemError as exc:
            raise CliError(exc.message) from exc
        info = verify_staged(staged)
        why = stack_alive(settings)  # the stack may have started meanwhile
        if why:
            raise CliError(f"{why}; stop it before restoring")
        swap_in(ddir, staged, stamp)
        drop_text_index(settings.search_dir)
    except CliError as exc:
        fail(str(exc))
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    seg = info["segments"]
    typer.echo(f"restored {source} into {ddir}: {info['pages']} pages, schema v{info['schema_version']}, "
               f"{seg['kept'] + seg['rewritten']} workstream segment(s)"
               + (f" ({seg['rewritten']} written back from the database)" if seg["rewritten"] else ""))


def reindex(
    data_dir: Path = typer.Option(..., "--data-dir", help="The aimem data directory (holds wiki/ and db/)."),
) -> None:
    """Rebuild an empty SQLite index from the wiki (workspaces, projects, pages, links, FTS).

    Refuses while a writer is alive on DATA_DIR or when the database already has rows:
    move db/memory.sqlite (and its -wal/-shm) aside first. Sessions, observations,
    handoffs and audit rows live only in SQLite and are not rebuilt.
    """
    _run_writer_module(WRITER_REINDEX, "reindex", data_dir, "rebuild")


def _run_writer_module(module: str, what: str, data_dir: Path, runs: str) -> None:
    """Run ``python -m <module> --data-dir DIR`` (the writer's ``runs``); exit with its code."""
    if importlib.util.find_spec(module.split(".")[0]) is None:
        fail(f"{what} needs the aimem-writer package installed (it runs the writer's {runs})")
    done = subprocess.run([sys.executable, "-m", module, "--data-dir", str(data_dir)])
    if done.returncode:
        raise typer.Exit(done.returncode)


def replicate_db(
    data_dir: Path = typer.Option(None, "--data-dir", help="The aimem data directory (default: settings)."),
) -> None:
    """Run Litestream on db/memory.sqlite with the replication settings (compose sidecar).

    Writes <data_dir>/db/litestream.yml from the settings and replaces this process with
    ``litestream replicate`` (AWS_CA_BUNDLE dropped: Litestream refuses custom CAs). The
    bucket credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
    """
    from aimem_common.replication import litestream_binary, litestream_env, write_litestream_config

    try:
        settings = config.load(data_dir)
    except config.ConfigError as exc:
        fail(exc.message)
    if not settings.replication.s3_bucket:
        fail("replicate-db: replication.s3_bucket is not set")
    try:
        binary = litestream_binary()
    except FileNotFoundError as exc:
        fail(str(exc))
    cfg = write_litestream_config(settings)
    os.execve(binary, [binary, "replicate", "-config", str(cfg)], litestream_env(config.child_environ()))


def register(app: typer.Typer) -> None:
    """Add ``backup``, ``restore``, ``reindex`` and ``replicate-db`` to the ``aimem`` app."""
    app.command("backup")(backup)
    app.command("restore")(restore)
    app.command("reindex")(reindex)
    app.command("replicate-db")(replicate_db)
