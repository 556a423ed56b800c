"""``aimem install-hooks | uninstall-hooks | install-mcp | finalize-session | hook status``.

``aimem hook status`` says what the hook client's spool holds and why: counts by the last
answer that kept each event (401 after a key was revoked, 403, 429, 5xx, no answer, not
sent yet), the oldest event's age and where the spool is (``--json`` for scripts).

The installers merge into each client's own settings file (``aimem_cli.installers``):
existing hooks are kept, running twice changes nothing, ``--dry-run`` prints the unified
diff instead of writing, and ``uninstall-hooks`` removes only the handlers running
``aimem hook``. For Codex the same plan switches hooks on and trusts aimem's hooks in
``~/.codex/config.toml`` (one marked block, removed again by ``uninstall-hooks``).

Both installers carry a credential so a fresh install works against a server that is never
open: ``--api-key`` (a user's ``aim_`` key), else the server's root token (``AIMEM_AUTH__TOKEN``,
``config.toml`` or ``<data_dir>/auth/token``, generated here when the data dir exists and has
none yet, as ``aimem up`` would). ``install-hooks`` writes it to the hook client's
``<client data dir>/auth/client-token`` (0600) unless the hook client already finds that
credential; ``install-mcp`` writes it as an ``Authorization`` header into the user-scope
MCP entry (a project's file gets none: it is usually committed).
"""

from __future__ import annotations

from pathlib import Path

import typer

from aimem_cli.commands.base import port_base_option
from aimem_cli.installers import InstallError, apply, diff, plan_hooks, plan_mcp, plan_unhooks
from aimem_cli.installers.plans import Target
from aimem_cli.installers.base import LEDGER, Ledger
from aimem_common.clients import INSTALLABLE

DEFAULT_MCP_URL = "http://127.0.0.1:8703/mcp"
DEFAULT_INGRESS_URL = "http://127.0.0.1:8701"
FINALIZE_NOTE = "Codex before 0.145, Antigravity and any client without a reliable session end"


def _target(scope: str, project_dir: Path | None, home: Path | None, ingress_url: str,
            codex_home: Path | None = None, token: str | None = None, client_dir: Path | None = None) -> Target:
    """Where an installer writes. ``url_dir`` is the hook client's data dir as the installed
    hooks see it: a hooks install for a stack not on 8701 records its URL there
    (``plans.plan_client_url``), where ``aimem run`` and ``aimem import`` look."""
    from aimem_cli.hookconfig import client_settings

    if scope not in ("user", "project"):
        raise typer.BadParameter("--scope must be user or project")
    return Target(scope=scope, home=(home or Path.home()), project_dir=(project_dir or Path.cwd()).resolve(),
                  ingress_url=ingress_url, codex_home=codex_home.expanduser() if codex_home else None,
                  token=token, client_dir=client_dir, url_dir=client_settings(home, installed=True)[0])


# A directory holding one of these is an aimem data dir (a plain ./data folder is not).
_DATA_DIR_MARKS = ("config.toml", "auth", "db", "nats", "wiki")


def server_credential(api_key: str | None, data_dir: Path | None, *, create: bool = True) -> str | None:
    """The credential clients should send: ``api_key``, else the server's root token (see the
    module docstring); None when there is no server data dir to take one from.

    Raises:
        typer.Exit: the configuration cannot be loaded or the token file cannot be created.
    """
    from aimem_common import config

    if api_key:
        return api_key.strip()
    try:
        settings = config.load(data_dir, check_writable=False)
        if settings.auth.token:
            return settings.auth.token
        if create and any((settings.data_dir / m).exists() for m in _DATA_DIR_MARKS):
            return config.ensure_token_file(settings.data_dir)[0]
    except config.ConfigError as exc:
        typer.echo(f"aimem: {exc.message}", err=True)
        raise typer.Exit(1) from None
    if create:  # --dry-run prints the diff only
        typer.echo(f"aimem: note: no aimem data dir at {settings.data_dir} (pass --data-dir or --api-key):"
                   " installing without a credential", err=True)
    return None


def stack_urls(ingress_url: str | None, port_base: int | None, data_dir: Path | None) -> tuple[str, str]:
    """``(ingress URL, MCP URL)`` of the stack the clients are installed for: ``--ingress-url``,
    else ``--port-base``, else the data dir's configuration (``config.load``: ``AIMEM_*``, the
    running ``aimem up``'s ports, ``config.toml``), else the defaults.

    Raises:
        typer.Exit: the configuration cannot be loaded.
    """
    from aimem_common import config

    overrides = {"port_base": port_base} if port_base is not None else {}
    try:
        settings = config.load(data_dir, check_writable=False, **overrides)
    except config.ConfigError as exc:
        typer.echo(f"aimem: {exc.message}", err=True)
        raise typer.Exit(1) from None
    mcp = f"http://127.0.0.1:{settings.port('mcp-gateway')}/mcp"
    return (ingress_url or settings.ingress_url).rstrip("/"), mcp


def _hook_target(token: str | None, home: Path | None) -> Path | None:
    """The hook client's data dir when it must be given ``token`` (it finds another one or
    none); under ``--home`` (a throwaway HOME) its default dir is that home's. The hooks run
    in the agent's environment, not this shell's: an ``AIMEM_DATA_DIR`` here names the server's
    data dir (as ``--data-dir`` does), not where the hooks look for their token."""
    from aimem_cli.hookconfig import client_settings

    client_dir, seen = client_settings(home, installed=True)
    return client_dir if token and seen["token"] != token else None


ApiKeyOpt = typer.Option(None, "--api-key", help="a user's API key (aimem api-key create) to send instead of "
                         "the root token")
DataDirOpt = typer.Option(None, "--data-dir", help="the server's data dir, where its root token is "
                          "(default ./data or $AIMEM_DATA_DIR)")


# Codex keeps its user files in $CODEX_HOME when set: the installers follow it.
CODEX_HOME_HELP = "Codex's user directory (default: $CODEX_HOME, else ~/.codex)"


def _run(plan, dry_run: bool, prune_under: tuple[Path, ...] = (), home: Path | None = None) -> None:
    """Build the installer plan (``plan()``; an ``InstallError`` is one line and exit 1), then
    print its diff (``dry_run``) or apply it and name the files it changed; with
    ``prune_under``, the folders its removals left empty go too, up to those boundaries."""
    try:
        changes = plan()
    except InstallError as exc:
        typer.echo(f"aimem: {exc}", err=True)
        raise typer.Exit(1) from None
    apply_changes(changes, dry_run, home)
    if prune_under and not dry_run:
        from aimem_cli.installers.skills import prune_empty_dirs

        prune_empty_dirs(changes, *prune_under)


def apply_changes(changes, dry_run: bool, home: Path | None = None) -> None:
    """Print the diff of ``changes`` (``dry_run``), or write them and name each file updated
    (``updated <path>``) or deleted (``removed <path>``).

    Writes go through the installers' ledger in the hook client's data dir of ``home`` (None:
    the real home), so that an uninstall gives back the user's files as they were
    (``installers.base.Ledger``); an unreadable ledger is one line and exit 1."""
    from aimem_cli.hookconfig import client_settings

    text = diff(changes)
    if dry_run:
        typer.echo(text or "no changes", nl=not text)
        return
    try:
        ledger = Ledger(client_settings(home, installed=True)[0] / LEDGER)
    except InstallError as exc:
        typer.echo(f"aimem: {exc}", err=True)
        raise typer.Exit(1) from None
    touched = apply(changes, ledger)
    deleted = {ch.path for ch in changes if ch.new is None}
    for path in touched:
        typer.echo(f"{'removed' if path in deleted else 'updated'} {path}")
    if not touched:
        typer.echo("already up to date")


HOOK_HELP = """Send one agent lifecycle event to aimem (what the installed hooks run).

Reads the client's hook payload (JSON) on stdin, resolves the project of
its cwd (.aimem.toml marker, else the git top level, else the folder name),
applies the marker's capture rules, spools the event and POSTs it to the
ingress (<ingress>/hook). `aimem install-hooks` installs it.

Events: the client's own event names (--event, else the payload's
hook_event_name), e.g. SessionStart, UserPromptSubmit, PreToolUse,
PostToolUse, PreCompact, Stop, SessionEnd; the ingress normalises them.
On a session start the memory context is printed on stdout in the
client's format (a second request, /hook/session-start-context); a
session end is sent by a detached process so the agent never waits.

Where it sends (first found wins):
  ingress URL  --ingress-url (install-hooks writes it for a stack that is
               not on 8701), AIMEM_INGRESS_URL, ingress_url in
               <data_dir>/config.toml, else http://127.0.0.1:8701
  token        AIMEM_AUTH__TOKEN, <data_dir>/auth/client-token (written
               by install-hooks), \\[auth] token in <data_dir>/config.toml,
               <data_dir>/auth/token
  <data_dir>   AIMEM_DATA_DIR, else $XDG_DATA_HOME/aimem
               (~/.local/share/aimem)

Environment: AIMEM_HOOK_BUDGET_MS (the time budget of one call, counted
from process start; default 150 ms), AIMEM_HOOK_DEBUG=1 (timings on
stderr), AIMEM_HOOK_IDENTITY=off (no project resolution, no capture
rules), AIMEM_HOOK_TRANSCRIPT_TAIL=1 (a session end carries the end of
the transcript).

Spool: each event is appended to <data_dir>/spool/ before it is sent;
one the server did not take (down, 429, 5xx, 401, 403) stays there and
is re-sent by later hook calls (a few per call, within the budget) or
by `aimem hook --drain`.

Exit status: always 0, whatever happens (an agent must never fail
because of its memory). Only the session-start context goes to stdout;
notes go to stderr.
"""


def _age(seconds: float | None) -> str:
    """Render an age in seconds as ``3m 2s`` / ``4h 5m`` / ``2d 1h`` (``-`` for None)."""
    if seconds is None:
        return "-"
    s = int(seconds)
    return f"{s // 86400}d {s % 86400 // 3600}h" if s >= 86400 else (
        f"{s // 3600}h {s % 3600 // 60}m" if s >= 3600 else f"{s // 60}m {s % 60}s")


def _installed_servers(default_url: str, codex_home: Path | None) -> dict[str, str]:
    """``{client: ingress URL}`` of the hooks installed in the user's home and in the current
    folder's project files, as their commands resolve it (``installed_hook_urls``)."""
    from aimem_cli.installers.plans import installed_hook_urls

    home, cwd = Path.home(), Path.cwd()
    found = installed_hook_urls(Target("project", home, cwd), default_url)
    codex = codex_home.expanduser() if codex_home else None
    return found | installed_hook_urls(Target("user", home, cwd, codex_home=codex), default_url)


def hook_status(as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
                codex_home: Path = typer.Option(None, "--codex-home", envvar="CODEX_HOME", help=CODEX_HOME_HELP),
                ) -> None:
    """Show the events the hook client holds in its spool, and why (counts by reason, oldest age),
    and the server the installed hooks post to (their own ``--ingress-url``, else the hook
    client's resolution; per client when they differ)."""
    import json

    from aimem_cli.hookconfig import client_settings
    from aimem_cli.hookspool import Spool

    data_dir, cfg = client_settings()
    servers = _installed_servers(cfg["url"], codex_home)
    info = Spool(data_dir / "spool").status() | {
        "server": next(iter(servers.values()), cfg["url"]) if len(set(servers.values())) <= 1 else None,
        "servers": servers}
    if as_json:
        typer.echo(json.dumps(info))
        return
    where = info["server"] or ", ".join(f"{c} → {u}" for c, u in servers.items())
    typer.echo(f"spool: {info['path']} (server {where})")
    if not info["pending"]:
        typer.echo("pending: 0 — every event was delivered")
        return
    typer.echo(f"pending: {info['pending']} event(s), oldest {_age(info['oldest_age_s'])} old")
    for reason, n in sorted(info["by_reason"].items(), key=lambda kv: -kv[1]):
        typer.echo(f"  {n:>6}  {reason}")
    if any(r.startswith(("unauthorized", "forbidden")) for r in info["by_reason"]):
        typer.echo("the server refuses this client's credential: fix it (aimem install-hooks --api-key ...);"
                   " the events are sent again on the next hook")


def register(app: typer.Typer) -> None:
    """Add ``hook`` (and ``hook status``), the hook and MCP installer commands and ``finalize-session``."""

    client_help = f"one of: {', '.join(INSTALLABLE)}"
    hook_app = typer.Typer(context_settings={"help_option_names": ["-h", "--help"]})

    @hook_app.callback(invoke_without_command=True)
    def hook(
        ctx: typer.Context,
        agent: str = typer.Option("generic", "--agent", help=f"the client that fires it: {', '.join(INSTALLABLE)} or generic"),
        event: str = typer.Option(None, "--event", help="the client's event name (default: from the payload)"),
        extension: str = typer.Option(None, "--extension", help="namespace that keeps an unknown event's fields"),
        ingress_url: str = typer.Option(None, "--ingress-url", help="the ingress of the stack to send to"),
        drain: bool = typer.Option(False, "--drain", help="deliver the whole spool now, then exit"),
    ) -> None:
        """Send one agent lifecycle event (the fast path in ``main`` runs it without typer)."""
        if ctx.invoked_subcommand is not None:
            return
        from aimem_cli.hookclient import main as hook_main

        argv = ["--drain"] if drain else ["--agent", agent]
        for name, value in (("--event", event), ("--extension", extension), ("--ingress-url", ingress_url)):
            if value is not None:
                argv += [name, value]
        raise typer.Exit(hook_main(argv))

    hook_app.command("status")(hook_status)
    app.add_typer(hook_app, name="hook", help=HOOK_HELP,
                  short_help="Send one agent lifecycle event (what installed hooks run); `hook status`: the spool.")

    @app.command("install-hooks")
    def install_hooks(
        client: str = typer.Option(..., "--client", help=client_help),
        scope: str = typer.Option("user", "--scope", help="user (your home) or project (this directory)"),
        dry_run: bool = typer.Option(False, "--dry-run", help="print the diff, write nothing"),
        project_dir: Path = typer.Option(None, "--project-dir", help="project root for --scope project"),
        home: Path = typer.Option(None, "--home", hidden=True),
        ingress_url: str = typer.Option(None, "--ingress-url", help="the ingress the hooks post to (default: "
                                        "the data dir's stack, from its port base; else http://127.0.0.1:8701)"),
        port_base: int = port_base_option("the stack's port base (its ingress is on it)"),
        codex_home: Path = typer.Option(None, "--codex-home", envvar="CODEX_HOME", help=CODEX_HOME_HELP),
        api_key: str = ApiKeyOpt,
        data_dir: Path = DataDirOpt,
    ) -> None:
        """Wire `aimem hook` into a client's lifecycle hooks (merges, never clobbers).

        The hooks post to the stack of the data dir (its port base, also the one a running
        `aimem up` was started with), or to --port-base / --ingress-url; a stack that is not
        on 8701 gets `--ingress-url` written into each hook command and `ingress_url` into the
        hook client's config.toml (where `aimem run` and `aimem import` find it).
        """
        token = server_credential(api_key, data_dir, create=not dry_run)
        url, _ = stack_urls(ingress_url, port_base, data_dir)
        target = _target(scope, project_dir, home, url, codex_home, token, _hook_target(token, home))
        _run(lambda: plan_hooks(client, target), dry_run, home=home)

    @app.command("uninstall-hooks")
    def uninstall_hooks(
        client: str = typer.Option(..., "--client", help=client_help),
        scope: str = typer.Option("user", "--scope"),
        dry_run: bool = typer.Option(False, "--dry-run"),
        project_dir: Path = typer.Option(None, "--project-dir"),
        home: Path = typer.Option(None, "--home", hidden=True),
        codex_home: Path = typer.Option(None, "--codex-home", envvar="CODEX_HOME", help=CODEX_HOME_HELP),
    ) -> None:
        """Remove only aimem's hook handlers from a client's settings (and a folder that held
        nothing but a file aimem deleted, such as OpenCode's or Pi's generated plugin's)."""
        target = _target(scope, project_dir, home, DEFAULT_INGRESS_URL, codex_home)
        _run(lambda: plan_unhooks(client, target), dry_run, (target.home, target.project_dir), home)

    @app.command("install-mcp")
    def install_mcp(
        client: str = typer.Option(..., "--client", help=client_help),
        scope: str = typer.Option("user", "--scope"),
        dry_run: bool = typer.Option(False, "--dry-run"),
        url: str = typer.Option(None, "--url", help="the aimem MCP endpoint (default: the data dir's stack, "
                                f"else {DEFAULT_MCP_URL})"),
        port_base: int = port_base_option("the stack's port base (its MCP is on base+2)"),
        project_dir: Path = typer.Option(None, "--project-dir"),
        home: Path = typer.Option(None, "--home", hidden=True),
        codex_home: Path = typer.Option(None, "--codex-home", envvar="CODEX_HOME", help=CODEX_HOME_HELP),
        api_key: str = ApiKeyOpt,
        data_dir: Path = DataDirOpt,
    ) -> None:
        """Register the aimem MCP server (Streamable HTTP) with a client."""
        token = server_credential(api_key, data_dir, create=not dry_run)
        url = url or stack_urls(None, port_base, data_dir)[1]
        target = _target(scope, project_dir, home, DEFAULT_INGRESS_URL, codex_home, token)
        if token and scope == "project":
            typer.echo("aimem: note: the project's MCP file gets no token (it is usually committed); add an "
                       "Authorization header by hand or use --scope user", err=True)
        _run(lambda: plan_mcp(client, target, url), dry_run, home=home)

    @app.command("finalize-session")
    def finalize_session(
        agent: str = typer.Option(..., "--agent", help=f"the client whose session ends ({FINALIZE_NOTE})"),
        session_id: str = typer.Option(None, "--session-id", help="default: its latest session start"),
        cwd: str = typer.Option(None, "--cwd", help="default: the session's cwd, else this directory"),
    ) -> None:
        """End a session by hand: the same session-end path as a native hook.

        The agent (a client name or its alias) and a given session id (not blank, no control
        character: the ingress refuses those for good) are checked before anything is spooled
        or sent; a refusal is one line and exit 1. Exit 0 when accepted, not captured, or kept
        for the next drain after no answer / 429 / 503; exit 1 when the server refused it for
        good (a final 4xx: dropped) or answered otherwise (kept in the spool).
        """
        import unicodedata

        from aimem_cli.commands.base import fail
        from aimem_cli.hookclient import final_answer, finalize_session as send
        from aimem_common import clients

        name = clients.ALIASES.get(agent.casefold(), agent.casefold())
        if name not in clients.AGENTS:
            fail(f"unknown agent {agent!r}; expected one of {', '.join(clients.AGENTS)}")
        if session_id is not None:
            if not session_id.strip():
                fail("--session-id is empty; pass the id of the session to end, or leave it out for the latest")
            if any(unicodedata.category(c) in ("Cc", "Cs") for c in session_id):
                fail("--session-id contains a control character; the ingress would refuse it")
        sid, status = send(name, session_id=session_id, cwd=cwd)
        if sid is None:
            fail(f"no recorded session for {name}; pass --session-id")
        if status == 0:
            typer.echo(f"session {sid}: not sent (.aimem.toml here says capture = false)")
            return
        if status is not None and status >= 300 and final_answer(status):
            typer.echo(f"session {sid}: dropped (server answered {status}): it refused the event for good")
            raise typer.Exit(1)
        if status is None or status >= 300:
            typer.echo(f"session {sid}: spooled (server answered {status}); it is sent on the next drain")
            raise typer.Exit(0 if status is None or status in (429, 503) else 1)
        typer.echo(f"session {sid}: end accepted")
