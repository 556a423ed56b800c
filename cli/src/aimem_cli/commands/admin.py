"""Operator commands: reads and writes over the query API, lifecycle ops over ``/admin``,
``backup``/``restore``, users and keys, and ``doctor``.

Every command but ``restore`` talks HTTP to the query service (``--server``, default
``settings.server_url``; token ``--token``, default ``settings.auth.token``, both from
``config.load()``: env ``AIMEM_SERVER_URL`` / ``AIMEM_AUTH__TOKEN`` or config.toml).
Read commands take ``--json``. A failure prints one line ``aimem: <reason>`` on stderr and
exits 1.

``restore`` is direct-disk (seed 003): it refuses while anything of the stack is alive
(the writer's ``flock``, a listening service port, an aimem process on the same data dir),
stages and verifies the archive beside the live data, then swaps with rollback.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

from aimem_cli.client import CliError, Client
from aimem_common import config

SERVICE_MODULES = ("aimem_writer", "aimem_ingress", "aimem_query", "aimem_mcp", "aimem_maintainer")

# -- shared plumbing -------------------------------------------------------------------------
ServerOpt = typer.Option(None, "--server", help="Query service URL (default: settings.server_url).")
TokenOpt = typer.Option(None, "--token", help="Bearer token (default: AIMEM_AUTH__TOKEN / config.toml).")
JsonOpt = typer.Option(False, "--json", help="Print JSON instead of a table.")
WsOpt = typer.Option(None, "--workspace", "-w", help="Workspace (default: settings.workspace_default).")
PjOpt = typer.Option(None, "--project", "-p", help="Project (default: the current directory's name).")


def fail(message: str) -> None:
    """Print ``aimem: <message>`` on stderr and exit 1."""
    typer.echo(f"aimem: {message}", err=True)
    raise typer.Exit(1)


def _settings(data_dir: Path | None = None) -> config.Settings:
    try:
        return config.load(data_dir, check_writable=False)
    except config.ConfigError as exc:
        fail(exc.message)
        raise  # unreachable


@contextmanager
def client(server: str | None, token: str | None) -> Iterator[Client]:
    """Yield a ``Client`` for the configured server; turn ``CliError`` into exit 1."""
    s = _settings()
    c = Client(server or s.server_url, token if token is not None else s.auth.token)
    try:
        yield c
    except CliError as exc:
        fail(str(exc))
    finally:
        c.close()


def scope(workspace: str | None, project: str | None) -> tuple[str, str]:
    s = _settings()
    return workspace or s.workspace_default, project or Path.cwd().name


def _proj(workspace: str, project: str) -> str:
    """Return the ``/api/v1`` prefix of one project's routes (names URL-quoted)."""
    from urllib.parse import quote

    return f"/api/v1/workspaces/{quote(workspace, safe='')}/projects/{quote(project, safe='')}"


def emit(data: Any, as_json: bool, human: Callable[[Any], None]) -> None:
    if as_json:
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    else:
        human(data)


def table(rows: list[dict[str, Any]], cols: list[str], empty: str = "(none)") -> None:
    """Print ``rows`` as an aligned text table with the given columns."""
    if not rows:
        typer.echo(empty)
        return
    cells = [[_cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    typer.echo("  ".join(c.upper().ljust(w) for c, w in zip(cols, widths)).rstrip())
    for row in cells:
        typer.echo("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.3f}"
    text = str(v).replace("\n", " ")
    return text if len(text) <= 80 else text[:77] + "..."


# -- read commands ---------------------------------------------------------------------------
def status(server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt) -> None:
    """Show store counts, versions, data dir, DB size, writer lag and the last checkpoint."""
    with client(server, token) as c:
        data = c.get("/admin/status")

    def human(d: dict) -> None:
        typer.echo(f"aimem {d.get('version')}  schema v{d.get('schema_version')}  data dir {d.get('data_dir')}")
        typer.echo(f"db {d.get('db_bytes', 0) / 1e6:.1f} MB  writer lag {d.get('writer_lag')}"
                   f"  dead letters {d.get('dead_letters_open', 0)}")
        last = d.get("last_checkpoint") or {}
        typer.echo(f"last checkpoint {last.get('short', '-')} {last.get('time', '')}")
        typer.echo("  ".join(f"{k}={v}" for k, v in (d.get("counts") or {}).items()))
        table(d.get("projects") or [], ["workspace", "project", "pages", "sessions"])

    emit(data, as_json, human)


def search(
    query: str = typer.Argument(..., help="The question."),
    workspace: str = WsOpt, project: str = PjOpt,
    all_projects: bool = typer.Option(False, "--all", help="Search every project you can read."),
    limit: int = typer.Option(10, "--limit", min=1, max=100),
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Search the memory (FTS + entities + links, fused)."""
    ws, pj = scope(workspace, project)
    params: dict[str, Any] = {"q": query, "limit": limit}
    if all_projects:
        params["global"] = "true"
    else:
        params.update(workspace=ws, project=pj)
    with client(server, token) as c:
        data = c.get("/api/v1/search", **params)

    def human(d: dict) -> None:
        table(d.get("hits") or [], ["score", "project", "path", "title", "snippet"], empty="no hits")
        if d.get("raw_hits"):
            typer.echo("\nraw observations:")
            table(d["raw_hits"], ["session_id", "kind", "snippet"])

    emit(data, as_json, human)


def read_page(
    path: str = typer.Argument(..., help="Page path, e.g. decisions/0001.md."),
    workspace: str = WsOpt, project: str = PjOpt,
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Print one live page (body; --json for frontmatter, links and backlinks too)."""
    ws, pj = scope(workspace, project)
    with client(server, token) as c:
        data = c.get(f"{_proj(ws, pj)}/page", path=path)
    emit(data, as_json, lambda d: typer.echo(f"# {d.get('title')}  ({d.get('path')}, id {d.get('page_id', d.get('id'))})\n\n{d.get('body', '')}"))


def write_page(
    path: str = typer.Argument(..., help="Page path, e.g. decisions/0002.md."),
    file: Path = typer.Option(None, "--file", "-f", help="Read the body from this file (default: stdin)."),
    title: str = typer.Option(None, "--title"),
    create_only: bool = typer.Option(False, "--create-only", help="Fail if the page exists."),
    expected_page_id: int = typer.Option(None, "--expected-page-id", help="Fail unless the live version id is this."),
    workspace: str = WsOpt, project: str = PjOpt,
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Create or supersede a page (markdown, optional frontmatter)."""
    ws, pj = scope(workspace, project)
    try:
        body = file.read_text("utf-8") if file else sys.stdin.read()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read the page body: {exc}")
    payload = {"workspace": ws, "project": pj, "path": path, "body": body, "title": title,
               "create_only": create_only, "expected_page_id": expected_page_id}
    with client(server, token) as c:
        data = c.post("/admin/pages", payload)
    emit(data, as_json, lambda d: typer.echo(
        f"{'created' if d.get('created') else ('updated' if d.get('changed') else 'unchanged')} "
        f"{ws}/{pj}:{d.get('path')} (page {d.get('page_id')}, version {d.get('version')})"))


def delete_page(
    path: str = typer.Argument(...), workspace: str = WsOpt, project: str = PjOpt,
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Delete a live page (its history stays in git and as retired versions)."""
    ws, pj = scope(workspace, project)
    with client(server, token) as c:
        data = c.request("DELETE", "/admin/pages", params={"workspace": ws, "project": pj, "path": path})
    emit(data, as_json, lambda d: typer.echo(f"{'deleted' if d.get('deleted') else 'no live page at'} {ws}/{pj}:{path}"))


def recent(
    workspace: str = WsOpt, project: str = PjOpt, limit: int = typer.Option(20, "--limit", min=1, max=500),
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Recently updated pages of a project, newest first."""
    ws, pj = scope(workspace, project)
    with client(server, token) as c:
        data = c.get(f"{_proj(ws, pj)}/recent", limit=limit)
    emit(data, as_json, lambda d: table(d if isinstance(d, list) else d.get("pages", []),
                                       ["updated_at", "path", "title", "kind"]))


def handoffs(
    workspace: str = WsOpt, project: str = PjOpt,
    status_: str = typer.Option("open", "--status", help="open|accepted|expired|any"),
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """List handoffs of a project (without claiming them)."""
    ws, pj = scope(workspace, project)
    with client(server, token) as c:
        data = c.get(f"{_proj(ws, pj)}/handoffs", status=status_)
    emit(data, as_json, lambda d: table(d, ["id", "status", "automatic", "created_at", "cwd", "title"]))


def checkpoints(
    limit: int = typer.Option(20, "--limit", min=1, max=1000),
    path: str = typer.Option(None, "--path", help="Only checkpoints that changed this page."),
    workspace: str = WsOpt, project: str = PjOpt,
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """List wiki git checkpoints, newest first (the short id is enough for restore-page)."""
    params: dict[str, Any] = {"limit": limit}
    if path:
        ws, pj = scope(workspace, project)
        params.update(workspace=ws, project=pj, path=path)
    with client(server, token) as c:
        data = c.get("/admin/checkpoints", **params)
    emit(data, as_json, lambda d: table(d.get("checkpoints", []), ["short", "time", "message"]))


def restore_page(
    path: str = typer.Option(None, "--path", help="Page path (required with --from)."),
    rev: str = typer.Option(None, "--from", help="Checkpoint id (from `aimem checkpoints`)."),
    page_id: int = typer.Option(None, "--page-id", help="A retained page version id instead of --from."),
    workspace: str = WsOpt, project: str = PjOpt,
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Write one page back from a checkpoint or a retained version (a new latest version)."""
    if (rev is None) == (page_id is None):
        fail("give exactly one of --from or --page-id")
    ws, pj = scope(workspace, project)
    with client(server, token) as c:
        data = c.post("/admin/restore-page", {"workspace": ws, "project": pj, "path": path, "from": rev,
                                              "page_id": page_id})
    emit(data, as_json, lambda d: typer.echo(
        f"restored {ws}/{pj}:{d.get('path')} as page {d.get('page_id')} from {d.get('restored_from')}"))


# -- backup / restore ------------------------------------------------------------------------
def backup(
    to: Path = typer.Option(..., "--to", help="Where to write the .tar.gz."),
    server: str = ServerOpt, token: str = TokenOpt,
) -> None:
    """Download a consistent backup (DB snapshot + wiki + config.toml) while the stack runs."""
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
        is_service = any(a in SERVICE_MODULES for a in args)
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
    """Open the staged store: integrity check, schema version, migrations, git repo.

    Raises:
        CliError: the snapshot is corrupt, newer than this release, or the wiki repo is broken.
    """
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
    return {"pages": pages, "schema_version": max(version, SCHEMA_VERSION)}


def swap_in(data_dir: Path, staged: Path, stamp: str) -> None:
    """Move the live wiki/, db/ (and config.toml) aside, the staged ones in, then drop the old.

    Raises:
        CliError: a rename failed; moves already made are reversed, or, when that fails
            too, the message names the directory holding the previous data.
    """
    previous = data_dir / f".restore-previous-{stamp}"
    previous.mkdir()
    names = [n for n in ("wiki", "db", "config.toml") if (staged / n).exists()]
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


def restore(
    source: Path = typer.Option(..., "--from", help="A backup tarball from `aimem backup`."),
    data_dir: Path = typer.Option(None, "--data-dir", help="Data dir to restore into (default: settings)."),
    force: bool = typer.Option(False, "--force", help="Overwrite a data dir that is not empty."),
) -> None:
    """Restore a backup into the data dir (direct-disk; the stack must be stopped)."""
    from aimem_common.archive import extract_archive
    from aimem_common.errors import AimemError

    settings = _settings(data_dir)
    ddir = settings.data_dir
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
    except CliError as exc:
        fail(str(exc))
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    typer.echo(f"restored {source} into {ddir}: {info['pages']} pages, schema v{info['schema_version']}")


# -- lifecycle ---------------------------------------------------------------------------------
def _counts_line(d: dict, keys: list[tuple[str, str]]) -> str:
    return ", ".join(f"{d.get(k, 0)} {label}" for k, label in keys)


def _preview_then_refuse(c: Client, path: str, body: dict, line: Callable[[dict], str], what: str) -> None:
    try:
        preview = c.post(path, {**body, "dry_run": True})
        typer.echo(line(preview))
    except CliError as exc:
        if exc.status is not None and exc.status not in (400,):
            typer.echo(f"aimem: {exc}", err=True)
    fail(f"{what} is destructive and irreversible; re-run with --confirm")


def _collateral(d: dict) -> str:
    extra = []
    if d.get("collateral_observations_deleted"):
        extra.append(f"Plus {d['collateral_observations_deleted']} observations in other projects")
    if d.get("collateral_handoffs_denulled"):
        extra.append(f"Plus {d['collateral_handoffs_denulled']} handoffs in other projects lose their session link")
    return ("\n" + "\n".join(extra)) if extra else ""


def purge_session(
    session_id: str = typer.Option(..., "--session-id"),
    confirm: bool = typer.Option(False, "--confirm"), compact: bool = typer.Option(False, "--compact"),
    workspace: str = WsOpt, project: str = PjOpt,
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Delete one session (observations, handoffs it wrote, its page). Preview without --confirm."""
    ws, pj = scope(workspace, project)
    body = {"workspace": ws, "project": pj, "session_id": session_id, "compact": compact}
    keys = [("observations_deleted", "observations"), ("handoffs_deleted", "handoffs"),
            ("pages_deleted", "pages"), ("auto_improve_runs_deleted", "auto-improve runs")]
    with client(server, token) as c:
        if not confirm:
            _preview_then_refuse(c, "/admin/purge-session", body,
                                 lambda d: f"Would purge session from {ws}/{pj}: {_counts_line(d, keys)}."
                                 + _collateral(d), "purge-session")
        data = c.post("/admin/purge-session", {**body, "confirm": True})
    emit(data, as_json, lambda d: typer.echo(f"Purged session from {ws}/{pj}: {_counts_line(d, keys)}." + _collateral(d)))


def purge_project(
    confirm: bool = typer.Option(False, "--confirm"), compact: bool = typer.Option(False, "--compact"),
    force: bool = typer.Option(False, "--force", help="Purge even with a live session."),
    workspace: str = WsOpt, project: str = PjOpt,
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Delete a project and everything it owns. Preview without --confirm."""
    ws, pj = scope(workspace, project)
    body = {"workspace": ws, "project": pj, "compact": compact, "force": force}
    keys = [("pages_deleted", "pages"), ("sessions_deleted", "sessions"), ("observations_deleted", "observations"),
            ("handoffs_deleted", "handoffs"), ("embeddings_deleted", "embeddings")]
    with client(server, token) as c:
        if not confirm:
            _preview_then_refuse(c, "/admin/purge-project", body,
                                 lambda d: f"Would purge {ws}/{pj}: {_counts_line(d, keys)}." + _collateral(d),
                                 "purge-project")
        data = c.post("/admin/purge-project", {**body, "confirm": True})
    emit(data, as_json, lambda d: typer.echo(f"Purged {ws}/{pj}: {_counts_line(d, keys)}." + _collateral(d)))


def rename_project(
    from_: str = typer.Option(..., "--from"), to: str = typer.Option(..., "--to"),
    workspace: str = WsOpt, server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Rename a project (its files stay where they are: directories use ids)."""
    ws = workspace or _settings().workspace_default
    with client(server, token) as c:
        data = c.post("/admin/rename-project", {"workspace": ws, "from": from_, "to": to})
    emit(data, as_json, lambda d: typer.echo(f"renamed {ws}/{from_} to {ws}/{to} ({d.get('pages')} pages)"))


def rename_workspace(
    from_: str = typer.Option(..., "--from"), to: str = typer.Option(..., "--to"),
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Rename a workspace."""
    with client(server, token) as c:
        data = c.post("/admin/rename-workspace", {"from": from_, "to": to})
    emit(data, as_json, lambda d: typer.echo(f"renamed workspace {from_} to {to}"))


def move_project(
    to_workspace: str = typer.Option(..., "--to-workspace"),
    on_conflict: str = typer.Option("block", "--on-conflict", help="block|overwrite|duplicate (merge only)"),
    confirm: bool = typer.Option(False, "--confirm"), force: bool = typer.Option(False, "--force"),
    workspace: str = typer.Option(None, "--from-workspace", help="Source workspace."),
    project: str = PjOpt, server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Move a project into another workspace (true move, or merge into a same-named project)."""
    if on_conflict not in ("block", "overwrite", "duplicate"):
        fail("--on-conflict must be block, overwrite or duplicate")
    ws, pj = scope(workspace, project)
    body = {"from_workspace": ws, "project": pj, "to_workspace": to_workspace, "on_conflict": on_conflict,
            "force": force}
    with client(server, token) as c:
        if not confirm:
            _preview_then_refuse(c, "/admin/move-project", body, lambda d: (
                f"Would move {ws}/{pj} to {to_workspace} via {d.get('moved_via')}"
                + (f"; {len(d.get('conflicts') or [])} conflict(s)" if d.get("conflicts") else "") + "."),
                "move-project")
        data = c.post("/admin/move-project", {**body, "confirm": True})
    emit(data, as_json, lambda d: typer.echo(
        f"moved {ws}/{pj} to {to_workspace}/{pj} via {d.get('moved_via')}"
        + "".join(f"\n  conflict {x['path']} -> {x['moved_to']}" for x in d.get("conflicts") or [])))


def move_session(
    session_id: str = typer.Argument(None, help="Session id (or use --from-project)."),
    from_project: str = typer.Option(None, "--from-project", help="Move every session of this project."),
    from_workspace: str = typer.Option(None, "--from-workspace"),
    to: str = typer.Option(..., "--to", help="Destination project."),
    to_workspace: str = typer.Option(None, "--to-workspace"),
    pages: str = typer.Option("move", "--pages", help="move|regenerate"),
    confirm: bool = typer.Option(False, "--confirm"), force: bool = typer.Option(False, "--force"),
    create: bool = typer.Option(False, "--create", help="Create the destination project."),
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Re-stamp a session (or every session of a project) into another project. Dry run by default."""
    if (session_id is None) == (from_project is None):
        fail("give a session id or --from-project (not both)")
    if pages not in ("move", "regenerate"):
        fail("--pages must be move or regenerate")
    body = {"session_id": session_id, "from_project": from_project,
            "from_workspace": from_workspace or _settings().workspace_default, "workspace": to_workspace,
            "project": to, "pages": pages, "confirm": confirm, "force": force, "create": create}
    with client(server, token) as c:
        data = c.post("/admin/move-session", body)

    def human(d: dict) -> None:
        reports = d.get("sessions") or [d]
        verb = "would move" if d.get("dry_run") else "moved"
        for r in reports:
            s = r.get("summary", {})
            typer.echo(f"{verb} session {r.get('session_id')} to {r['to']['workspace']}/{r['to']['project']}: "
                       f"{s.get('observations', 0)} observations, {s.get('handoffs', 0)} handoffs, page {r.get('page')}")
            for sc in r.get("source_scopes") or []:
                typer.echo(f"    {sc['workspace']}/{sc['project']}: {sc['observations']} observation(s)")
        if d.get("would_create_project"):
            typer.echo("would create project")
        if d.get("dry_run"):
            typer.echo("dry run: re-run with --confirm to apply")

    emit(data, as_json, human)


# -- users, keys, grants -----------------------------------------------------------------------
user_app = typer.Typer(help="Manage users (and their grants).", no_args_is_help=True)
key_app = typer.Typer(help="Manage API keys (aim_...).", no_args_is_help=True)


@user_app.command("list")
def user_list(server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt) -> None:
    """List users."""
    with client(server, token) as c:
        data = c.get("/admin/users")
    emit(data, as_json, lambda d: table(d["users"], ["name", "is_root", "keys", "created_at"]))


@user_app.command("create")
def user_create(name: str, root: bool = typer.Option(False, "--root", help="May use /admin."),
                server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt) -> None:
    """Create a user."""
    with client(server, token) as c:
        data = c.post("/admin/users", {"name": name, "is_root": root})
    emit(data, as_json, lambda d: typer.echo(f"created user {name}{' (root)' if root else ''}"))


@user_app.command("delete")
def user_delete(name: str, server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt) -> None:
    """Delete a user with its keys and grants."""
    with client(server, token) as c:
        data = c.request("DELETE", f"/admin/users/{name}")
    emit(data, as_json, lambda d: typer.echo(f"deleted user {name} ({d.get('api_keys_deleted')} keys)"))


@user_app.command("grant")
def user_grant(
    name: str, workspace: str = typer.Option("*", "--workspace", "-w"), project: str = typer.Option("*", "--project", "-p"),
    write: bool = typer.Option(False, "--write", help="Read and write (default: read only)."),
    remove: bool = typer.Option(False, "--remove"),
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Grant (or --remove) a user's access to a workspace/project (names or *)."""
    with client(server, token) as c:
        data = c.request("PUT", "/admin/grants", json={"user": name, "workspace": workspace, "project": project,
                                                       "can_read": True, "can_write": write, "remove": remove})
    emit(data, as_json, lambda d: typer.echo(
        f"{'removed' if remove else 'granted'} {name} {'read/write' if write else 'read'} on {workspace}/{project}"))


@user_app.command("grants")
def user_grants(name: str = typer.Argument(None), server: str = ServerOpt, token: str = TokenOpt,
                as_json: bool = JsonOpt) -> None:
    """List grants (of one user, or all)."""
    with client(server, token) as c:
        data = c.get("/admin/grants", user=name)
    emit(data, as_json, lambda d: table(d["grants"], ["user", "workspace", "project", "can_read", "can_write"]))


@key_app.command("create")
def key_create(user: str, name: str = typer.Option(None, "--name"),
               server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt) -> None:
    """Create an API key for a user; the key is shown once."""
    with client(server, token) as c:
        data = c.post("/admin/api-keys", {"user": user, "name": name})
    emit(data, as_json, lambda d: typer.echo(f"{d['key']}\n(key id {d['id']} for {user}; shown once, store it now)"))


@key_app.command("list")
def key_list(user: str = typer.Option(None, "--user"), server: str = ServerOpt, token: str = TokenOpt,
             as_json: bool = JsonOpt) -> None:
    """List API keys (prefixes only)."""
    with client(server, token) as c:
        data = c.get("/admin/api-keys", user=user)
    emit(data, as_json, lambda d: table(d["api_keys"], ["id", "user", "name", "prefix", "created_at", "revoked_at"]))


@key_app.command("revoke")
def key_revoke(key_id: int, server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt) -> None:
    """Revoke an API key by id."""
    with client(server, token) as c:
        data = c.request("DELETE", f"/admin/api-keys/{key_id}")
    emit(data, as_json, lambda d: typer.echo(f"key {key_id} {'revoked' if d.get('revoked') else 'was already revoked'}"))


# -- doctor ----------------------------------------------------------------------------------
def _failing_checks(r: Any) -> dict[str, Any]:
    """Return the failed checks of a ``/healthz`` answer (``{name: detail}``), {} when unreadable."""
    try:
        checks = r.json().get("checks") or {}
    except ValueError:
        return {}
    return {k: v for k, v in checks.items()
            if v is False or (isinstance(v, dict) and v.get("ok") is False)}


def doctor(
    data_dir: Path = typer.Option(None, "--data-dir"), server: str = ServerOpt, token: str = TokenOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Check every service's /healthz, NATS, the database and the wiki's git repo."""
    import httpx

    settings = _settings(data_dir)
    checks: list[dict[str, Any]] = []

    def add(name: str, ok: bool, detail: str) -> None:
        checks.append({"check": name, "ok": ok, "detail": detail})

    from urllib.parse import urlparse

    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    port_base, scheme = settings.port_base, "http"
    given = urlparse(server) if server else None
    if given and given.hostname and given.port:  # `--server http://h:9702`: its siblings are h:9701...
        host, scheme = given.hostname, given.scheme or "http"
        port_base = given.port - config.PORT_OFFSETS["query"]
    for svc in config.SERVICES:
        own = f"{scheme}://{host}:{port_base + config.PORT_OFFSETS[svc]}"
        url = (server.rstrip("/") if (svc == "query" and server) else own) + "/healthz"
        t0 = time.perf_counter()
        try:
            r = httpx.get(url, timeout=2.0)
            detail = f"{url} {r.status_code} in {(time.perf_counter() - t0) * 1000:.0f} ms"
            if r.status_code != 200:
                detail += "".join(f"; {k}: {v}" for k, v in _failing_checks(r).items())
            add(svc, r.status_code == 200, detail)
        except httpx.HTTPError as exc:
            add(svc, False, f"{url}: {type(exc).__name__}")
    u = urlparse(settings.bus.nats_url)
    with socket.socket() as s:
        s.settimeout(1.0)
        add("nats", s.connect_ex((u.hostname or "127.0.0.1", u.port or 4222)) == 0, settings.bus.nats_url)
    db = settings.db_path
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            quick = conn.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            conn.close()
        add("db", quick == "ok", f"{db} schema v{version}, quick_check {quick}")
        from aimem_common.read.dead_letters import count_open

        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            n_dead = count_open(conn)
        finally:
            conn.close()
        add("dead-letters", n_dead == 0, f"{n_dead} open" + (" (aimem dead-letters list)" if n_dead else ""))
    except sqlite3.Error as exc:
        add("db", False, f"{db}: {exc}")
    try:
        import pygit2

        repo = pygit2.Repository(str(settings.wiki_dir))
        head = "unborn" if repo.head_is_unborn else str(repo.head.target)[:10]
        add("git", True, f"{settings.wiki_dir} HEAD {head}")
    except Exception as exc:  # noqa: BLE001 - any git failure is a failed check
        add("git", False, f"{settings.wiki_dir}: {exc}")
    ok = all(c["ok"] for c in checks)
    emit({"ok": ok, "checks": checks}, as_json,
         lambda d: [typer.echo(f"{'ok  ' if c['ok'] else 'FAIL'}  {c['check']:<12} {c['detail']}") for c in d["checks"]])
    if not ok:
        raise typer.Exit(1)


# -- registration ------------------------------------------------------------------------------
def register(app: typer.Typer) -> None:
    """Add the operator commands to the ``aimem`` app."""
    for name, fn in (
        ("status", status), ("search", search), ("read-page", read_page), ("write-page", write_page),
        ("delete-page", delete_page), ("recent", recent), ("handoffs", handoffs), ("checkpoints", checkpoints),
        ("restore-page", restore_page), ("backup", backup), ("restore", restore),
        ("purge-session", purge_session), ("purge-project", purge_project), ("rename-project", rename_project),
        ("rename-workspace", rename_workspace), ("move-project", move_project), ("move-session", move_session),
        ("doctor", doctor),
    ):
        app.command(name)(fn)
    app.add_typer(user_app, name="user")
    app.add_typer(key_app, name="api-key")
