"""Project and session lifecycle over ``/admin``.

``purge-session``, ``purge-project``, ``purge-workspace``, ``rename-project``,
``rename-workspace``, ``move-project``, ``move-session``, ``reorg``, ``purges``.

A purge leaves a tombstone: later events of the purged session (or, for a project, of its
sessions and from before the purge) are refused and counted; ``aimem purges`` lists what
each purge removed and refused; ``--forget-tombstone`` on the purge command lifts it so the
id or name can be used again on purpose.

The destructive ones preview what they would do and refuse without ``--confirm``.
"""

from __future__ import annotations

from collections.abc import Callable

import typer

from aimem_cli.client import CliError, Client
from aimem_cli.commands.base import (
    JsonOpt, PjOpt, ServerOpt, TokenOpt, WsOpt, client, emit, fail, load_settings, scope,
)


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
    if d.get("profile_entries_deleted"):  # preferences stated there are forgotten with it
        n = d["profile_entries_deleted"]
        extra.append(f"Plus {n} profile entr{'y' if n == 1 else 'ies'} stated there, forgotten for every project")
    f = d.get("forgotten") or {}
    if f.get("stored_replies_forgotten") or f.get("dead_letters_deleted"):  # copies of its text (a confirmed run)
        extra.append(f"Also forgotten: {f.get('stored_replies_forgotten', 0)} stored replies and "
                     f"{f.get('dead_letters_deleted', 0)} dead letters that held its text")
    return ("\n" + "\n".join(extra)) if extra else ""


ForgetOpt = typer.Option(False, "--forget-tombstone", help="Purge nothing: lift the purge's tombstone so later "
                         "events of this id (or name) are stored again, on purpose.")


def _tombstone_line(d: dict) -> str:
    tid = d.get("tombstone_id")
    return (f"\nLate events of it are refused and counted (tombstone {tid}: aimem purges); "
            "--forget-tombstone lifts it.") if tid else ""


def _partial(d: dict) -> None:
    """Tell on stderr which files a purge could not remove (its rows are gone all the same)."""
    if d.get("partial_failure"):
        files = ", ".join(f"{f['file']} ({f['error']})" for f in d.get("files_failed", []))
        typer.echo(f"aimem: partial failure: the purge is done in the store, but these stayed on disk: {files}",
                   err=True)


def _lift(body: dict, server: str | None, token: str | None, as_json: bool) -> None:
    with client(server, token) as c:
        data = c.post("/admin/purges/lift", body)
    emit(data, as_json, lambda d: typer.echo(
        f"Lifted {len(d['lifted'])} purge tombstone(s) of {d['target']}: its later events are stored again."))


def purge_session(
    session_id: str = typer.Option(..., "--session-id"),
    confirm: bool = typer.Option(False, "--confirm"), compact: bool = typer.Option(False, "--compact"),
    force: bool = typer.Option(False, "--force", help="Purge even while its managed run holds a live lease."),
    forget_tombstone: bool = ForgetOpt,
    workspace: str = WsOpt, project: str = PjOpt,
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Delete one session (observations, handoffs it wrote, its page). Preview without --confirm.

    Late events of a purged session are refused for good; --forget-tombstone lets the id be reused.
    A blank --session-id is one line and exit 1, before the server is asked.
    """
    if not session_id.strip():
        fail("--session-id is empty; pass the id of the session to purge")
    if forget_tombstone:
        _lift({"session_id": session_id}, server, token, as_json)
        return
    ws, pj = scope(workspace, project, server, token)
    body = {"workspace": ws, "project": pj, "session_id": session_id, "compact": compact, "force": force}
    keys = [("observations_deleted", "observations"), ("handoffs_deleted", "handoffs"),
            ("pages_deleted", "pages"), ("auto_improve_runs_deleted", "auto-improve runs")]
    with client(server, token) as c:
        if not confirm:
            _preview_then_refuse(c, "/admin/purge-session", body,
                                 lambda d: f"Would purge session {session_id} from {ws}/{pj}: {_counts_line(d, keys)}."
                                 + _collateral(d), "purge-session")
        data = c.post("/admin/purge-session", {**body, "confirm": True})
    emit(data, as_json, lambda d: typer.echo(f"Purged session {session_id} from {ws}/{pj}: {_counts_line(d, keys)}."
                                             + _collateral(d) + _tombstone_line(d)))
    _partial(data)


def purge_project(
    confirm: bool = typer.Option(False, "--confirm"), compact: bool = typer.Option(False, "--compact"),
    force: bool = typer.Option(False, "--force", help="Purge even with a live session."),
    forget_tombstone: bool = ForgetOpt,
    workspace: str = WsOpt, project: str = PjOpt,
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Delete a project and everything it owns. Preview without --confirm."""
    ws, pj = scope(workspace, project, server, token)
    if forget_tombstone:
        _lift({"workspace": ws, "project": pj}, server, token, as_json)
        return
    body = {"workspace": ws, "project": pj, "compact": compact, "force": force}
    keys = [("pages_deleted", "pages"), ("sessions_deleted", "sessions"), ("observations_deleted", "observations"),
            ("handoffs_deleted", "handoffs"), ("embeddings_deleted", "embeddings")]
    with client(server, token) as c:
        if not confirm:
            _preview_then_refuse(c, "/admin/purge-project", body,
                                 lambda d: f"Would purge {ws}/{pj}: {_counts_line(d, keys)}." + _collateral(d),
                                 "purge-project")
        data = c.post("/admin/purge-project", {**body, "confirm": True})
    emit(data, as_json, lambda d: typer.echo(f"Purged {ws}/{pj}: {_counts_line(d, keys)}." + _collateral(d)
                                             + _tombstone_line(d)))
    _partial(data)


def purge_workspace(
    workspace: str = typer.Option(..., "--workspace"),
    confirm: bool = typer.Option(False, "--confirm"), compact: bool = typer.Option(False, "--compact"),
    force: bool = typer.Option(False, "--force", help="Purge even with live sessions."),
    forget_tombstone: bool = ForgetOpt,
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Delete a workspace and every project in it. Preview without --confirm."""
    if forget_tombstone:
        _lift({"workspace": workspace, "workspace_only": True}, server, token, as_json)
        return
    body = {"workspace": workspace, "compact": compact, "force": force}
    keys = [("projects_deleted", "projects"), ("pages_deleted", "pages"), ("sessions_deleted", "sessions"),
            ("observations_deleted", "observations"), ("handoffs_deleted", "handoffs")]
    with client(server, token) as c:
        if not confirm:
            _preview_then_refuse(c, "/admin/purge-workspace", body,
                                 lambda d: f"Would purge workspace {workspace}: {_counts_line(d, keys)}.",
                                 "purge-workspace")
        data = c.post("/admin/purge-workspace", {**body, "confirm": True})
    emit(data, as_json, lambda d: typer.echo(f"Purged workspace {workspace}: {_counts_line(d, keys)}."
                                             + _tombstone_line(d)))
    _partial(data)


def purges(
    all_: bool = typer.Option(False, "--all", help="Include lifted tombstones."),
    session_id: str = typer.Option(None, "--session-id"),
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """List purges: what each removed and how many late events it refused since."""
    params = {"all": "true" if all_ else "false", **({"session_id": session_id} if session_id else {})}
    with client(server, token) as c:
        data = c.get("/admin/purges", **params)

    def human(d: dict) -> None:
        sm = d["summary"]
        typer.echo(f"{sum(sm['live'].values())} live purge tombstone(s); {sm['refused_events']} late event(s) "
                   f"refused" + (f", last at {sm['last_refused_at']}" if sm["last_refused_at"] else ""))
        for t in d["purges"]:
            what = {"session": f"session {t['session_id']}", "project": f"project {t['workspace']}/{t['project']}",
                    "workspace": f"workspace {t['workspace']}"}[t["kind"]]
            removed = ", ".join(f"{n} {k.removesuffix('_deleted')}" for k, n in sorted(t["removed"].items())
                                if k.endswith("_deleted") and n)
            refused = ", ".join(f"{n} {op}" for op, n in sorted(t["refused"].items()))
            typer.echo(f"#{t['id']} {t['purged_at']} {what}" + (f" (lifted {t['lifted_at']})" if t["lifted_at"] else "")
                       + f"\n    removed: {removed or '-'}\n    refused since: {t['refused_events']}"
                       + (f" ({refused})" if refused else ""))

    emit(data, as_json, human)


def rename_project(
    from_: str = typer.Option(..., "--from"), to: str = typer.Option(..., "--to"),
    force: bool = typer.Option(False, "--force", help="Rename even while a managed run holds a live lease."),
    workspace: str = WsOpt, server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Rename a project (its files stay where they are: directories use ids)."""
    ws = workspace or load_settings().workspace_default
    with client(server, token) as c:
        data = c.post("/admin/rename-project", {"workspace": ws, "from": from_, "to": to, "force": force})
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
    ws, pj = scope(workspace, project, server, token)
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
            "from_workspace": from_workspace or load_settings().workspace_default, "workspace": to_workspace,
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




def delete_workspace(
    workspace: str = typer.Option(..., "--workspace", "-w", help="The workspace to delete."),
    confirm: bool = typer.Option(False, "--confirm"),
    force: bool = typer.Option(False, "--force", help="Delete even with a live session."),
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Delete a workspace, every project in it and their wiki files. Preview without --confirm."""
    body = {"workspace": workspace, "force": force}
    keys = [("pages_deleted", "pages"), ("sessions_deleted", "sessions"), ("observations_deleted", "observations"),
            ("handoffs_deleted", "handoffs"), ("embeddings_deleted", "embeddings")]

    def line(d: dict, verb: str) -> str:
        return (f"{verb} workspace {workspace} ({len(d['projects'])} projects: {', '.join(d['projects']) or '-'}): "
                f"{_counts_line(d, keys)}." + _collateral(d))

    with client(server, token) as c:
        if not confirm:
            _preview_then_refuse(c, "/admin/delete-workspace", body, lambda d: line(d, "Would delete"),
                                 "delete-workspace")
        data = c.post("/admin/delete-workspace", {**body, "confirm": True})
    emit(data, as_json, lambda d: typer.echo(line(d, "Deleted")))


REORG_BATCH = 2000


def reorg_locations(found: list[dict]) -> tuple[list[dict], list[dict]]:
    """Resolve each directory of ``/admin/session-locations`` again, as the hook client does
    today (``aimem_cli.identity``): ``(locations to send, directories left alone with a
    reason)``. A directory that no longer exists here is left alone (``cwd_gone``): its
    name alone would guess a project; one whose marker says ``capture = false`` too
    (``not_captured``). A Windows path is named by its folder, as its hooks were."""
    import os

    from aimem_cli import identity
    from aimem_common import locations

    send, left = [], []
    for entry in found:
        cwd = entry["cwd"]
        windows = os.name != "nt" and locations.is_windows(cwd)
        if not windows and not os.path.isdir(cwd):
            left.append({**entry, "reason": "cwd_gone"})
            continue
        ident = identity.resolve(cwd)
        if not ident.capture:
            left.append({**entry, "reason": "not_captured"})
            continue
        if not ident.project:
            left.append({**entry, "reason": "no_name"})
            continue
        send.append({"cwd": cwd, "workspace": ident.workspace, "project": ident.project, "root": ident.root,
                     "origin": ident.origin, "repo_id": ident.repo_id, "explicit": ident.explicit})
    return send, left


def reorg(
    workspace: str = typer.Option(None, "--workspace", "-w", help="Only sessions now in this workspace."),
    project: str = typer.Option(None, "--project", "-p", help="Only sessions now in this project."),
    confirm: bool = typer.Option(False, "--confirm", help="Apply the moves (without it: a preview)."),
    force: bool = typer.Option(False, "--force", help="Also move sessions that are still open."),
    pages: str = typer.Option("move", "--pages", help="move|regenerate: what happens to a moved session's page"),
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Re-derive every session's project from the directory it ran in (its .aimem.toml marker,
    else its repository, as hooks resolve it today) and move the sessions that sit in another
    project (as move-session does). Preview without --confirm; the preview's counts are the
    run's. Directories that no longer exist here are left alone. Run it where the sessions ran."""
    if pages not in ("move", "regenerate"):
        fail("--pages must be move or regenerate")
    params = {k: v for k, v in (("workspace", workspace), ("project", project)) if v is not None}
    with client(server, token) as c:
        found = c.get("/admin/session-locations", **params)["locations"]
        send, left = reorg_locations(found)
        body = {"from_workspace": workspace if project is None else (workspace or load_settings().workspace_default),
                "from_project": project, "pages": pages, "confirm": confirm, "force": force}
        # One writer transaction per REORG_BATCH folders (the route takes at most 10,000).
        parts = [c.post("/admin/reorg", {**body, "locations": send[i:i + REORG_BATCH]})
                 for i in range(0, max(len(send), 1), REORG_BATCH)]
    data = parts[0]
    for more in parts[1:]:
        for key in ("moved", "unchanged"):
            data[key] += more[key]
        for key in ("skipped", "sessions"):
            data[key] += more[key]
        data["created_projects"] += [p for p in more["created_projects"] if p not in data["created_projects"]]
        data["summary"] = {k: v + more["summary"][k] for k, v in data["summary"].items()}
    data["left_alone"] = left

    def human(d: dict) -> None:
        verb = "would move" if d["dry_run"] else "moved"
        for r in d["sessions"]:
            typer.echo(f"{verb} session {r['session_id']}: {r['from']['workspace']}/{r['from']['project']} -> "
                       f"{r['to']['workspace']}/{r['to']['project']} ({r['summary']['observations']} observations,"
                       f" {r['summary']['handoffs']} handoffs, page {r['page']})")
        for s in d["skipped"]:
            typer.echo(f"skipped session {s['session_id']} ({s['reason']}): {s['message']}")
        for e in left:
            typer.echo(f"left alone {e['cwd']} ({e['reason']}): {e['sessions']} session(s) in {', '.join(e['projects'])}")
        for p in d["created_projects"]:
            typer.echo(f"{'would create' if d['dry_run'] else 'created'} project {p['workspace']}/{p['project']}")
        s = d["summary"]
        typer.echo(f"{verb} {d['moved']} sessions ({s['observations']} observations, {s['handoffs']} handoffs); "
                   f"{d['unchanged']} already in place, {len(d['skipped'])} skipped, "
                   f"{sum(e['sessions'] for e in left)} left alone"
                   + ("; re-run with --confirm to apply" if d["dry_run"] else ""))

    emit(data, as_json, human)


def register(app: typer.Typer) -> None:
    """Add the lifecycle commands to the ``aimem`` app."""
    for name, fn in (
        ("purge-session", purge_session), ("purge-project", purge_project), ("rename-project", rename_project),
        ("rename-workspace", rename_workspace), ("move-project", move_project), ("move-session", move_session),
        ("purge-workspace", purge_workspace), ("purges", purges), ("delete-workspace", delete_workspace),
        ("reorg", reorg),
    ):
        app.command(name)(fn)
