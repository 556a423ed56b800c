"""Users, their grants, API keys and profiles over ``/admin``.

``aimem user ...``, ``aimem api-key ...``, ``aimem profile ...``.
"""

from __future__ import annotations

import getpass
import sys

import typer

from aimem_cli.commands.base import JsonOpt, ServerOpt, TokenOpt, client, emit, fail, table


user_app = typer.Typer(help="Manage users (and their grants).", no_args_is_help=True)
key_app = typer.Typer(help="Manage API keys (aim_...).", no_args_is_help=True)
PROFILE_ELSEWHERE = ("a user manages their own profile with the memory_profile MCP tool or on the web "
                     "(/web/profile)")
profile_app = typer.Typer(
    help="Profile memory: preferences stated once that every later session of the same user sees, in any "
         "project (injected, fenced, after the handoff at session start). These commands use the admin API, "
         "so they need a root credential: --user NAME acts on NAME's profile, without it the root's own; "
         f"{PROFILE_ELSEWHERE}.",
    no_args_is_help=True)
UserOpt = typer.Option(None, "--user", "-u", help="Act on this user's profile (default: the root credential's own).")


PROFILE_FORBIDDEN = f"aimem profile needs a root credential (HTTP 403); {PROFILE_ELSEWHERE}"


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
def user_delete(name: str, confirm: bool = typer.Option(False, "--confirm", help="Delete; without it, only a preview."),
                server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt) -> None:
    """Delete a user with its keys, grants and profile. Preview without --confirm.

    The preview (exit 1) counts what goes: active API keys, grants, profile entries; an
    unknown user is one line and exit 1 either way.
    """
    with client(server, token) as c:
        row = next((u for u in c.get("/admin/users")["users"] if u["name"] == name), None)
        if row is None:
            fail(f"no user named {name!r}")
        if not confirm:
            grants = c.get("/admin/grants", user=name)["count"]
            entries = c.get("/admin/profile", user=name)["count"]
            typer.echo(f"Would delete user {name}{' (root)' if row.get('is_root') else ''}: {row.get('keys', 0)} "
                       f"active API keys, {grants} grants, {entries} profile entries.")
            fail("user delete is irreversible; re-run with --confirm")
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


@user_app.command("passwd")
def user_passwd(
    name: str,
    password_stdin: bool = typer.Option(False, "--password-stdin", help="Read the password from standard input."),
    clear: bool = typer.Option(False, "--clear", help="Remove the password (web login by API key only)."),
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Set a user's web-login password (prompted twice; ends the user's web sessions)."""
    if clear:
        password = None
    elif password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass(f"New password for {name}: ")
        if getpass.getpass("Again: ") != password:
            fail("the two passwords differ")
    with client(server, token) as c:
        data = c.request("PUT", f"/admin/users/{name}/password", json={"password": password})
    emit(data, as_json, lambda d: typer.echo(
        f"{'cleared' if clear else 'set'} the password of {name} ({d.get('sessions_ended', 0)} web sessions ended)"))


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




@profile_app.command("list")
def profile_list(user: str = UserOpt, server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt) -> None:
    """List a profile's entries, oldest first."""
    with client(server, token, forbidden=PROFILE_FORBIDDEN) as c:
        data = c.get("/admin/profile", user=user)
    emit(data, as_json, lambda d: table(d["entries"], ["id", "body", "source_project", "created_at"]))


@profile_app.command("add")
def profile_add(
    text: str, user: str = UserOpt,
    workspace: str = typer.Option("default", "--workspace", "-w", help="Where it was stated (with --project)."),
    project: str = typer.Option(None, "--project", "-p", help="Where it was stated: purging it forgets the entry."),
    server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt,
) -> None:
    """Add one preference (secrets are redacted; an identical entry is not added twice)."""
    if not text.strip():
        fail("the preference is empty")
    with client(server, token, forbidden=PROFILE_FORBIDDEN) as c:
        data = c.post("/admin/profile", {"text": text, "user": user, "workspace": workspace, "project": project})
    emit(data, as_json, lambda d: typer.echo(
        f"{'added' if d.get('created') else 'already there:'} entry {d['entry']['id']}"))


@profile_app.command("remove")
def profile_remove(entry_id: int, user: str = UserOpt, server: str = ServerOpt, token: str = TokenOpt,
                   as_json: bool = JsonOpt) -> None:
    """Remove one entry by id (from `aimem profile list`)."""
    with client(server, token, forbidden=PROFILE_FORBIDDEN) as c:
        data = c.request("DELETE", f"/admin/profile/{entry_id}", params={"user": user})
    emit(data, as_json, lambda d: typer.echo(f"removed entry {d['removed']}"))


def register(app: typer.Typer) -> None:
    """Add ``aimem user``, ``aimem api-key`` and ``aimem profile`` to the ``aimem`` app."""
    app.add_typer(user_app, name="user")
    app.add_typer(key_app, name="api-key")
    app.add_typer(profile_app, name="profile")
