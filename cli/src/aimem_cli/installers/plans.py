"""Per-client plans: which file, which events, which entry shape (hooks and MCP).

Formats (checked against each vendor's docs):

* Claude Code ``settings.json``, Codex ``hooks.json`` and Gemini CLI ``settings.json`` share
  ``{"hooks": {Event: [{"matcher"?, "hooks": [{"type": "command", "command", "timeout"}]}]}}``
  (Claude/Codex ``timeout`` in s; Gemini in ms plus a ``name``).
* Cursor ``hooks.json``: ``{"version": 1, "hooks": {event: [{"command", "timeout"?}]}}``.
* Copilot CLI (github/docs cli-hooks-reference): ``{"version": 1, "hooks": {event:
  [{"type": "command", "bash", "timeoutSec"}]}}`` in a file of its own under
  ``.github/hooks/`` (project) or ``~/.copilot/hooks/`` (user).
* Crush ``crush.json`` (its ``docs/hooks/README.md``): ``{"hooks": {Event: [{"matcher"?, "command",
  "timeout"}]}}``, flat entries; ``matcher`` only on tool events. MCP under ``mcp``.
* Antigravity CLI ``hooks.json`` (``~/.gemini/config/`` or ``.agents/``): ``{name: {Event:
  [...]}}``; aimem owns the hook named ``aimem`` (tool events take ``{matcher, hooks}`` groups).
* Pi, OMP: a generated extension module; OpenCode: a generated plugin module under
  ``~/.config/opencode/plugins/`` (``.opencode/plugins/``); OpenClaw: a generated plugin folder
  (``installers.extension``), switched on in ``~/.openclaw/openclaw.json``
  (``installers.openclaw``).
* MCP: ``mcpServers`` (Claude Code, Gemini CLI, Cursor, Copilot CLI, OMP ``mcp.json``,
  Antigravity ``mcp_config.json`` with ``serverUrl``), ``mcp`` (OpenCode, Crush),
  ``mcp.servers`` (OpenClaw's ``openclaw.json``), ``[mcp_servers.aimem]`` (Codex).
* Codex additionally needs its hooks switched on and each hook trusted by hash in the
  user's ``~/.codex/config.toml`` (``installers.codex``): the same plan writes that block.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aimem_cli.installers import codex, extension, openclaw
from aimem_common.clients import CLIENTS, INSTALLABLE, K
from aimem_cli.installers.base import (
    FileChange,
    InstallError,
    aimem_binary,
    hook_command,
    is_ours,
    json_change,
    load_json,
    nested_table,
    prune_empty,
    read_text,
)

TOOL_KINDS = frozenset({K.PRE_TOOL_USE, K.POST_TOOL_USE, K.PERMISSION_REQUEST})  # hooked with a matcher
# The events each client is hooked for: ``aimem_common.clients`` (``Client.install_events``).
EVENTS: dict[str, tuple[str, ...]] = {name: c.install_events for name, c in CLIENTS.items() if c.install_events}
HOOK_FILES = {  # client -> (user path under HOME, project path under the project dir)
    "claude-code": (".claude/settings.json", ".claude/settings.json"),
    "codex": (".codex/hooks.json", ".codex/hooks.json"),
    "gemini-cli": (".gemini/settings.json", ".gemini/settings.json"),
    "cursor": (".cursor/hooks.json", ".cursor/hooks.json"),
    "copilot-cli": (".copilot/hooks/aimem.json", ".github/hooks/aimem.json"),
    "opencode": (".config/opencode/plugins/aimem.ts", ".opencode/plugins/aimem.ts"),
    "crush": (".config/crush/crush.json", "crush.json"),
    "pi": (".pi/agent/extensions/aimem.ts", ".pi/extensions/aimem.ts"),
    "omp": (".omp/agent/extensions/aimem.ts", ".omp/extensions/aimem.ts"),
    "openclaw": (".openclaw/extensions/aimem/index.ts", None),  # OpenClaw plugins are global
    "antigravity": (".gemini/config/hooks.json", ".agents/hooks.json"),
}
EXTENSION_CLIENTS = frozenset({"pi", "omp", "openclaw", "opencode"})  # hooked by a generated module, not by commands
ANTIGRAVITY_HOOK = "aimem"  # the named hook aimem owns in Antigravity's hooks.json
MCP_FILES = {
    "claude-code": (".claude.json", ".mcp.json"),
    "codex": (".codex/config.toml", ".codex/config.toml"),
    "gemini-cli": (".gemini/settings.json", ".gemini/settings.json"),
    "cursor": (".cursor/mcp.json", ".cursor/mcp.json"),
    "copilot-cli": (".copilot/mcp-config.json", None),
    "opencode": (".config/opencode/opencode.json", "opencode.json"),
    "crush": (".config/crush/crush.json", "crush.json"),
    "omp": (".omp/agent/mcp.json", ".omp/mcp.json"),
    "openclaw": (openclaw.CONFIG, None),
    "antigravity": (".gemini/config/mcp_config.json", ".agents/mcp_config.json"),
}  # Pi has no MCP client
MCP_TABLES = {"opencode": ("mcp",), "crush": ("mcp",), "openclaw": ("mcp", "servers")}  # else ("mcpServers",)


DEFAULT_INGRESS_URL = "http://127.0.0.1:8701"  # the hook client's own default


@dataclass(frozen=True, slots=True)
class Target:
    """Where to install: ``home`` for ``--scope user``, ``project_dir`` for ``--scope project``."""

    scope: str
    home: Path
    project_dir: Path
    binary: str | None = None
    ingress_url: str = DEFAULT_INGRESS_URL
    codex_home: Path | None = None  # $CODEX_HOME: Codex's user files live there instead of ~/.codex
    token: str | None = None  # the bearer credential (root token or user API key) clients send
    client_dir: Path | None = None  # the hook client's data dir (its token file); None: not written
    url_dir: Path | None = None  # the hook client's data dir, given ingress_url in its config.toml; None: not written

    def path(self, pair: tuple[str | None, str | None], client: str) -> Path:
        rel = pair[0] if self.scope == "user" else pair[1]
        if rel is None:
            raise InstallError(f"{client} has no {self.scope}-scope file; use --scope user")
        if client == "codex" and self.scope == "user":
            return self.codex_dir / Path(rel).relative_to(".codex")
        return (self.home if self.scope == "user" else self.project_dir) / rel

    @property
    def codex_dir(self) -> Path:
        """Codex's user directory: ``$CODEX_HOME`` when set, else ``~/.codex``."""
        return self.codex_home or self.home / ".codex"


def _check(client: str) -> None:
    if client not in INSTALLABLE:
        raise InstallError(f"unknown client {client!r}; expected one of {', '.join(INSTALLABLE)}")


def plan_hooks(client: str, target: Target) -> list[FileChange]:
    """Return the change that installs aimem's hooks for ``client`` (idempotent)."""
    _check(client)
    path = target.path(HOOK_FILES[client], client)
    text = read_text(path)
    if client in EXTENSION_CLIENTS:
        switch = [openclaw.enable(target.home)] if client == "openclaw" else []
        return _extension_changes(client, target, path) + switch + hook_client_files(target)
    doc = load_json(path, text)
    if client == "antigravity":
        return [json_change(path, text, _antigravity_doc(path, doc, target))] + hook_client_files(target)
    hooks = _hooks_table(path, doc, create=True)
    if client in ("cursor", "copilot-cli"):
        doc.setdefault("version", 1)
    for event in EVENTS[client]:
        url = None if target.ingress_url.rstrip("/") == DEFAULT_INGRESS_URL else target.ingress_url
        entry = _entry(client, event, hook_command(client, event, target.binary, url))
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise InstallError(f"{path}: hooks.{event} is not a list")
        _put(groups, entry, flat=client in ("cursor", "copilot-cli", "crush"))
    changes = [json_change(path, text, doc)]
    if client == "codex":
        changes.append(_codex_config(target, path, doc))
    return changes + hook_client_files(target)


def hooks_installed(client: str, target: Target) -> bool:
    """Whether ``client``'s hook file of ``target`` holds at least one aimem hook entry (an
    unreadable or odd-shaped file counts as installed: it is never rewritten unasked)."""
    _check(client)
    path = target.path(HOOK_FILES[client], client)
    text = read_text(path)
    if text is None:
        return False
    if client in EXTENSION_CLIENTS:
        return True  # aimem's module, or a file of the user's that is never replaced
    try:
        hooks = _hooks_table(path, load_json(path, text), create=False)
    except InstallError:
        return True
    return any(isinstance(groups, list) and any(_is_ours_entry(g) for g in groups)
               for groups in (hooks or {}).values())


def plan_credential(target: Target) -> list[FileChange]:
    """The hook client's token file ``<client_dir>/auth/client-token`` (mode 0600) holding
    ``target.token``, when both are set; the hook commands themselves carry no secret (a
    command line is visible to every user of the machine, settings files are often shared)."""
    if not (target.token and target.client_dir):
        return []
    from aimem_cli.hookconfig import CLIENT_TOKEN

    path = target.client_dir / CLIENT_TOKEN
    text = read_text(path)
    return [FileChange(path, text, target.token + "\n", secret=target.token)]


def hook_client_files(target: Target) -> list[FileChange]:
    """The hook client's own files an install changes: its token (``plan_credential``) and the
    stack's ingress URL (``plan_client_url``)."""
    return plan_credential(target) + plan_client_url(target)


URL_MARK = "# written by aimem install-hooks"  # a line so marked is aimem's to replace or drop


def plan_client_url(target: Target) -> list[FileChange]:
    """``ingress_url = "<target.ingress_url>"`` at the top of ``<url_dir>/config.toml`` when the
    hooks are installed for a stack that is not on the default port: ``aimem run``, ``aimem
    import`` and a hook run without ``--ingress-url`` then find that stack too
    (``hookconfig.client_config``). The line carries ``URL_MARK``; an install for the default
    stack drops a line so marked (a later install for 8701 must not leave the hooks' runs
    pointing at the old stack), and leaves an ``ingress_url`` set by hand alone. The rest of
    the file is kept as it is.

    Raises:
        InstallError: the file is not valid TOML (it is never rewritten then).
    """
    if target.url_dir is None:
        return []
    import json
    import re
    import tomllib

    url = target.ingress_url.rstrip("/")
    path = target.url_dir / "config.toml"
    text = read_text(path)
    if text is None and url == DEFAULT_INGRESS_URL:
        return []
    ours = re.compile(r"(?m)^ingress_url[ \t]*=[^\n]*" + re.escape(URL_MARK) + r"[ \t]*\n?")
    line = f"ingress_url = {json.dumps(url)}  {URL_MARK}"  # a TOML basic string
    try:
        doc = tomllib.loads(text or "")
        if url == DEFAULT_INGRESS_URL:
            new = ours.sub("", text, count=1)
        elif doc.get("ingress_url") == url:
            return []
        elif "ingress_url" in doc:  # a top-level key: its line comes before any table
            new = re.sub(r"(?m)^ingress_url[ \t]*=.*$", lambda _m: line, text, count=1)
        else:
            new = f"{line}\n{text or ''}"
        ok = tomllib.loads(new).get("ingress_url", DEFAULT_INGRESS_URL) in (url, doc.get("ingress_url"))
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(f"{path}: not valid TOML ({exc}); set ingress_url = {json.dumps(url)} at its top by "
                           "hand") from None
    if not ok:
        raise InstallError(f"{path}: cannot set ingress_url in it; set it at its top by hand")
    return [FileChange(path, text, new)] if new != text else []


def plan_unhooks(client: str, target: Target) -> list[FileChange]:
    """Return the change that removes only aimem's hook handlers for ``client``."""
    _check(client)
    path = target.path(HOOK_FILES[client], client)
    text = read_text(path)
    switch = openclaw.disable(target.home) if client == "openclaw" else []  # also when the folder is gone
    if text is None:
        return switch
    if client in EXTENSION_CLIENTS:
        if not extension.is_generated(text):
            return []  # someone else's plugin folder, and its switch: not ours
        extra = [path.with_name(name) for name in extension.openclaw_files()] if client == "openclaw" else []
        return [FileChange(p, t, None) for p in (path, *extra)
                if (t := read_text(p)) is not None and extension.is_generated(t)] + switch
    doc = load_json(path, text)
    if client == "antigravity":
        if not _antigravity_ours(doc.get(ANTIGRAVITY_HOOK)):
            return []
        del doc[ANTIGRAVITY_HOOK]
        return [json_change(path, text, doc, delete_if_empty=True)]
    hooks = _hooks_table(path, doc, create=False)
    if hooks is None:
        return [FileChange(path, text, text)] + ([_codex_config(target, path, doc)] if client == "codex" else [])
    for event in list(hooks):
        groups = hooks[event]
        if isinstance(groups, list):
            kept = _without_ours(groups)
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if not hooks:
        del doc["hooks"]
    own_file = client == "copilot-cli" and set(doc) <= {"version"}
    # a settings file left empty held only aimem's hooks: install-hooks created it, it goes
    changes = [json_change(path, text, {} if own_file else doc, delete_if_empty=True)]
    if client == "codex":
        changes.append(_codex_config(target, path, doc))
    return changes


def _codex_config(target: Target, changed: Path, doc: dict[str, Any]) -> FileChange:
    """The user's ``~/.codex/config.toml`` trusting every aimem hook in both scopes' files.

    ``changed``/``doc`` is the ``hooks.json`` being written (its new content); the other
    scope's file is read as it is, so removing one scope keeps the other's trust.
    """
    config = target.codex_dir / "config.toml"
    docs: dict[Path, dict[str, Any]] = {}
    for scope_path in (target.codex_dir / "hooks.json", target.project_dir / HOOK_FILES["codex"][1]):
        try:
            docs[scope_path] = load_json(scope_path, read_text(scope_path))
        except InstallError:
            docs[scope_path] = {}
    docs[changed] = doc
    entries: dict[str, str] = {}
    for hooks_path, hooks_doc in docs.items():
        entries.update(codex.trust_entries(hooks_path, hooks_doc))
    project_hooks = target.project_dir / HOOK_FILES["codex"][1]
    project = target.project_dir if codex.trust_entries(project_hooks, docs.get(project_hooks, {})) else None
    text = read_text(config)
    new = codex.config_with_trust(text, config, entries, project)
    if text is None and not new:
        return FileChange(config, None, None)
    return FileChange(config, text, new)


def plan_mcp(client: str, target: Target, url: str) -> list[FileChange]:
    """Return the change that registers aimem's MCP server (``url``) for ``client``."""
    _check(client)
    if client not in MCP_FILES:
        return []
    path = target.path(MCP_FILES[client], client)
    text = read_text(path)
    token = mcp_token(target)
    if client == "codex":
        return [FileChange(path, text, _toml_with_mcp(text, url, path, token), secret=token)]
    doc = load_json(path, text)
    if client == "opencode":
        doc.setdefault("$schema", "https://opencode.ai/config.json")
    entry = {
        "claude-code": {"type": "http", "url": url},
        "gemini-cli": {"httpUrl": url},
        "cursor": {"url": url},
        "copilot-cli": {"type": "http", "url": url, "tools": ["*"]},
        "opencode": {"type": "remote", "url": url, "enabled": True},
        "crush": {"type": "http", "url": url},
        "omp": {"type": "http", "url": url},
        "openclaw": {"url": url, "transport": "streamable-http"},
        "antigravity": {"serverUrl": url},
    }[client]
    if token:
        entry["headers"] = {"Authorization": f"Bearer {token}"}
    table = nested_table(path, doc, MCP_TABLES.get(client, ("mcpServers",)), create=True)
    table["aimem"] = entry
    change = json_change(path, text, doc)
    return [FileChange(change.path, change.old, change.new, secret=token)]


def mcp_token(target: Target) -> str | None:
    """The credential the MCP entry carries: ``target.token`` in the user's own files; none in
    a project's, which is usually committed with the repository (README "Authentication")."""
    return target.token if target.scope == "user" else None


def _extension_changes(client: str, target: Target, path: Path) -> list[FileChange]:
    """The generated module (and, for OpenClaw, its plugin metadata files) at ``path``."""
    url = None if target.ingress_url.rstrip("/") == DEFAULT_INGRESS_URL else target.ingress_url
    argv = [target.binary or aimem_binary(), "hook", *(["--ingress-url", url] if url else [])]
    files = {path: extension.render(client, argv)}
    if client == "openclaw":
        files.update({path.with_name(name): body for name, body in extension.openclaw_files().items()})
    changes = []
    for file, body in files.items():
        text = read_text(file)
        if text is not None and not extension.is_generated(text):
            raise InstallError(f"{file} exists and is not aimem's; move it away first")
        changes.append(FileChange(file, text, body))
    return changes


def _antigravity_ours(hook: Any) -> bool:
    """True for a named hook whose every handler runs ``aimem hook``."""
    if not isinstance(hook, dict) or not hook:
        return False
    handlers = [h for groups in hook.values() if isinstance(groups, list) for g in groups if isinstance(g, dict)
                for h in (g.get("hooks") if isinstance(g.get("hooks"), list) else [g])]
    return bool(handlers) and all(isinstance(h, dict) and is_ours(h.get("command")) for h in handlers)


def _antigravity_doc(path: Path, doc: dict[str, Any], target: Target) -> dict[str, Any]:
    """``doc`` with aimem's named hook ``aimem`` set to one handler per installed event."""
    current = doc.get(ANTIGRAVITY_HOOK)
    if current is not None and not _antigravity_ours(current):
        raise InstallError(f"{path}: a hook named {ANTIGRAVITY_HOOK!r} exists and is not aimem's; rename it first")
    url = None if target.ingress_url.rstrip("/") == DEFAULT_INGRESS_URL else target.ingress_url
    hook: dict[str, Any] = {}
    for event in EVENTS["antigravity"]:
        kind = CLIENTS["antigravity"].kind_of(event)
        handler = {"type": "command", "command": hook_command("antigravity", event, target.binary, url),
                   "timeout": 10 if kind is K.SESSION_START else 5}
        hook[event] = [{"matcher": "*", "hooks": [handler]}] if kind in TOOL_KINDS else [handler]
    doc[ANTIGRAVITY_HOOK] = hook
    return doc


def _hooks_table(path: Path, doc: dict[str, Any], *, create: bool) -> dict[str, Any] | None:
    hooks = doc.setdefault("hooks", {}) if create else doc.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise InstallError(f"{path}: `hooks` is not an object")
    return hooks


def _entry(client: str, event: str, command: str) -> dict[str, Any]:
    """Return the handler entry for one event in ``client``'s shape."""
    kind = CLIENTS[client].kind_of(event)
    slow = kind is K.SESSION_START  # session start waits for the context round trip
    if client == "cursor":
        return {"command": command, "timeout": 10 if slow else 5}
    if client == "copilot-cli":
        return {"type": "command", "bash": command, "timeoutSec": 10 if slow else 5}
    if client == "crush":  # flat; Crush rejects a matcher on a non-tool event, and none matches all
        return {"name": f"aimem-{event}", "command": command, "timeout": 10 if slow else 5}
    handler: dict[str, Any] = {"type": "command", "command": command}
    if client == "gemini-cli":
        handler = {"name": f"aimem-{event}", **handler, "timeout": 10_000 if slow else 5_000}
    elif event in CLIENTS[client].short_timeout_events:
        handler["timeout"] = 3  # Codex clamps these to 1-3 s (and warns on more)
    else:
        handler["timeout"] = 10 if slow else 5
    group: dict[str, Any] = {"hooks": [handler]}
    if kind in TOOL_KINDS:
        group = {"matcher": "*", **group}
    return group


def _is_ours_entry(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    if is_ours(entry.get("command")) or is_ours(entry.get("bash")):
        return True
    inner = entry.get("hooks")
    return isinstance(inner, list) and bool(inner) and all(
        isinstance(h, dict) and is_ours(h.get("command")) for h in inner)


def _without_ours(groups: list[Any]) -> list[Any]:
    """Drop our entries; in a mixed group keep the user's handlers, drop only ours."""
    kept = []
    for g in groups:
        if _is_ours_entry(g):
            continue
        if isinstance(g, dict) and isinstance(g.get("hooks"), list):
            inner = [h for h in g["hooks"] if not (isinstance(h, dict) and is_ours(h.get("command")))]
            if not inner:
                continue
            g = {**g, "hooks": inner}
        kept.append(g)
    return kept


def _put(groups: list[Any], entry: dict[str, Any], *, flat: bool) -> None:
    """Make ``entry`` our only entry in ``groups``: unchanged if already so, else in place."""
    ours = [i for i, g in enumerate(groups) if _is_ours_entry(g)]
    if len(ours) == 1 and groups[ours[0]] == entry:
        return
    at = ours[0] if ours else len(groups)
    rest = _without_ours(groups[:at]), _without_ours(groups[at:])
    groups[:] = [*rest[0], entry, *rest[1]]


def _toml_with_mcp(text: str | None, url: str, path: Path | None = None, token: str | None = None) -> str:
    """Return Codex's ``config.toml`` with ``[mcp_servers.aimem]`` pointing at ``url`` (and,
    with ``token``, ``http_headers = { Authorization = "Bearer <token>" }``).

    Appends the table when absent, rewrites its ``url``/``http_headers`` lines when they
    differ, and refuses a file that is not valid TOML (or holds aimem in a form it cannot
    edit safely).
    """
    import json
    import re
    import tomllib

    text = text or ""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(f"{path}: not valid TOML ({exc}); merge the aimem entries by hand") from None
    value = json.dumps(url)  # a TOML basic string: quotes and backslashes escaped
    headers = {"Authorization": f"Bearer {token}"} if token else None
    header_line = f"http_headers = {{ Authorization = {json.dumps(headers['Authorization'])} }}" if headers else ""
    servers = doc.get("mcp_servers")
    current = servers.get("aimem") if isinstance(servers, dict) else None
    if current is None:
        sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        return f"{text}{sep}[mcp_servers.aimem]\nurl = {value}\n" + (f"{header_line}\n" if headers else "")
    if isinstance(current, dict) and current.get("url") == url and (
            headers is None or current.get("http_headers") == headers):
        return text
    section = re.search(r"(?m)^\[mcp_servers\.aimem\][ \t]*(?:#.*)?$((?:\n(?!\s*\[).*)*)", text)
    body = section.group(1) if section else ""
    line = re.search(r"(?m)^[ \t]*url[ \t]*=.*$", body)
    if line is None:
        raise InstallError(f"{path}: [mcp_servers.aimem] is not in a form aimem can update; set url = {value} by hand")
    body = body[:line.start()] + f"url = {value}" + body[line.end():]
    if headers:
        old_headers = re.search(r"(?m)^[ \t]*http_headers[ \t]*=.*$", body)
        if old_headers is not None:
            body = body[:old_headers.start()] + header_line + body[old_headers.end():]
        else:
            at = re.search(r"(?m)^[ \t]*url[ \t]*=.*$", body).end()
            body = body[:at] + "\n" + header_line + body[at:]
    out = text[:section.start(1)] + body + text[section.end(1):]
    try:
        got = tomllib.loads(out)["mcp_servers"]["aimem"]
    except (tomllib.TOMLDecodeError, KeyError, TypeError):
        got = None
    if not got or got.get("url") != url or (headers and got.get("http_headers") != headers):
        raise InstallError(f"{path}: [mcp_servers.aimem] is not in a form aimem can update; merge it by hand")
    return out


def plan_unmcp(client: str, target: Target) -> list[FileChange]:
    """Return the change that removes only aimem's MCP server entry for ``client`` (``aimem
    uninstall``): the ``aimem`` key of the MCP table, or Codex's ``[mcp_servers.aimem]``. A
    file left holding nothing but that (now empty) table, and the ``$schema`` line
    ``install-mcp`` adds for OpenCode, is what ``install-mcp`` created: it is deleted."""
    import re

    _check(client)
    if client not in MCP_FILES:
        return []
    try:
        path = target.path(MCP_FILES[client], client)
    except InstallError:
        return []  # the client has no file in this scope: nothing was installed there
    text = read_text(path)
    if text is None:
        return []
    if client == "codex":
        section = re.search(r"(?m)^\[mcp_servers\.aimem\][ \t]*(?:#.*)?$(?:\n(?!\s*\[).*)*\n?", text)
        if section is None:
            return []
        new = (text[:section.start()].rstrip("\n") + "\n" + text[section.end():].lstrip("\n")).lstrip("\n")
        return [FileChange(path, text, new if new.strip() else None)]
    doc = load_json(path, text)
    keys = MCP_TABLES.get(client, ("mcpServers",))
    try:
        table = nested_table(path, doc, keys, create=False)
    except InstallError:
        return []  # not a table aimem wrote into
    if table is None or "aimem" not in table:
        return []
    del table["aimem"]
    prune_empty(doc, keys)  # the MCP table left empty goes (an unchanged file gets its original back)
    if client == "openclaw":  # one file for all of OpenClaw's settings: only what held aimem goes
        return [json_change(path, text, doc, delete_if_empty=True)]
    schema = {"$schema": "https://opencode.ai/config.json"} if client == "opencode" else {}
    if doc in ({}, schema):
        return [json_change(path, text, {}, delete_if_empty=True)]
    return [json_change(path, text, doc)]


def installed_hook_urls(target: Target, default_url: str) -> dict[str, str]:
    """Where the installed hooks of each client post: ``{client: ingress URL}`` for every client
    whose hook file at ``target`` holds aimem's hook commands.

    The URL is what the hook command itself resolves: its ``--ingress-url`` (written by
    ``install-hooks`` for a stack not on 8701), else ``default_url`` (the hook client's own
    resolution: ``AIMEM_INGRESS_URL``, ``ingress_url`` in the data dir's ``config.toml``, else
    8701); a generated module (Pi, OMP, OpenClaw, OpenCode) carries its command line in its source.
    Unreadable files are skipped.
    """
    import shlex

    out: dict[str, str] = {}
    for client, pair in HOOK_FILES.items():
        try:
            text = read_text(target.path(pair, client))
        except (InstallError, OSError):
            continue
        if not text:
            continue
        if client in EXTENSION_CLIENTS:
            argv = extension.argv_of(text)
            if argv is not None:
                url = next((argv[i + 1] for i, w in enumerate(argv[:-1]) if w == "--ingress-url"), None)
                out[client] = (url or default_url).rstrip("/")
            continue
        try:
            hooks = _hooks_table(Path(client), load_json(Path(client), text), create=False) or {}
        except InstallError:
            continue
        commands = [c for c in _commands(hooks) if is_ours(c)]
        for command in commands:
            try:
                words = shlex.split(command)
            except ValueError:
                continue
            url = next((words[i + 1] for i, w in enumerate(words[:-1]) if w == "--ingress-url"), None)
            out[client] = (url or default_url).rstrip("/")
            break
    return out


def _commands(node: Any) -> list[Any]:
    """Every ``command``/``bash`` string in a hooks table, however the client nests its entries."""
    if isinstance(node, dict):
        found = [node[k] for k in ("command", "bash") if isinstance(node.get(k), str)]
        return found + [c for v in node.values() if isinstance(v, (dict, list)) for c in _commands(v)]
    if isinstance(node, list):
        return [c for v in node for c in _commands(v)]
    return []
