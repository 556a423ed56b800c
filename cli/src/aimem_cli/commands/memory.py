"""Reads and page writes of the memory over the query API.

``status``, ``search``, ``read-page``, ``write-page``, ``delete-page``, ``recent``,
``handoffs``, ``checkpoints``, ``restore-page``.

Server and token come from ``--server``/``--token`` or settings (env ``AIMEM_SERVER_URL`` /
``AIMEM_AUTH__TOKEN`` or config.toml); read commands take ``--json``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError

from aimem_cli.client import CliError
from aimem_cli.commands.base import (
    JsonOpt, PjOpt, ServerOpt, TokenOpt, WsOpt, client, emit, fail, project_prefix, scope, table,
)
from aimem_common.commands.envelope import first_error
from aimem_common.search.params import SearchParams, param_specs


def status(server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt) -> None:
    """Show store counts, versions, data dir, DB size, writer lag, the last checkpoint and the
    projects' backfills on start (the one import of local history a new project gets).

    A user key (no root grant) gets the figures of the projects it can read
    (``/api/v1/status``) instead of the store-wide ``/admin/status``.
    """
    with client(server, token) as c:
        try:
            data = c.get("/admin/status")
        except CliError as exc:
            if exc.status != 403:
                raise
            data = c.get("/api/v1/status")

    def human(d: dict) -> None:
        typer.echo(f"aimem {d.get('version')}  schema v{d.get('schema_version')}  data dir {d.get('data_dir')}")
        imports = f"  imports waiting {d['import_lag']}" if d.get("import_lag") else ""
        typer.echo(f"db {(d.get('db_bytes') or 0) / 1e6:.1f} MB  writer lag {d.get('writer_lag')}{imports}"
                   f"  dead letters {d.get('dead_letters_open', 0)}")
        last = d.get("last_checkpoint") or {}
        typer.echo(f"last checkpoint {last.get('short', '-')} {last.get('time', '')}")
        for target, rep in (d.get("replication") or {}).items():  # off-node copies (db, wiki)
            if isinstance(rep, dict) and rep.get("enabled"):
                state = "BEHIND" if rep.get("behind") else "ok"
                typer.echo(f"replication {target}: {state}, lag {rep.get('lag_s', 0):.1f} s"
                           + (f" ({rep['error']})" if rep.get("error") else ""))
        typer.echo("  ".join(f"{k}={v}" for k, v in (d.get("counts") or {}).items()))
        # aliases: the other roots a project was seen at (a moved, renamed or second checkout).
        rows = [{**p, "aliases": ", ".join(p.get("aliases") or []) or "-"} for p in d.get("projects") or []]
        table(rows, ["workspace", "project", "pages", "sessions", "origin", "root", "aliases"])
        backfills = d.get("backfills") or []  # a new project's one import of local history
        if backfills:
            typer.echo("backfill on start:")
            table([{**b, "truncated": "yes" if b.get("truncated") else "-", "error": b.get("error") or "-"}
                   for b in backfills],
                  ["workspace", "project", "agent", "state", "claimed_at", "files", "sessions", "events",
                   "new_events", "truncated", "error"])

    emit(data, as_json, human)


# `aimem search`'s flags are made from SearchParams (aimem_common.search.params): the same names,
# bounds, defaults and help as the API, MCP and the web form (cli/tests/test_search_flags.py).
SEARCH_PARAMS = {spec.name: spec for spec in param_specs()}


def search_option(name: str, *aliases: str, default_note: str = "") -> Any:
    """The ``typer.Option`` of the ``SearchParams`` field ``name``: ``--<name>`` (``_`` as ``-``)
    plus ``aliases``, its default, bounds and help from the model; ``default_note`` says what the
    CLI fills in when the option is left out (the current directory's project)."""
    spec = SEARCH_PARAMS[name]
    bounds = {"min": spec.minimum, "max": spec.maximum} if spec.kind == "count" else {}
    return typer.Option(spec.default if spec.kind == "flag" else None, "--" + spec.name.replace("_", "-"),
                        *aliases, help=spec.help + default_note, **bounds)


def search(
    query: str = typer.Argument(..., help=SEARCH_PARAMS["query"].help),
    workspace: str | None = search_option("workspace", "-w", default_note=" Default: settings.workspace_default."),
    project: str | None = search_option(
        "project", "-p", default_note=" Default: the one this checkout's sessions are filed under (.aimem.toml, "
        "else the server's project for its repository)."),
    limit: int | None = search_option("limit"),
    scopes: list[str] | None = search_option("scopes"),
    global_: bool = search_option("global", "--all"),
    explain: bool = search_option("explain"),
    include_expired: bool = search_option("include_expired"),
    include_superseded: bool = search_option("include_superseded"),
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Search the memory (every stream fused; --explain: each stream's rank per hit)."""
    given = dict(locals())  # each SearchParams field arrives as the parameter of its name
    values = {spec.name: given[spec.field] for spec in SEARCH_PARAMS.values()}
    if not global_:  # one project and its siblings: this directory's unless named
        values["workspace"], values["project"] = scope(workspace, project, server, token)
    values["scopes"] = scopes or []
    try:
        params = SearchParams.model_validate(values)
    except ValidationError as exc:
        fail(first_error(exc))
        raise  # unreachable
    with client(server, token) as c:
        data = c.post("/api/v1/search", params.model_dump(by_alias=True, exclude_defaults=True))

    def human(d: dict) -> None:
        hits = d.get("hits") or []
        if explain:
            hits = [{**h, "streams": stream_ranks(h)} for h in hits]
            skipped = ", ".join(f"{k} ({v})" for k, v in (d.get("streams_skipped") or {}).items())
            typer.echo(f"streams run: {', '.join(d.get('streams_active') or []) or '-'}"
                       + (f"; skipped: {skipped}" if skipped else ""))
        table(hits, ["score", "project", "path", "title", *(["streams"] if explain else []), "snippet"],
              empty="no hits")
        if d.get("raw_hits"):
            typer.echo("\nraw observations:")
            table(d["raw_hits"], ["session_id", "kind", "snippet"])

    emit(data, as_json, human)


def stream_ranks(hit: dict[str, Any]) -> str:
    """``"fts#1 turns#3"``: each stream that found ``hit`` and its rank there, best first
    (from the explain ``score_details.streams``; ``"-"`` without them)."""
    streams = (hit.get("score_details") or {}).get("streams") or {}
    ranked = sorted(streams.items(), key=lambda kv: (kv[1].get("rank") or 10**9, kv[0]))
    return " ".join(f"{name}#{info.get('rank')}" for name, info in ranked) or "-"


def read_page(
    path: str = typer.Argument(..., help="Page path, e.g. decisions/0001.md."),
    workspace: str = WsOpt, project: str = PjOpt,
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Print one live page (body; --json for frontmatter, links and backlinks too)."""
    ws, pj = scope(workspace, project, server, token)
    with client(server, token) as c:
        data = c.get(f"{project_prefix(ws, pj)}/page", path=path)
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
    ws, pj = scope(workspace, project, server, token)
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
    ws, pj = scope(workspace, project, server, token)
    with client(server, token) as c:
        data = c.request("DELETE", "/admin/pages", params={"workspace": ws, "project": pj, "path": path})
    emit(data, as_json, lambda d: typer.echo(f"{'deleted' if d.get('deleted') else 'no live page at'} {ws}/{pj}:{path}"))


def recent(
    workspace: str = WsOpt, project: str = PjOpt, limit: int = typer.Option(20, "--limit", min=1, max=500),
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Recently updated pages of a project, newest first."""
    ws, pj = scope(workspace, project, server, token)
    with client(server, token) as c:
        data = c.get(f"{project_prefix(ws, pj)}/recent", limit=limit)
    emit(data, as_json, lambda d: table(d if isinstance(d, list) else d.get("pages", []),
                                       ["updated_at", "path", "title", "kind"]))


def handoffs(
    workspace: str = WsOpt, project: str = PjOpt,
    status_: str = typer.Option("open", "--status", help="open|accepted|expired|superseded|any"),
    expire_all: bool = typer.Option(False, "--expire-all", help="Expire the project's open handoffs "
                                    "(a preview without --confirm)."),
    older_than_days: int = typer.Option(None, "--older-than-days", min=0,
                                        help="With --expire-all: only those opened at least N days ago."),
    confirm: bool = typer.Option(False, "--confirm", help="With --expire-all: really expire them."),
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """List handoffs of a project (without claiming them); --expire-all closes the open ones."""
    ws, pj = scope(workspace, project, server, token)
    if older_than_days is not None and not expire_all:
        fail("--older-than-days goes with --expire-all")
    if expire_all:
        body = {"workspace": ws, "project": pj, "older_than_days": older_than_days}
        with client(server, token) as c:
            data = c.post("/admin/handoffs/expire-all", {**body, "dry_run": not confirm, "confirm": confirm})
        verb = "Expired" if confirm else "Would expire"
        emit(data, as_json, lambda d: typer.echo(
            f"{verb} {d['count']} open handoff(s) of {ws}/{pj}" + (f": {d['expired']}" if d["expired"] else "")
            + ("" if confirm else "; re-run with --confirm")))
        return
    with client(server, token) as c:
        data = c.get(f"{project_prefix(ws, pj)}/handoffs", status=status_)
    emit(data, as_json, lambda d: table(d, ["id", "status", "automatic", "event_at", "cwd", "title"]))


def checkpoints(
    limit: int = typer.Option(20, "--limit", min=1, max=1000),
    path: str = typer.Option(None, "--path", help="Only checkpoints that changed this page."),
    workspace: str = WsOpt, project: str = PjOpt,
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """List wiki git checkpoints, newest first (the short id is enough for restore-page)."""
    params: dict[str, Any] = {"limit": limit}
    if path:
        ws, pj = scope(workspace, project, server, token)
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
    ws, pj = scope(workspace, project, server, token)
    with client(server, token) as c:
        data = c.post("/admin/restore-page", {"workspace": ws, "project": pj, "path": path, "from": rev,
                                              "page_id": page_id})
    emit(data, as_json, lambda d: typer.echo(
        f"restored {ws}/{pj}:{d.get('path')} as page {d.get('page_id')} from {d.get('restored_from')}"))




def register(app: typer.Typer) -> None:
    """Add the memory commands to the ``aimem`` app."""
    for name, fn in (
        ("status", status), ("search", search), ("read-page", read_page), ("write-page", write_page),
        ("delete-page", delete_page), ("recent", recent), ("handoffs", handoffs), ("checkpoints", checkpoints),
        ("restore-page", restore_page),
    ):
        app.command(name)(fn)
