"""install-hooks / uninstall-hooks / install-mcp against a temp HOME: merge, idempotence,
dry-run diff, removing only ours, every client's file format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aimem_cli.installers import is_ours
from aimem_common.clients import INSTALLABLE as CLIENTS
from aimem_cli.installers.plans import EVENTS, HOOK_FILES
from aimem_cli.main import build_app

FOREIGN = {  # a user's own hook in each client's format, which we must never touch
    "claude-code": {"hooks": {"PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "prettier -w"}]}]},
                    "model": "opus"},
    "codex": {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}},
    "gemini-cli": {"hooks": {"AfterTool": [{"matcher": "write_file", "hooks": [{"name": "fmt", "type": "command", "command": "fmt"}]}]},
                   "theme": "dark"},
    "cursor": {"version": 1, "hooks": {"afterFileEdit": [{"command": "./format.sh"}]}},
    "copilot-cli": {"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": "./guard.sh"}]}},
    "crush": {"hooks": {"PreToolUse": [{"matcher": "^bash$", "command": "./no-haskell.sh"}]},
              "providers": {"ollama": {"type": "openai-compat", "base_url": "http://localhost:11434/v1"}}},
}
GENERATED = ("opencode", "pi", "omp", "openclaw", "antigravity")  # no `hooks` table of commands


pytestmark = pytest.mark.usefixtures("no_server_here")  # conftest: an empty cwd, no server data dir or token


def cli(*args: str) -> tuple[int, str]:
    """Run the CLI; its output without the notes (no server data dir here: no credential)."""
    result = CliRunner().invoke(build_app(), list(args))
    return result.exit_code, "".join(line for line in result.output.splitlines(keepends=True)
                                     if not line.startswith("aimem: note:"))


def hook_file(client: str, home: Path) -> Path:
    return home / HOOK_FILES[client][0]


def commands(doc: dict) -> list[str]:
    out = []
    for groups in doc.get("hooks", {}).values():
        for g in groups:
            out += [g.get("command"), g.get("bash")] + [h.get("command") for h in g.get("hooks", [])]
    return [c for c in out if c]


@pytest.mark.parametrize("client", [c for c in CLIENTS if c not in GENERATED])
def test_install_merges_is_idempotent_and_uninstall_removes_only_ours(tmp_path, client):
    path = hook_file(client, tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(FOREIGN[client], indent=2))
    code, out = cli("install-hooks", "--client", client, "--home", str(tmp_path), "--dry-run")
    assert code == 0 and "+++" in out and "hook --agent" in out
    assert json.loads(path.read_text()) == FOREIGN[client]  # dry run wrote nothing

    code, out = cli("install-hooks", "--client", client, "--home", str(tmp_path))
    assert code == 0, out
    doc = json.loads(path.read_text())
    ours = [c for c in commands(doc) if is_ours(c)]
    assert len(ours) == len(EVENTS[client])
    assert all(f"--agent {client} --event" in c for c in ours)
    assert set(EVENTS[client]) <= set(doc["hooks"])
    assert [c for c in commands(doc) if not is_ours(c)] == commands(FOREIGN[client])
    for k, v in FOREIGN[client].items():
        if k != "hooks":
            assert doc[k] == v
    before = path.read_bytes()
    code, out = cli("install-hooks", "--client", client, "--home", str(tmp_path))
    assert code == 0 and "already up to date" in out and path.read_bytes() == before
    assert cli("install-hooks", "--client", client, "--home", str(tmp_path), "--dry-run")[1].strip() == "no changes"

    code, out = cli("uninstall-hooks", "--client", client, "--home", str(tmp_path))
    assert code == 0, out
    assert json.loads(path.read_text()) == FOREIGN[client]


def test_claude_shape_timeouts_and_tool_matchers(tmp_path):
    cli("install-hooks", "--client", "claude-code", "--home", str(tmp_path))
    hooks = json.loads(hook_file("claude-code", tmp_path).read_text())["hooks"]
    assert hooks["PreToolUse"][0]["matcher"] == "*"
    start = hooks["SessionStart"][0]
    assert "matcher" not in start and start["hooks"][0]["type"] == "command" and start["hooks"][0]["timeout"] == 10
    gem = tmp_path / "g"
    cli("install-hooks", "--client", "gemini-cli", "--home", str(gem))
    h = json.loads(hook_file("gemini-cli", gem).read_text())["hooks"]["AfterTool"][0]["hooks"][0]
    assert h["name"] == "aimem-AfterTool" and h["timeout"] == 5000  # gemini: milliseconds


def test_fresh_files_and_project_scope(tmp_path):
    proj = tmp_path / "repo"
    proj.mkdir()
    for client in (c for c in CLIENTS if c != "openclaw"):  # OpenClaw plugins are global only
        code, out = cli("install-hooks", "--client", client, "--scope", "project", "--project-dir", str(proj),
                        "--home", str(tmp_path / "home"))
        assert code == 0, (client, out)
    assert (proj / ".claude/settings.json").is_file() and (proj / ".github/hooks/aimem.json").is_file()
    assert (proj / ".cursor/hooks.json").is_file() and (proj / ".opencode/plugins/aimem.ts").is_file()
    assert json.loads((proj / ".github/hooks/aimem.json").read_text())["version"] == 1
    # only Codex touches the home: its hook trust lives in the user's config.toml (beside the
    # installers' ledger of what they changed, in the hook client's data dir)
    assert sorted(p.relative_to(tmp_path / "home").as_posix() for p in (tmp_path / "home").rglob("*")
                  if p.is_file()) == [".codex/config.toml", ".local/share/aimem/installers/originals.json"]
    assert f'[projects."{proj.resolve()}"]' in (tmp_path / "home/.codex/config.toml").read_text()
    code, _ = cli("uninstall-hooks", "--client", "copilot-cli", "--scope", "project", "--project-dir", str(proj),
                  "--home", str(tmp_path / "home"))
    assert code == 0 and not (proj / ".github/hooks/aimem.json").exists()  # our own file: deleted


def test_opencode_plugin_replaces_an_earlier_aimem_plugin_and_exports_one_function(tmp_path):
    """An OpenCode plugin of an earlier aimem (it posted to ingress itself, marker
    ``// aimem-managed-plugin``) is aimem's: uninstall removes it, install replaces it. The new
    one exports exactly one function (OpenCode takes every export for a plugin)."""
    plugin = hook_file("opencode", tmp_path)
    plugin.parent.mkdir(parents=True)
    legacy = ('// aimem-managed-plugin: generated by `aimem install-hooks --client opencode`.\n'
              'const INGRESS = (process.env.AIMEM_INGRESS_URL ?? "http://h:1")\n')
    plugin.write_text(legacy)
    assert cli("uninstall-hooks", "--client", "opencode", "--home", str(tmp_path))[0] == 0
    assert not plugin.exists()
    plugin.parent.mkdir(parents=True, exist_ok=True)
    plugin.write_text(legacy)
    code, out = cli("install-hooks", "--client", "opencode", "--home", str(tmp_path), "--ingress-url", "http://h:1")
    text = plugin.read_text()
    assert code == 0 and "aimem-managed-plugin" not in text and "aimem-managed-extension" in text, out
    assert text.count("export ") == 1 and "export const AimemPlugin = async" in text
    assert "experimental.chat.system.transform" in text and "dispose: async" in text
    assert "fetch(" not in text and "@opencode-ai/plugin" not in text  # no network of its own, no import


def test_unparsable_settings_are_left_alone(tmp_path):
    path = hook_file("claude-code", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('{ // a comment\n "hooks": {} }')
    code, out = cli("install-hooks", "--client", "claude-code", "--home", str(tmp_path))
    assert code == 1 and "by hand" in out and path.read_text().startswith("{ //")


@pytest.mark.parametrize("client,rel,check", [
    ("claude-code", ".claude.json", lambda d: d["mcpServers"]["aimem"] == {"type": "http", "url": "http://127.0.0.1:8703/mcp"}),
    ("gemini-cli", ".gemini/settings.json", lambda d: d["mcpServers"]["aimem"] == {"httpUrl": "http://127.0.0.1:8703/mcp"}),
    ("cursor", ".cursor/mcp.json", lambda d: d["mcpServers"]["aimem"]["url"] == "http://127.0.0.1:8703/mcp"),
    ("copilot-cli", ".copilot/mcp-config.json", lambda d: d["mcpServers"]["aimem"]["type"] == "http"),
    ("opencode", ".config/opencode/opencode.json", lambda d: d["mcp"]["aimem"]["type"] == "remote"),
])
def test_install_mcp_json_clients(tmp_path, client, rel, check):
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": {"other": {"url": "x"}}} if client != "opencode" else {"theme": "x"}))
    assert cli("install-mcp", "--client", client, "--home", str(tmp_path))[0] == 0
    doc = json.loads(path.read_text())
    assert check(doc)
    assert doc.get("mcpServers", {}).get("other", {"url": "x"}) == {"url": "x"}
    assert "already up to date" in cli("install-mcp", "--client", client, "--home", str(tmp_path))[1]


def test_install_mcp_codex_toml(tmp_path):
    cfg = tmp_path / ".codex/config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('model = "gpt-5-codex"\n')
    assert cli("install-mcp", "--client", "codex", "--home", str(tmp_path))[0] == 0
    assert cli("install-mcp", "--client", "codex", "--home", str(tmp_path))[0] == 0
    import tomllib

    doc = tomllib.loads(cfg.read_text())
    assert doc["model"] == "gpt-5-codex" and doc["mcp_servers"]["aimem"]["url"] == "http://127.0.0.1:8703/mcp"
    assert cfg.read_text().count("[mcp_servers.aimem]") == 1


def test_install_mcp_codex_toml_new_url_and_broken_file(tmp_path):
    import tomllib

    cfg = tmp_path / ".codex/config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('[mcp_servers.aimem]\nurl = "http://127.0.0.1:8703/mcp"  # old\n\n[mcp_servers.x]\nurl = "keep"\n')
    new = "http://127.0.0.1:9703/mcp"
    assert cli("install-mcp", "--client", "codex", "--home", str(tmp_path), "--url", new)[0] == 0
    doc = tomllib.loads(cfg.read_text())
    assert doc["mcp_servers"]["aimem"]["url"] == new and doc["mcp_servers"]["x"]["url"] == "keep"
    assert "already up to date" in cli("install-mcp", "--client", "codex", "--home", str(tmp_path), "--url", new)[1]
    broken = '[mcp_servers.x]\ncommand = "y"\n[bad toml\n'
    cfg.write_text(broken)
    code, out = cli("install-mcp", "--client", "codex", "--home", str(tmp_path))
    assert code == 1 and "not valid TOML" in out and cfg.read_text() == broken


def test_unknown_client_is_an_error(tmp_path):
    code, out = cli("install-hooks", "--client", "vim", "--home", str(tmp_path))
    assert code == 1 and "unknown client" in out


def test_codex_install_trusts_its_hooks_and_uninstall_takes_the_trust_back(tmp_path):
    """Codex runs a hook only when config.toml trusts its exact definition: the installer
    writes the feature switch and one trusted_hash per handler, shown in the dry run."""
    import tomllib

    from aimem_cli.installers.codex import BEGIN, hook_hash

    codex_dir = tmp_path / ".codex"
    codex_dir.mkdir()
    (codex_dir / "hooks.json").write_text(json.dumps(FOREIGN["codex"]))
    user_config = 'model = "o4"\n\n[features]\nweb_search = true\n\n[mcp_servers.other]\nurl = "http://x"\n'
    (codex_dir / "config.toml").write_text(user_config)
    code, out = cli("install-hooks", "--client", "codex", "--home", str(tmp_path), "--dry-run")
    assert code == 0 and "config.toml" in out and "+hooks = true  # added by aimem install-hooks" in out
    assert "trusted_hash" in out and (codex_dir / "config.toml").read_text() == user_config

    assert cli("install-hooks", "--client", "codex", "--home", str(tmp_path))[0] == 0
    text = (codex_dir / "config.toml").read_text()
    conf = tomllib.loads(text)
    assert conf["features"] == {"web_search": True, "hooks": True} and conf["model"] == "o4"
    hooks = json.loads((codex_dir / "hooks.json").read_text())["hooks"]
    state = conf["hooks"]["state"]
    assert len(state) == len(EVENTS["codex"]) and BEGIN in text
    # the user's Stop hook stays first, ours is group 1 of Stop; every key names its position
    source = str(codex_dir / "hooks.json")
    stop = hooks["Stop"][1]
    assert state[f"{source}:stop:1:0"]["trusted_hash"] == hook_hash("Stop", stop, stop["hooks"][0])
    end = hooks["SessionEnd"][0]
    assert end["hooks"][0]["timeout"] == 3  # Codex clamps SessionEnd hooks to 1-3 s
    assert cli("install-hooks", "--client", "codex", "--home", str(tmp_path))[1].strip() == "already up to date"

    assert cli("uninstall-hooks", "--client", "codex", "--home", str(tmp_path))[0] == 0
    assert (codex_dir / "config.toml").read_text() == user_config  # byte for byte what the user had
    assert json.loads((codex_dir / "hooks.json").read_text()) == FOREIGN["codex"]


def test_codex_hash_matches_codex_normalisation():
    """Known values: timeout defaulted/clamped, matcher dropped for Stop (Codex rules)."""
    from aimem_cli.installers.codex import hook_hash

    h = {"type": "command", "command": "echo hi"}
    assert hook_hash("Stop", {"matcher": "x", "hooks": [h]}, h) == hook_hash("Stop", {"hooks": [h]}, h)
    assert hook_hash("SessionEnd", {"hooks": [h]}, {**h, "timeout": 30}) == hook_hash(
        "SessionEnd", {"hooks": [h]}, {**h, "timeout": 3})
    assert hook_hash("PreToolUse", {"hooks": [h]}, h) == hook_hash("PreToolUse", {"hooks": [h]}, {**h, "timeout": 600})
    assert hook_hash("PreToolUse", {"matcher": "*", "hooks": [h]}, h) != hook_hash("PreToolUse", {"hooks": [h]}, h)


def test_codex_refuses_hooks_switched_off(tmp_path):
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex/config.toml").write_text("[features]\nhooks = false\n")
    code, out = cli("install-hooks", "--client", "codex", "--home", str(tmp_path))
    assert code == 1 and "turns Codex hooks off" in out
    assert not (tmp_path / ".codex/hooks.json").exists()


def test_codex_follows_codex_home(tmp_path, monkeypatch):
    """With $CODEX_HOME set, Codex reads hooks.json and config.toml there: so does the installer."""
    import tomllib

    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    home = str(tmp_path / "home")
    assert cli("install-hooks", "--client", "codex", "--home", home)[0] == 0
    assert cli("install-mcp", "--client", "codex", "--home", home)[0] == 0
    conf = tomllib.loads((tmp_path / "codex-home/config.toml").read_text())
    assert conf["mcp_servers"]["aimem"]["url"] == "http://127.0.0.1:8703/mcp"
    hooks = str(tmp_path / "codex-home/hooks.json")
    assert f"{hooks}:session_start:0:0" in conf["hooks"]["state"]
    assert not (tmp_path / "home/.codex").exists()


KEY = "aim_" + "k" * 43  # a user API key as `aimem api-key create` prints it


@pytest.mark.parametrize("client,rel,table", [
    ("claude-code", ".claude.json", "mcpServers"), ("gemini-cli", ".gemini/settings.json", "mcpServers"),
    ("cursor", ".cursor/mcp.json", "mcpServers"), ("copilot-cli", ".copilot/mcp-config.json", "mcpServers"),
    ("opencode", ".config/opencode/opencode.json", "mcp"),
])
def test_install_mcp_writes_the_credential_as_a_header_owner_only(tmp_path, client, rel, table):
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    path.chmod(0o644)
    dry = cli("install-mcp", "--client", client, "--home", str(tmp_path), "--api-key", KEY, "--dry-run")[1]
    assert KEY not in dry and "Bearer <token>" in dry  # a diff never shows the key
    assert cli("install-mcp", "--client", client, "--home", str(tmp_path), "--api-key", KEY)[0] == 0
    assert json.loads(path.read_text())[table]["aimem"]["headers"] == {"Authorization": f"Bearer {KEY}"}
    assert path.stat().st_mode & 0o777 == 0o600  # it now holds a credential
    assert "already up to date" in cli("install-mcp", "--client", client, "--home", str(tmp_path), "--api-key", KEY)[1]


def test_install_mcp_codex_http_headers_and_no_token_in_project_files(tmp_path):
    import tomllib

    cfg = tmp_path / ".codex/config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('[mcp_servers.aimem]\nurl = "http://old/mcp"\nhttp_headers = { Authorization = "Bearer old" }\n'
                   '\n[mcp_servers.x]\nurl = "keep"\n')
    assert cli("install-mcp", "--client", "codex", "--home", str(tmp_path), "--api-key", KEY)[0] == 0
    doc = tomllib.loads(cfg.read_text())
    assert doc["mcp_servers"]["aimem"] == {"url": "http://127.0.0.1:8703/mcp",
                                           "http_headers": {"Authorization": f"Bearer {KEY}"}}
    assert doc["mcp_servers"]["x"] == {"url": "keep"}
    fresh = tmp_path / "fresh"
    assert cli("install-mcp", "--client", "codex", "--home", str(fresh), "--api-key", KEY)[0] == 0
    assert tomllib.loads((fresh / ".codex/config.toml").read_text())["mcp_servers"]["aimem"]["http_headers"] == {
        "Authorization": f"Bearer {KEY}"}
    project = tmp_path / "repo"
    project.mkdir()
    code, out = cli("install-mcp", "--client", "claude-code", "--scope", "project", "--project-dir", str(project),
                    "--home", str(tmp_path), "--api-key", KEY)
    assert code == 0 and KEY not in (project / ".mcp.json").read_text()  # committed with the repository


def test_install_hooks_gives_the_hook_client_the_key_not_the_commands(tmp_path):
    assert cli("install-hooks", "--client", "claude-code", "--home", str(tmp_path), "--api-key", KEY)[0] == 0
    copy = tmp_path / ".local/share/aimem/auth/client-token"
    assert copy.read_text().strip() == KEY and copy.stat().st_mode & 0o777 == 0o600
    assert KEY not in (tmp_path / ".claude/settings.json").read_text()


def test_installers_take_the_servers_token_from_its_data_dir(tmp_path):
    from aimem_common import config

    data = tmp_path / "server"
    (data / "db").mkdir(parents=True)  # an aimem data dir before its first `aimem up`
    home = tmp_path / "home"
    assert cli("install-hooks", "--client", "gemini-cli", "--home", str(home), "--data-dir", str(data))[0] == 0
    token = config.read_token_file(data)
    assert token and (data / "auth/token").stat().st_mode & 0o777 == 0o600  # made here, as `aimem up` would
    assert (home / ".local/share/aimem/auth/client-token").read_text().strip() == token
    not_ours = tmp_path / "project-data"
    not_ours.mkdir()
    assert cli("install-hooks", "--client", "cursor", "--home", str(home), "--data-dir", str(not_ours))[0] == 0
    assert not (not_ours / "auth").exists()  # a folder that is not an aimem data dir is left alone


def test_crush_entries_are_flat_and_only_tool_events_could_take_a_matcher(tmp_path):
    """Crush rejects a ``matcher`` on a non-tool event (its hooks README): aimem sets none."""
    cli("install-hooks", "--client", "crush", "--home", str(tmp_path))
    hooks = json.loads(hook_file("crush", tmp_path).read_text())["hooks"]
    assert set(hooks) == set(EVENTS["crush"])
    start = hooks["SessionStart"][0]
    assert set(start) == {"name", "command", "timeout"} and start["timeout"] == 10
    assert all("matcher" not in e for entries in hooks.values() for e in entries)


def test_antigravity_named_hook_installed_and_removed_byte_for_byte(tmp_path):
    """aimem owns the named hook ``aimem`` in ``~/.gemini/config/hooks.json``; a user's own
    named hook stays, and uninstall restores the file exactly."""
    path = hook_file("antigravity", tmp_path)
    path.parent.mkdir(parents=True)
    mine = {"shell-audit": {"PreToolUse": [{"matcher": "run_command",
                                            "hooks": [{"type": "command", "command": "./audit.sh", "timeout": 5}]}]}}
    path.write_text(json.dumps(mine, indent=2) + "\n")
    before = path.read_bytes()
    assert cli("install-hooks", "--client", "antigravity", "--home", str(tmp_path))[0] == 0
    doc = json.loads(path.read_text())
    assert doc["shell-audit"] == mine["shell-audit"]
    ours = doc["aimem"]
    assert set(ours) == {"PreInvocation", "PreToolUse", "PostToolUse", "Stop"}
    assert ours["PreInvocation"][0]["type"] == "command" and "matcher" not in ours["PreInvocation"][0]
    assert ours["PreToolUse"][0]["matcher"] == "*" and is_ours(ours["PreToolUse"][0]["hooks"][0]["command"])
    assert all(isinstance(h.get("timeout"), int) for h in ours["PreInvocation"])  # agy refuses a float
    assert cli("uninstall-hooks", "--client", "antigravity", "--home", str(tmp_path))[0] == 0
    assert path.read_bytes() == before
    doc["aimem"] = {"Stop": [{"type": "command", "command": "./mine.sh"}]}  # someone else's "aimem"
    path.write_text(json.dumps(doc))
    code, out = cli("install-hooks", "--client", "antigravity", "--home", str(tmp_path))
    assert code == 1 and "not aimem's" in out


@pytest.mark.parametrize("client", ["pi", "omp", "openclaw", "opencode"])
def test_generated_extension_pipes_into_aimem_hook_and_is_removed(tmp_path, client):
    code, out = cli("install-hooks", "--client", client, "--home", str(tmp_path), "--ingress-url", "http://h:1")
    assert code == 0, out
    module = hook_file(client, tmp_path)
    text = module.read_text()
    assert "aimem-managed-extension" in text and f'const AGENT = "{client}"' in text
    assert '"--ingress-url", "http://h:1"' in text and '"hook"' in text
    assert {"openclaw": "api.on(", "opencode": '"tool.execute.after": async'}.get(client, "pi.on(") in text
    if client == "openclaw":
        pkg = json.loads(module.with_name("package.json").read_text())
        assert pkg["openclaw"] == {"extensions": ["./index.ts"]}
        assert json.loads(module.with_name("openclaw.plugin.json").read_text())["id"] == "aimem"
    assert "already up to date" in cli("install-hooks", "--client", client, "--home", str(tmp_path),
                                       "--ingress-url", "http://h:1")[1]
    assert cli("uninstall-hooks", "--client", client, "--home", str(tmp_path))[0] == 0
    assert not module.parent.exists() and tmp_path.is_dir()  # the folders it emptied went, up to the home
    module.parent.mkdir(parents=True)
    module.write_text("// the user's own extension\n")
    code, out = cli("install-hooks", "--client", client, "--home", str(tmp_path))
    assert code == 1 and "not aimem's" in out and module.read_text() == "// the user's own extension\n"


def test_openclaw_plugin_takes_the_hooks_openclaw_fires_keyed_by_the_per_session_id():
    """OpenClaw 2026.9.6 fires ``session_start``/``session_end`` from its gateway with a context of
    ``{sessionId, sessionKey, agentId}`` only; ``sessionKey`` (``agent:main:main``) outlives many
    sessions. The generated plugin subscribes exactly the hooks of ``clients.openclaw``, keys a
    session by ``sessionId``, places it in the agent's workspace and keeps its state per process."""
    import re

    from aimem_cli.installers import extension
    from aimem_common.clients import openclaw
    from aimem_common.clients.base import K

    text = extension.render("openclaw", ["aimem", "hook"])
    assert tuple(re.findall(r'api\.on\("([a-z_]+)"', text)) == openclaw.SUBSCRIBED
    assert all(openclaw.EVENTS[name] != K.OTHER for name in openclaw.SUBSCRIBED)  # each one has its kind
    assert "session_id: ctx?.sessionId ?? ctx?.sessionKey" in text
    assert "ctx?.workspaceDir ?? workspaceOf(ctx?.agentId)" in text
    assert 'resolveAgentWorkspaceDir?.(api?.config' in text
    assert 'Symbol.for("aimem.openclaw.sessions")' in text and 'Symbol.for("aimem.hook.pending")' in text


def test_install_hooks_with_the_data_dir_in_the_environment_still_hands_the_hooks_the_token(tmp_path, monkeypatch):
    """``AIMEM_DATA_DIR=$D install-hooks`` is ``install-hooks --data-dir $D``: the hook commands carry
    no data dir, so the hooks read the user's default client dir and must find the token there."""
    from aimem_common import config

    data, home = tmp_path / "server", tmp_path / "home"
    (data / "db").mkdir(parents=True)
    monkeypatch.setenv("AIMEM_DATA_DIR", str(data))
    assert cli("install-hooks", "--client", "claude-code", "--home", str(home))[0] == 0
    token = config.read_token_file(data)
    assert token and (home / ".local/share/aimem/auth/client-token").read_text().strip() == token


@pytest.mark.parametrize("verb", [("install-hooks", "--client", "claude-code"), ("install-mcp", "--client", "codex"),
                                  ("setup-agent", "--client", "claude-code"), ("up",), ("replica",)])
@pytest.mark.parametrize("base", ["-5", "0", "65532", "99999"])
def test_every_port_base_is_checked_before_anything_is_written(tmp_path, verb, base):
    code, out = cli(*verb, "--home", str(tmp_path), "--port-base", base) if verb[0] not in ("up", "replica") \
        else cli(*verb, "--port-base", base)
    assert code == 1 and f"--port-base {base} is out of range" in out and "1..65531" in out, out
    assert not any(tmp_path.rglob("*.json")) and not any(tmp_path.rglob("*.toml"))
    code, _ = cli("install-hooks", "--client", "claude-code", "--home", str(tmp_path), "--port-base", "65531")
    assert code == 0 and "http://127.0.0.1:65531" in (tmp_path / ".claude/settings.json").read_text()
