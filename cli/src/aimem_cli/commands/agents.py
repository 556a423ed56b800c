"""Wiring aimem into agent clients in one step, and taking it out again (issue 30).

``setup-agent --client X`` (hooks + MCP + the instructions block + the skills),
``install-skills`` (the managed Agent Skills alone) and ``uninstall [--client X] [--purge-data
--confirm]`` (everything aimem installed; the data dir only when asked). All reuse the
installers' plans (``aimem_cli.installers``): merges, never clobbers, and only aimem's own
entries are removed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import typer

from aimem_cli.commands.base import fail, port_base_option
from aimem_cli.commands.hooks import (
    CODEX_HOME_HELP, _hook_target, _target, apply_changes, server_credential, stack_urls,
)
from aimem_cli.commands.operate import (
    INSTRUCTION_FILES, INSTRUCTIONS, _fmt_bytes, _tree_size, remove_block, upsert_block,
)
from aimem_cli.installers import InstallError, plan_hooks, plan_mcp, plan_unhooks, plan_unmcp
from aimem_common.clients import INSTALLABLE as CLIENTS
from aimem_cli.installers.base import FileChange, read_text
from aimem_cli.installers.skills import plan_skills, prune_empty_dirs


def _instruction_change(path: Path, remove: bool) -> list[FileChange]:
    old = read_text(path)
    if remove:
        if old is None:
            return []
        new = remove_block(old)
        return [FileChange(path, old, new if new.strip() else None)]
    return [FileChange(path, old, upsert_block(old, INSTRUCTIONS))]


def _in_order(first: list[FileChange], then, dry_run: bool, home: Path | None) -> list[FileChange]:
    """``first`` plus the plan ``then()`` makes. When both touch one file (Codex config.toml
    holds the hook trust and the MCP server; Gemini CLI settings.json and Crush crush.json hold
    hooks and MCP), ``first`` is written before ``then`` is planned, so the second write keeps
    the first's edit; a dry run shows each diff against the file as it is. The deletions
    already written stay in the result as no-op changes, so that the folders they leave
    empty are pruned with the rest (OpenClaw's plugin folder)."""
    second = then()
    if dry_run or not ({c.path for c in first} & {c.path for c in second}):
        return first + second
    apply_changes(first, False, home)
    return [FileChange(c.path, None, None) for c in first if c.new is None] + then()


def setup_agent(
    client: str = typer.Option(..., "--client", help=f"one of: {', '.join(CLIENTS)}"),
    scope: str = typer.Option("user", "--scope", help="user (your home) or project (this directory)"),
    project_dir: Path = typer.Option(None, "--project-dir", help="the repository whose instruction file gets "
                                     "the aimem block (default: here)"),
    no_instructions: bool = typer.Option(False, "--no-instructions", help="no instructions block"),
    no_skills: bool = typer.Option(False, "--no-skills", help="no Agent Skills"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the diff, write nothing"),
    port_base: int = port_base_option("the stack's port base"),
    home: Path = typer.Option(None, "--home", hidden=True),
    codex_home: Path = typer.Option(None, "--codex-home", envvar="CODEX_HOME", help=CODEX_HOME_HELP),
    api_key: str = typer.Option(None, "--api-key", help="a user's API key to send instead of the root token"),
    data_dir: Path = typer.Option(None, "--data-dir", help="the server's data dir (its root token)"),
) -> None:
    """Wire aimem into one client in one step: lifecycle hooks, the MCP server, the
    instructions block (CLAUDE.md / AGENTS.md / GEMINI.md of --project-dir) and the managed
    Agent Skills (under your home with --scope user, else in --project-dir). Idempotent."""
    if client not in CLIENTS:
        fail(f"unknown client {client!r}; expected one of {', '.join(CLIENTS)}")
    token = server_credential(api_key, data_dir, create=not dry_run)
    ingress, mcp_url = stack_urls(None, port_base, data_dir)
    target = _target(scope, project_dir, home, ingress, codex_home, token, _hook_target(token, home))
    try:
        changes = _in_order(plan_hooks(client, target), lambda: plan_mcp(client, target, mcp_url), dry_run, home)
        if not no_skills:
            changes += plan_skills(client, _skills_base(scope, target.home, project_dir))
    except InstallError as exc:
        fail(str(exc))
    if not no_instructions:
        changes += _instruction_change((project_dir or Path.cwd()).resolve() / INSTRUCTION_FILES[client], False)
    apply_changes(changes, dry_run, home)


def _skills_base(scope: str, home: Path, project_dir: Path | None) -> Path:
    return home if scope == "user" else (project_dir or Path.cwd()).resolve()


def install_skills(
    client: str = typer.Option(None, "--client", help=f"one of: {', '.join(CLIENTS)} (default: every client: "
                               ".claude/skills and .agents/skills)"),
    scope: str = typer.Option("project", "--scope", help="project (--dir) or user (your home)"),
    directory: Path = typer.Option(None, "--dir", help="The repository (default: here)."),
    remove: bool = typer.Option(False, "--remove", help="Take aimem's skills out instead."),
    force: bool = typer.Option(False, "--force", help="Overwrite a SKILL.md of the same name that aimem did not write."),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the diff, write nothing"),
    home: Path = typer.Option(None, "--home", hidden=True),
) -> None:
    """Write (or refresh) aimem's managed Agent Skills (aimem-recall, aimem-handoff,
    aimem-remember: when to call which memory tool) into the client's skills folder:
    .claude/skills for Claude Code, .agents/skills for the others. Idempotent; a SKILL.md
    aimem did not write is never overwritten (unless --force) nor removed."""
    if client is not None and client not in CLIENTS:
        fail(f"unknown client {client!r}; expected one of {', '.join(CLIENTS)}")
    if scope not in ("user", "project"):
        fail("--scope must be user or project")
    base = _skills_base(scope, (home or Path.home()).expanduser(), directory)
    changes: list[FileChange] = []
    try:
        for c in [client] if client else list(CLIENTS):
            changes += [ch for ch in plan_skills(c, base, remove=remove, force=force)
                        if ch.path not in {x.path for x in changes}]
    except InstallError as exc:
        fail(str(exc))
    apply_changes(changes, dry_run, home)
    if not dry_run:
        prune_empty_dirs(changes, base)


def purge_plan(data_dir: Path) -> dict:
    files, size = _tree_size(data_dir) if data_dir.is_dir() else (0, 0)
    return {"data_dir": str(data_dir), "files": files, "bytes": size}


def uninstall(
    client: str = typer.Option(None, "--client", help=f"only this client (default: all of {', '.join(CLIENTS)})"),
    scope: str = typer.Option("user", "--scope", help="user (your home) or project (this directory)"),
    project_dir: Path = typer.Option(None, "--project-dir", help="the repository whose instruction files lose "
                                     "the aimem block (default: here)"),
    purge_data: bool = typer.Option(False, "--purge-data", help="also delete the server's data dir (with --confirm; "
                                    "the stack must be stopped)"),
    confirm: bool = typer.Option(False, "--confirm", help="with --purge-data: really delete it"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print what would change, write nothing"),
    home: Path = typer.Option(None, "--home", hidden=True),
    codex_home: Path = typer.Option(None, "--codex-home", envvar="CODEX_HOME", help=CODEX_HOME_HELP),
    data_dir: Path = typer.Option(None, "--data-dir", help="the server's data dir (for --purge-data)"),
) -> None:
    """Remove what aimem installed: its hooks, its MCP entry and its instructions block (only
    aimem's own entries; everything else in those files stays). The data dir is deleted only
    with --purge-data --confirm (a preview without --confirm). A refused --purge-data (the
    stack is running, or no --confirm) exits 1 before anything is changed."""
    clients = [client] if client else list(CLIENTS)
    if client and client not in CLIENTS:
        fail(f"unknown client {client!r}; expected one of {', '.join(CLIENTS)}")
    if purge_data:
        from aimem_cli.commands.base import load_settings
        from aimem_cli.commands.disk import stack_alive

        settings = load_settings(data_dir)
        why = None if dry_run else stack_alive(settings)
        if why:
            fail(f"the stack is running on {settings.data_dir} ({why}): stop it before --purge-data")
        plan = purge_plan(settings.data_dir)
        if not confirm and not dry_run:
            typer.echo(f"Would delete the data dir {plan['data_dir']} ({plan['files']} files, "
                       f"{_fmt_bytes(plan['bytes'])}) and remove aimem from the agents; "
                       "re-run with --purge-data --confirm")
            raise typer.Exit(1)
    target = _target(scope, project_dir, home, "http://127.0.0.1:8701", codex_home)
    changes: list[FileChange] = []
    try:
        for c in clients:
            try:
                unhooks = plan_unhooks(c, target)
            except InstallError as exc:
                if "no " not in str(exc):  # a client without a file in this scope: nothing installed
                    raise
                unhooks = []
            changes += _in_order(unhooks, lambda c=c: plan_unmcp(c, target), dry_run, home)
            changes += [ch for ch in plan_skills(c, _skills_base(scope, target.home, project_dir), remove=True)
                        if ch.path not in {x.path for x in changes}]
    except InstallError as exc:
        fail(str(exc))
    where = (project_dir or Path.cwd()).resolve()
    for name in dict.fromkeys(INSTRUCTION_FILES[c] for c in clients):
        changes += _instruction_change(where / name, True)
    apply_changes(changes, dry_run, home)
    if not dry_run:
        prune_empty_dirs(changes, target.home, where)
    if not purge_data:
        return
    if dry_run:
        typer.echo(f"Would delete the data dir {plan['data_dir']} ({plan['files']} files, "
                   f"{_fmt_bytes(plan['bytes'])})")
        return
    why = stack_alive(settings)  # again: it may have been started while the agents were uninstalled
    if why:
        fail(f"the stack is running on {settings.data_dir} ({why}): stop it before --purge-data")
    shutil.rmtree(settings.data_dir)
    typer.echo(f"Deleted the data dir {plan['data_dir']} ({plan['files']} files, {_fmt_bytes(plan['bytes'])})")


def register(app: typer.Typer) -> None:
    """Add ``setup-agent``, ``install-skills``, ``uninstall`` and the agent-config backups to ``app``."""
    app.command("setup-agent")(setup_agent)
    app.command("install-skills")(install_skills)
    app.command("uninstall")(uninstall)
    app.command("backup-agents")(backup_agents)
    app.command("restore-agents")(restore_agents)


# -- backup-agents / restore-agents ----------------------------------------------------------
REDACTED = "<redacted>"
_SECRET_RES = (  # a bearer credential in a header value, an aimem API key anywhere
    (r"(Bearer\s+)[A-Za-z0-9._~+/=-]{8,}", r"\g<1>" + REDACTED),
    (r"\baim_[A-Za-z0-9_-]{8,}", REDACTED),
)


def agent_files(home: Path, codex_home: Path | None = None) -> dict[str, Path]:
    """The user-scope files aimem installs into (hooks, MCP entries, Codex's config, the
    opencode plugin, aimem's own skills) that exist, keyed by their path relative to ``home``; plus the hook
    client's credential (``.local/share/aimem/auth/client-token`` style) when present."""
    from aimem_cli.hookconfig import CLIENT_TOKEN, client_settings
    from aimem_cli.installers.plans import HOOK_FILES, MCP_FILES

    out: dict[str, Path] = {}
    rels = {pair[0] for table in (HOOK_FILES, MCP_FILES) for pair in table.values() if pair[0]}
    rels.add(".codex/config.toml")
    for rel in sorted(rels):
        path = home / rel
        if rel.startswith(".codex/") and codex_home is not None:
            path = codex_home / Path(rel).relative_to(".codex")
        if path.is_file():
            out[rel] = path
    from aimem_common.skills import MANAGED_MARK, SKILLS, skills_dir

    for rel in sorted({f"{skills_dir(c)}/{s}" for c in CLIENTS for s in SKILLS}):
        path = home / rel
        if path.is_file() and MANAGED_MARK in path.read_text("utf-8", errors="replace"):
            out[rel] = path  # aimem's managed skills under the home (install-skills --scope user)
    client_dir, _ = client_settings(home)
    token = client_dir / CLIENT_TOKEN
    if token.is_file():
        try:
            out[token.relative_to(home).as_posix()] = token
        except ValueError:
            out[f"@client/{CLIENT_TOKEN.as_posix()}"] = token  # outside HOME (AIMEM_DATA_DIR)
    return out


def redact(text: str) -> tuple[str, int]:
    """``text`` with credentials replaced by ``<redacted>``, and how many were."""
    import re

    n = 0
    for pattern, repl in _SECRET_RES:
        text, k = re.subn(pattern, repl, text)
        n += k
    return text, n


def backup_agents(
    to: Path = typer.Option(..., "--to", help="The .tar.gz to write."),
    include_secrets: bool = typer.Option(False, "--include-secrets", help="Keep tokens and keys as they are "
                                         "(the archive is then written 0600)."),
    home: Path = typer.Option(None, "--home", hidden=True),
    codex_home: Path = typer.Option(None, "--codex-home", envvar="CODEX_HOME", help=CODEX_HOME_HELP),
) -> None:
    """Archive the agent clients' aimem-related configs (hooks, MCP entries, Codex's config,
    aimem's user-scope skills, the hook client's credential). Secrets are redacted unless
    --include-secrets."""
    import io
    import json
    import os
    import tarfile

    home = (home or Path.home()).expanduser()
    files = agent_files(home, codex_home.expanduser() if codex_home else None)
    manifest = {"version": 1, "redacted": not include_secrets, "files": []}
    to = to.expanduser()
    with tarfile.open(to, "w:gz") as tar:
        for rel, path in files.items():
            if rel.endswith("client-token") and not include_secrets:
                manifest["files"].append({"path": rel, "skipped": "secret"})
                continue
            text = path.read_text("utf-8", errors="replace")
            n = 0
            if not include_secrets:
                text, n = redact(text)
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"files/{rel}")
            info.size, info.mode = len(data), path.stat().st_mode & 0o777
            tar.addfile(info, io.BytesIO(data))
            manifest["files"].append({"path": rel, "bytes": len(data), "redacted": n})
        data = json.dumps(manifest, indent=2).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    if include_secrets:
        os.chmod(to, 0o600)
    kept = [f for f in manifest["files"] if "skipped" not in f]
    typer.echo(f"{len(kept)} files archived to {to}"
               + ("" if include_secrets else f" ({sum(f['redacted'] for f in kept)} secrets redacted"
                  + (", the client credential left out" if len(kept) < len(manifest["files"]) else "") + ")"))


def restore_agents(
    from_: Path = typer.Option(..., "--from", help="An archive of backup-agents."),
    apply_: bool = typer.Option(False, "--apply", help="Write the files (without it: a dry run)."),
    force: bool = typer.Option(False, "--force", help="Also overwrite files that exist and differ (a "
                               "timestamped copy of each is kept)."),
    home: Path = typer.Option(None, "--home", hidden=True),
) -> None:
    """Put the configs of a backup-agents archive back under your home. A dry run unless
    --apply; an existing file that differs is overwritten only with --force (its old content
    kept beside it as <file>.aimem-<stamp>)."""
    import json
    import tarfile
    from datetime import UTC, datetime

    home = (home or Path.home()).expanduser()
    try:
        tar = tarfile.open(from_.expanduser(), "r:gz")
    except (OSError, tarfile.TarError) as exc:
        fail(f"cannot read {from_}: {exc}")
    with tar:
        try:
            manifest = json.loads(tar.extractfile("manifest.json").read())
        except (KeyError, AttributeError, ValueError):
            fail(f"{from_} is not a backup-agents archive (no manifest.json)")
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        counts = {"new": 0, "same": 0, "differs": 0, "written": 0}
        for entry in manifest["files"]:
            rel = entry["path"]
            if "skipped" in entry or rel.startswith("@") or ".." in Path(rel).parts or Path(rel).is_absolute():
                continue
            member = tar.extractfile(f"files/{rel}")
            if member is None:
                continue
            data = member.read().decode("utf-8")
            dest = home / rel
            old = dest.read_text("utf-8", errors="replace") if dest.is_file() else None
            state = "new" if old is None else ("same" if old == data else "differs")
            counts[state] += 1
            note = " (holds <redacted> credentials: run setup-agent to set them)" if REDACTED in data else ""
            write = apply_ and (state == "new" or (state == "differs" and force))
            if write:
                dest.parent.mkdir(parents=True, exist_ok=True)
                if old is not None:
                    dest.with_name(f"{dest.name}.aimem-{stamp}").write_text(old, "utf-8")
                dest.write_text(data, "utf-8")
                counts["written"] += 1
            verb = ("wrote" if write else "kept (differs; --force overwrites)" if state == "differs" and apply_
                    else "unchanged" if state == "same" else f"would write ({state})")
            typer.echo(f"{dest}: {verb}{note}")
    typer.echo(f"{counts['new']} new, {counts['differs']} differing, {counts['same']} unchanged; "
               + (f"{counts['written']} written" if apply_ else "dry run: re-run with --apply"))
