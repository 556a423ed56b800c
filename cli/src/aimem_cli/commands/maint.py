"""Maintainer commands.

``forget-sweep``, ``finalize-idle``, ``lint``, ``auto-improve``, ``pending-writes``, ``embed``,
``auto-improve-report``, ``curator``.

They ask the running maintainer over NATS request/reply (``aimem_common.maint_rpc``) at
``--nats`` (default ``settings.bus.nats_url``), so they work wherever the bus is reachable.
The project defaults to the current directory's identity (its ``.aimem.toml`` marker,
else the repository's name, else the directory's); ``--all`` (sweep, lint, embed) runs
over every workspace/project. ``--json`` prints the raw result. A failure prints one line
``aimem: <reason>`` and exits 1.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import typer

from aimem_common import config, maint_rpc
from aimem_common.bus import connect
from aimem_common.errors import AimemError

NatsOpt = typer.Option(None, "--nats", help="NATS URL (default: settings.bus.nats_url).")
WsOpt = typer.Option(None, "--workspace", "-w", help="Workspace (default: settings.workspace_default).")
PjOpt = typer.Option(None, "--project", "-p", help="Project (default: the one this checkout's sessions are filed "
                     "under: .aimem.toml, else the server's project for its repository: api-2 for a 2nd 'api').")
AllOpt = typer.Option(False, "--all", help="Every workspace/project instead of one.")
JsonOpt = typer.Option(False, "--json", help="Print the raw JSON result.")


def _fail(message: str) -> None:
    typer.echo(f"aimem: {message}", err=True)
    raise typer.Exit(1)


def call(job: str, *, nats_url: str | None, workspace: str | None, project: str | None, every: bool = False,
         args: dict[str, Any] | None = None, timeout_s: float | None = None) -> dict[str, Any]:
    """Run maintainer ``job`` now and return its result (exit 1 with a one-line reason)."""
    try:
        settings = config.load(check_writable=False)
    except config.ConfigError as exc:
        _fail(exc.message)
    bus_cfg = settings.bus.model_copy(update={"nats_url": nats_url} if nats_url else {})
    if every:
        from aimem_cli.identity import resolve

        ws, pj = workspace or resolve(Path.cwd()).workspace or settings.workspace_default, None
    else:
        from aimem_cli.commands.base import scope

        ws, pj = scope(workspace, project)  # this checkout's project as the hooks file it (`api-2`)

    async def run() -> dict[str, Any]:
        nc = await connect(bus_cfg, name="aimem-cli", reconnect=False)
        try:
            return await maint_rpc.call(nc, job, workspace=ws, project=pj, actor="cli", args=args or {},
                                        timeout_s=timeout_s)
        finally:
            await nc.close()

    try:
        return asyncio.run(run())
    except AimemError as exc:
        _fail(f"{exc.message} ({exc.code})")
        raise  # unreachable


def _emit(data: Any, as_json: bool, human) -> None:
    if as_json:
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    else:
        human(data)


def _sweep_line(r: dict[str, Any]) -> str:
    applied = r.get("applied")
    src = applied if isinstance(applied, dict) else r
    n = lambda k: len(src.get(k, [])) if isinstance(src.get(k), list) else src.get(k, 0)  # noqa: E731
    verb = "would" if r.get("dry_run") else "did"
    return (f"{r['workspace']}/{r['project']}: {verb} expire {n('expired')}, evict {n('evicted')}, "
            f"purge {n('purged')} tombstone(s), prune {src.get('observations_pruned', 0)} observation(s)")


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "none"


def register(app: typer.Typer) -> None:
    """Add the maintainer commands to the ``aimem`` app."""

    @app.command("forget-sweep")
    def forget_sweep(
        dry_run: bool = typer.Option(False, "--dry-run", help="Show what would go; change nothing."),
        as_of: str = typer.Option(None, "--as-of", help="Evaluate decay at this ISO time (previews)."),
        workspace: str = WsOpt, project: str = PjOpt, every: bool = AllOpt, nats: str = NatsOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Run the forget sweep (TTL deletes, cold eviction, tombstone purge, opt-in observation prune)."""
        args: dict[str, Any] = {"dry_run": dry_run}
        if as_of:
            args["as_of"] = as_of
        res = call("forget_sweep", nats_url=nats, workspace=workspace, project=project, every=every, args=args)

        def human(r: dict[str, Any]) -> None:
            for one in r.get("scopes", [r]):
                typer.echo(_sweep_line(one))
                if dry_run:
                    for action in ("expire", "evict", "purge"):
                        for p in one.get(action, []):
                            typer.echo(f"  {action:6} {p['path']} (page {p['page_id']})")

        _emit(res, as_json, human)

    @app.command("finalize-idle")
    def finalize_idle(
        idle_after_s: float = typer.Option(None, "--idle-after-s", min=0.001,
                                           help="Quiet period in seconds (default: maintenance.session_idle_after_s)."),
        nats: str = NatsOpt, as_json: bool = JsonOpt,
    ) -> None:
        """End every session idle past the quiet period now (the maintainer also does it on a schedule)."""
        args = {} if idle_after_s is None else {"idle_after_s": idle_after_s}
        res = call("finalize_idle", nats_url=nats, workspace=None, project=None, every=True, args=args)

        def human(r: dict[str, Any]) -> None:
            for one in r.get("finalized", []):
                typer.echo(f"{one['workspace']}/{one['project']}: ended idle session {one['session_id']}")
            typer.echo(f"{len(r.get('finalized', []))} finalised, {r.get('skipped', 0)} active again, "
                       f"{r.get('failed', 0)} failed")

        _emit(res, as_json, human)

    @app.command("lint")
    def lint_cmd(
        no_write: bool = typer.Option(False, "--no-write", help="Print findings without writing _lint/report.md."),
        workspace: str = WsOpt, project: str = PjOpt, every: bool = AllOpt, nats: str = NatsOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Lint the wiki (links, orphans, duplicates, frontmatter, size, feedback; LLM contradictions)."""
        res = call("lint", nats_url=nats, workspace=workspace, project=project, every=every,
                   args={"write": not no_write})

        def human(r: dict[str, Any]) -> None:
            for one in r.get("scopes", [r]):
                typer.echo(f"{one['workspace']}/{one['project']}: {one['count']} finding(s)")
                for f in one["findings"]:
                    typer.echo(f"  {f['rule']:28} {f['path']}: {f['detail']}")

        _emit(res, as_json, human)

    @app.command("auto-improve")
    def auto_improve_cmd(
        session: str = typer.Option(None, "--session", help="Session id (default: newest unreviewed)."),
        workspace: str = WsOpt, project: str = PjOpt, nats: str = NatsOpt, as_json: bool = JsonOpt,
    ) -> None:
        """Review a completed session now and stage (or apply) validated wiki proposals."""
        res = call("auto_improve", nats_url=nats, workspace=workspace, project=project,
                   args={"session_id": session} if session else {})

        def human(r: dict[str, Any]) -> None:
            typer.echo(f"session {r['session_id']}: {len(r['proposals'])} proposal(s), "
                       f"{len(r.get('rejected', []))} rejected")
            for p in r["proposals"]:
                typer.echo(f"  #{p['id']} {p['status']:8} {p['path']}")
            for p in r.get("rejected", []):
                typer.echo(f"  #{p.get('id', '-')} rejected ({p['stage']}) {p['path']}: {p['reason']}")

        _emit(res, as_json, human)

    @app.command("auto-improve-report")
    def auto_improve_report_cmd(
        stage: bool = typer.Option(False, "--stage", help="Also write the report as _lint/auto-improve-report.md."),
        workspace: str = WsOpt, project: str = PjOpt, every: bool = AllOpt, nats: str = NatsOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Show what auto-improve did: reviews, proposals by status, rejections by stage (read-only
        unless --stage)."""
        res = call("auto_improve_report", nats_url=nats, workspace=workspace, project=project, every=every,
                   args={"stage": stage})

        def human(r: dict[str, Any]) -> None:
            for one in r.get("scopes", [r]):
                acc = "n/a" if one["acceptance"] is None else f"{one['acceptance']:.0%}"
                typer.echo(f"{one['workspace']}/{one['project']}: reviews {_counts(one['runs'])}; "
                           f"proposals {_counts(one['proposals'])}; rejected by {_counts(one['rejected_by'])}; "
                           f"acceptance {acc}")
                for p in one["recent"]:
                    why = f"  ({p['reject_stage']}: {p['reject_reason']})" if p["status"] == "rejected" else ""
                    typer.echo(f"  #{p['id']:<5} {p['status']:8} {p['path']}  {p['edits']} edit(s), "
                               f"{p['changed_chars']} chars{why}")
                if one.get("report"):
                    typer.echo(f"  staged {one['report']['path']}")

        _emit(res, as_json, human)

    @app.command("curator")
    def curator_cmd(
        no_write: bool = typer.Option(False, "--no-write", help="Print findings without writing _lint/curator.md."),
        workspace: str = WsOpt, project: str = PjOpt, every: bool = AllOpt, nats: str = NatsOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Write one report page (_lint/curator.md) of knowledge pages to merge, split or retire;
        the curator itself changes no page."""
        res = call("curator", nats_url=nats, workspace=workspace, project=project, every=every,
                   args={"write": not no_write})

        def human(r: dict[str, Any]) -> None:
            for one in r.get("scopes", [r]):
                typer.echo(f"{one['workspace']}/{one['project']}: {len(one['findings'])} finding(s)")
                for f in one["findings"]:
                    typer.echo(f"  {f['action']:7} {' + '.join(f['paths'])}: {f['detail']}")

        _emit(res, as_json, human)

    @app.command("embed")
    def embed_cmd(workspace: str = WsOpt, project: str = PjOpt, every: bool = AllOpt, nats: str = NatsOpt,
                  as_json: bool = JsonOpt) -> None:
        """Backfill missing or stale page embeddings now."""
        res = call("embed", nats_url=nats, workspace=workspace, project=project, every=every)

        def human(r: dict[str, Any]) -> None:
            if not r.get("enabled"):
                typer.echo("no embedder configured ([embedding] provider)")
                return
            i = r["identity"]
            typer.echo(f"{i['provider']}/{i['model']} ({i['dim']}-d): embedded {r['embedded']}, "
                       f"current {r['current']}/{r['live_pages']}, stale {r['stale']}")

        _emit(res, as_json, human)

    pending = typer.Typer(help="Auto-improve proposals waiting for approval.", no_args_is_help=True)
    app.add_typer(pending, name="pending-writes")

    @pending.command("list")
    def pending_list(
        status: str = typer.Option("pending", "--status", help="pending|approved|rejected|any"),
        workspace: str = WsOpt, project: str = PjOpt, every: bool = AllOpt, nats: str = NatsOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """List proposals."""
        res = call("pending_writes", nats_url=nats, workspace=workspace, project=project, every=every,
                   args={"action": "list", "status": None if status == "any" else status})

        def human(r: dict[str, Any]) -> None:
            for p in r["proposals"]:
                typer.echo(f"#{p['id']:<5} {p['status']:8} {p['confidence'] or 0:.2f} "
                           f"{p['workspace']}/{p['project']} {p['path']}  {p['title'] or ''}")
            if not r["proposals"]:
                typer.echo("no proposals")

        _emit(res, as_json, human)

    def _decide(action: str, ids: list[int], reason: str | None, workspace, project, nats, as_json) -> None:
        args: dict[str, Any] = {"action": action, "ids": ids}
        if reason:
            args["reason"] = reason
        res = call("pending_writes", nats_url=nats, workspace=workspace, project=project,
                   every=project is None, args=args)
        _emit(res, as_json, lambda r: [typer.echo(f"#{p['id']} {p['status']} {p['path']}") for p in r["proposals"]])

    @pending.command("approve")
    def pending_approve(ids: list[int] = typer.Argument(..., help="Proposal ids."), workspace: str = WsOpt,
                        project: str = PjOpt, nats: str = NatsOpt, as_json: bool = JsonOpt) -> None:
        """Approve proposals: each is written through the normal page path (all or nothing)."""
        _decide("approve", ids, None, workspace, project, nats, as_json)

    @pending.command("reject")
    def pending_reject(ids: list[int] = typer.Argument(..., help="Proposal ids."),
                       reason: str = typer.Option(None, "--reason"), workspace: str = WsOpt,
                       project: str = PjOpt, nats: str = NatsOpt, as_json: bool = JsonOpt) -> None:
        """Reject proposals (nothing is written)."""
        _decide("reject", ids, reason, workspace, project, nats, as_json)
