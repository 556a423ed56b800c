"""Managed workstreams.

``aimem run``, ``continue``, ``resume``, ``workstreams``, ``show``, ``workstream-search``,
``rename-workstream``, ``workstream-delete``, ``audit-contamination``.

``run``/``continue`` launch a harness in this checkout's workstream (``aimem_cli.managed``)
and talk to ingress with the hook client's URL and token; the others read the query
service (``/api/v1/.../workstreams``) or, for a rename, write through ingress; a delete goes
to the admin API (``/admin/workstream-delete``).
"""

from __future__ import annotations

import json

from pathlib import Path
from typing import Any

import typer

from aimem_cli.client import CliError
from aimem_cli.commands.base import JsonOpt, PjOpt, ServerOpt, TokenOpt, WsOpt, client, emit, fail, project_prefix, scope, table
from aimem_common.workstreams import HARNESSES, HEARTBEAT_SECONDS, LEASE_SECONDS

RUN_HELP = (
    "Launch an agent CLI in this checkout's managed workstream.\n\n"
    f"HARNESS is one of {', '.join(HARNESSES)}; left out, the workstream's newest harness whose CLI is "
    "on your PATH. "
    "Everything after `--` goes to the harness, e.g. `aimem run claude-code -- -p \"fix the test\"`.\n\n"
    "The run holds a renewable lease on the workstream (one run at a time; a killed launcher's lease "
    f"expires after {LEASE_SECONDS} s). Every hook of the child carries AIMEM_RUN_ID, so its session start "
    "is handed, after any pending handoff, the workstream events it has not seen (from any harness, "
    "behind an origin marker, fenced). When the child exits, its visible transcript and a git checkpoint "
    "(branch, HEAD, changed files) are added to the ledger.\n\n"
    "Each harness resumes its own native session of the workstream (a harness new to it starts a fresh "
    "one). The first launch of a harness wires its hooks and MCP server into your files when it has no "
    "aimem hook yet (--no-autowire: do it yourself with `aimem setup-agent --client HARNESS`)."
)


def _ingress() -> tuple[str, str | None]:
    from aimem_cli.hookconfig import client_settings

    cfg = client_settings()[1]
    return str(cfg["url"]), cfg.get("token")


NoAutowireOpt = typer.Option(False, "--no-autowire", help="Never install the harness's hooks and MCP server.")


def _launch(harness: str | None, args: list[str], lease_s: int, heartbeat_s: float, cwd: Path | None = None,
            no_autowire: bool = False) -> None:
    from aimem_cli.hookconfig import client_settings
    from aimem_cli.managed import RunError, run

    url, token = _ingress()
    try:
        result = run(harness, args, cwd=cwd or Path.cwd(), url=url, token=token, lease_s=lease_s,
                     heartbeat_s=heartbeat_s, wire=not no_autowire, client_dir=client_settings()[0])
    except RunError as exc:
        fail(str(exc))
        return
    typer.echo(f"aimem: run {result.run_id} ({result.harness}) exited {result.exit_code}; "
               f"{result.appended} event(s) added to workstream {result.workstream_id}"
               + (f"; {result.dropped_marked} injected packet(s) not re-imported" if result.dropped_marked else ""),
               err=True)
    raise typer.Exit(result.exit_code)


def run_cmd(
    harness: str = typer.Argument(None, help=f"One of {', '.join(HARNESSES)}; default: the workstream's newest one installed here."),
    args: list[str] = typer.Argument(None, help="Arguments for the harness, after `--`."),
    lease_s: int = typer.Option(LEASE_SECONDS, "--lease-seconds", min=5, max=600, help="Lease length."),
    heartbeat_s: float = typer.Option(HEARTBEAT_SECONDS, "--heartbeat-seconds", min=0.5, help="Renewal interval."),
    no_autowire: bool = NoAutowireOpt,
) -> None:
    _launch(harness, list(args or []), lease_s, heartbeat_s, no_autowire=no_autowire)


run_cmd.__doc__ = RUN_HELP


def continue_cmd(
    args: list[str] = typer.Argument(None, help="Arguments for the harness, after `--`."),
    no_autowire: bool = NoAutowireOpt,
) -> None:
    """Continue this checkout's workstream with its newest harness (`aimem run` without HARNESS)."""
    _launch(None, list(args or []), LEASE_SECONDS, HEARTBEAT_SECONDS, no_autowire=no_autowire)


def resume_cmd(
    workstream: str = typer.Argument(..., help="Workstream id (or a prefix) or name."),
    harness: str = typer.Argument(None, help="Harness; default: the workstream's newest."),
    args: list[str] = typer.Argument(None, help="Arguments for the harness, after `--`."),
    workspace: str | None = WsOpt, project: str | None = PjOpt, server: str | None = ServerOpt,
    token: str | None = TokenOpt, no_autowire: bool = NoAutowireOpt,
) -> None:
    """Resume a named workstream of this project: run its harness in the workstream's checkout."""
    prefix = _here(workspace, project, server, token)
    with client(server, token) as c:
        wid = _resolve_id(c, prefix, workstream)
        root = Path(c.get(f"{prefix}/workstreams/{wid}", last=0)["checkout_root"])
    if not root.is_dir():
        fail(f"the workstream's checkout {root} is not on this machine")
    _launch(harness, list(args or []), LEASE_SECONDS, HEARTBEAT_SECONDS, cwd=root, no_autowire=no_autowire)


def _here(workspace: str | None, project: str | None, server: str | None, token: str | None) -> str:
    """The `/api/v1` prefix of the project meant here (`scope`)."""
    return project_prefix(*scope(workspace, project, server, token))


def workstreams_cmd(workspace: str | None = WsOpt, project: str | None = PjOpt, server: str | None = ServerOpt,
                    token: str | None = TokenOpt, as_json: bool = JsonOpt) -> None:
    """List this project's workstreams (checkout, events, harness cursors, live run).

    A project (or workspace) the server has not seen yet has none: ``[]`` with ``--json``,
    else one line saying how to start one (exit 0).
    """
    ws, pj = scope(workspace, project, server, token)
    with client(server, token) as c:
        try:
            rows = c.get(project_prefix(ws, pj) + "/workstreams")
        except CliError as exc:
            if exc.code not in ("workspace_not_found", "project_not_found"):
                raise
            rows = []
    if not rows and not as_json:
        typer.echo(f"no workstreams in {ws}/{pj} yet (start one with `aimem run HARNESS`)")
        return
    for r in rows:
        r["cursors"] = ", ".join(f"{h['harness']}@{h['delivered_seq']}" for h in r["harnesses"])
        r["leased_by"] = (r["live_run"] or {}).get("harness")
    emit(rows, as_json, lambda rs: table(rs, ["id", "name", "checkout_root", "events", "cursors", "leased_by"]))


def _resolve_id(c: Any, prefix: str, ref: str | None) -> str:
    """Return the one workstream id that ``ref`` names: an id, a prefix of one, or a name.

    ``None`` means this checkout's workstream (the innermost one whose checkout holds the
    current directory). A blank ``ref`` is refused (one line, exit 1) before the server is
    asked: an empty prefix would match every id, so an unset shell variable would pick a
    workstream. No match or more than one is also one line and exit 1.
    """
    if ref is not None and not ref.strip():
        fail("the workstream is empty; pass its id (or a prefix) or its name")
    rows = c.get(prefix + "/workstreams")
    if ref is None:
        here = str(Path.cwd().resolve())
        inside = [r for r in rows if here == r["checkout_root"] or here.startswith(r["checkout_root"].rstrip("/") + "/")]
        if not inside:
            fail("no workstream for this checkout yet (start one with `aimem run HARNESS`)")
        return max(inside, key=lambda r: len(r["checkout_root"]))["id"]
    hits = [r for r in rows if r["id"].startswith(ref) or r["name"] == ref]
    if len(hits) != 1:
        fail(f"{'no' if not hits else 'more than one'} workstream matches {ref!r}")
    return hits[0]["id"]


def show_cmd(workstream: str = typer.Argument(None, help="Id (or a prefix) or name; default: this checkout's."),
             last: int = typer.Option(20, "--last", min=0, max=500, help="How many recent events to print."),
             workspace: str | None = WsOpt, project: str | None = PjOpt, server: str | None = ServerOpt,
             token: str | None = TokenOpt, as_json: bool = JsonOpt) -> None:
    """Show what a workstream holds: its harness cursors, its runs and its last events, and
    this machine's checkout of it with each harness's native session (``client-projects.json``
    of the hook client's data dir, written by ``aimem run``; never sent to the server)."""
    from aimem_cli.hookconfig import client_settings
    from aimem_cli.managed import read_checkouts

    prefix = _here(workspace, project, server, token)
    with client(server, token) as c:
        wid = _resolve_id(c, prefix, workstream)
        got = c.get(f"{prefix}/workstreams/{wid}", last=last)
    got["local_checkout"] = read_checkouts(client_settings()[0])["workstreams"].get(got["id"])
    if as_json:
        typer.echo(json.dumps(got, indent=2, ensure_ascii=False))
        return
    typer.echo(f"workstream {got['id']} \"{got['name']}\" at {got['checkout_root']}: {got['events']} event(s)")
    local = got["local_checkout"]
    if local:
        sessions = ", ".join(f"{h} {sid}" for h, sid in sorted((local.get("harnesses") or {}).items()))
        typer.echo(f"on this machine: {local.get('checkout_root')}" + (f" (native sessions: {sessions})" if sessions else ""))
    table(got["harnesses"], ["harness", "delivered_seq", "last_run_at"])
    table(got["runs"], ["id", "harness", "state", "started_at", "lease_expires_at", "exit_code"])
    for e in got["recent_events"]:
        typer.echo(f"#{e['seq']} {e['harness']} {e['role']}: {' '.join(e['text'].split())[:200]}")


def search_cmd(query: str = typer.Argument(..., help="Words to find in the ledgers."),
               limit: int = typer.Option(20, "--limit", min=1, max=200),
               workspace: str | None = WsOpt, project: str | None = PjOpt, server: str | None = ServerOpt,
               token: str | None = TokenOpt, as_json: bool = JsonOpt) -> None:
    """Search the whole ledger of this project's workstreams (full text)."""
    with client(server, token) as c:
        hits = c.get(_here(workspace, project, server, token) + "/workstreams/search", q=query, limit=limit)
    emit(hits, as_json, lambda rs: table(rs, ["workstream", "seq", "harness", "role", "text"], empty="(no match)"))


def rename_cmd(name: str = typer.Argument(..., help="The new name."),
               workstream: str = typer.Option(None, "--workstream", help="Id (or prefix) or name; default: this checkout's."),
               force: bool = typer.Option(False, "--force", help="Rename even while a run holds a live lease."),
               workspace: str | None = WsOpt, project: str | None = PjOpt, server: str | None = ServerOpt,
               token: str | None = TokenOpt) -> None:
    """Rename a workstream (its display name; the checkout and the ledger stay as they are)."""
    from aimem_cli.identity import resolve
    from aimem_cli.managed import Ingress, RunError

    with client(server, token) as c:
        wid = _resolve_id(c, _here(workspace, project, server, token), workstream)
    url, hook_token = _ingress()
    try:
        got = Ingress(url, token or hook_token, resolve(Path.cwd())).post(
            "/hook/workstream/rename", {"workstream_id": wid, "name": name, "force": force})
    except RunError as exc:
        fail(str(exc))
        return
    typer.echo(f"renamed {got['previous']!r} to {got['name']!r}")


def delete_cmd(workstream: str = typer.Argument(..., help="Id (or a prefix) or name of the workstream."),
               confirm: bool = typer.Option(False, "--confirm", help="Delete; without it, only a preview."),
               force: bool = typer.Option(False, "--force", help="Delete even while a run holds a live lease."),
               workspace: str | None = WsOpt, project: str | None = PjOpt, server: str | None = ServerOpt,
               token: str | None = TokenOpt, as_json: bool = JsonOpt) -> None:
    """Delete a workstream and its whole ledger (events, raw segments, runs). Preview without --confirm.

    Refused (exit 1, one line) while a run holds a live lease unless --force, and when an
    admission webhook of the operation delete_ledger says no.
    """
    from aimem_cli.commands.lifecycle import _partial, _preview_then_refuse

    ws, pj = scope(workspace, project, server, token)
    with client(server, token) as c:
        wid = _resolve_id(c, project_prefix(ws, pj), workstream)
        body = {"workspace": ws, "project": pj, "workstream_id": wid, "force": force}
        line = lambda d: (f"{'Would delete' if d['dry_run'] else 'Deleted'} workstream {d['name']!r} ({wid}) of "  # noqa: E731
                          f"{ws}/{pj}: {d['workstream_events_deleted']} ledger events, "
                          f"{d['managed_runs_deleted']} runs.")
        if not confirm:
            _preview_then_refuse(c, "/admin/workstream-delete", body, line, "workstream-delete")
        data = c.post("/admin/workstream-delete", {**body, "confirm": True})
    emit(data, as_json, lambda d: typer.echo(line(d)))
    _partial(data)


def audit_cmd(workspace: str | None = WsOpt, project: str | None = PjOpt, server: str | None = ServerOpt,
              token: str | None = TokenOpt, as_json: bool = JsonOpt) -> None:
    """List ledger events that carry an origin marker (an injected packet that got back in); exit 1 when any."""
    with client(server, token) as c:
        hits = c.get(_here(workspace, project, server, token) + "/workstreams/contamination")
    emit(hits, as_json, lambda rs: table(rs, ["workstream_id", "seq", "harness", "role", "text"], empty="clean"))
    if hits:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the workstream commands to the ``aimem`` app."""
    ctx = {"allow_extra_args": True, "ignore_unknown_options": True}
    app.command("run", help=RUN_HELP, context_settings=ctx)(run_cmd)
    app.command("continue", context_settings=ctx)(continue_cmd)
    app.command("resume", context_settings=ctx)(resume_cmd)
    for name, fn in (("workstreams", workstreams_cmd), ("show", show_cmd), ("workstream-search", search_cmd),
                     ("rename-workstream", rename_cmd), ("workstream-delete", delete_cmd),
                     ("audit-contamination", audit_cmd)):
        app.command(name)(fn)



