"""``aimem dead-letters list|replay``: the commands the writer gave up on, with their reason.

A dead letter is a command the writer could not apply and will not retry by itself (a
handler bug, a transient failure past ``writer.max_deliver`` deliveries, an error nobody
was waiting for). Store faults (disk full, I/O) are never dead letters: those batches are
held and retried. ``replay`` sends the chosen ones again through ``/admin/dead-letters/replay``.
"""

from __future__ import annotations

import typer

from aimem_cli.commands.base import JsonOpt, ServerOpt, TokenOpt, client, emit, fail, table

app = typer.Typer(help="List and replay commands the writer gave up on.", no_args_is_help=True)


@app.command("list")
def list_cmd(all_: bool = typer.Option(False, "--all", help="Include replayed ones."),
             limit: int = typer.Option(100, "--limit", min=1, max=10_000),
             server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt) -> None:
    """List dead letters, oldest first (open ones unless --all)."""
    with client(server, token) as c:
        data = c.get("/admin/dead-letters", all=str(all_).lower(), limit=limit)

    def human(d: dict) -> None:
        table(d.get("dead_letters") or [], ["id", "op", "workspace", "project", "deliveries", "created_at", "reason"],
              empty="no dead letters")
        typer.echo(f"{d.get('open', 0)} open")

    emit(data, as_json, human)


@app.command("replay")
def replay_cmd(ids: list[int] = typer.Argument(None, help="Dead-letter ids (see `aimem dead-letters list`)."),
               all_: bool = typer.Option(False, "--all", help="Replay every open dead letter."),
               server: str = ServerOpt, token: str = TokenOpt, as_json: bool = JsonOpt) -> None:
    """Send dead letters again (each once; one that fails again becomes a new dead letter)."""
    if bool(ids) == all_:
        fail("give dead-letter ids or --all (not both)")
    body = {"all": True} if all_ else {"ids": ids}
    with client(server, token) as c:
        data = c.post("/admin/dead-letters/replay", body)
    emit(data, as_json, lambda d: typer.echo(f"replayed {len(d.get('replayed') or [])}: {d.get('replayed')}"
                                            + (f"; not envelopes, left open: {d['unreadable']}" if d.get('unreadable') else "")))


def register(root: typer.Typer) -> None:
    """Add ``dead-letters`` to the ``aimem`` app."""
    root.add_typer(app, name="dead-letters")
