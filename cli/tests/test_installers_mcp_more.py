"""MCP wiring for OMP, OpenClaw and Antigravity CLI, and OpenClaw's plugin switch, against a
temp HOME: each client's documented file and table, the credential as a header, idempotence,
and uninstall leaving the user's files byte for byte (or gone when aimem created them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aimem_cli.main import build_app

URL = "http://127.0.0.1:8703/mcp"
KEY = "aim_k0123456789abcdef"


pytestmark = pytest.mark.usefixtures("no_server_here")  # conftest: an empty cwd, no server data dir or token


def cli(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(build_app(), list(args))
    return r.exit_code, r.output


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# (client, user file, path to the server table, aimem's entry without credential, the user's own content)
CASES = [
    ("omp", ".omp/agent/mcp.json", ("mcpServers",), {"type": "http", "url": URL},
     {"mcpServers": {"files": {"command": "npx", "args": ["-y", "fs-mcp"]}}}),
    ("openclaw", ".openclaw/openclaw.json", ("mcp", "servers"), {"url": URL, "transport": "streamable-http"},
     {"gateway": {"mode": "local", "port": 18789}, "agents": {"defaults": {"workspace": "~/work"}}}),
    ("antigravity", ".gemini/config/mcp_config.json", ("mcpServers",), {"serverUrl": URL},
     {"mcpServers": {"docs": {"serverUrl": "https://docs.example/mcp"}}}),
]


def _at(doc: dict, keys: tuple[str, ...]) -> dict:
    for key in keys:
        doc = doc[key]
    return doc


@pytest.mark.parametrize("client,rel,keys,entry,mine", CASES, ids=[c[0] for c in CASES])
def test_install_mcp_merges_the_documented_entry_and_uninstall_restores_the_bytes(tmp_path, client, rel, keys,
                                                                                  entry, mine):
    path = tmp_path / rel
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(mine, indent=2) + "\n")
    before = snapshot(tmp_path)

    code, out = cli("install-mcp", "--client", client, "--home", str(tmp_path), "--api-key", KEY)
    assert code == 0, out
    doc = json.loads(path.read_text())
    assert _at(doc, keys)["aimem"] == {**entry, "headers": {"Authorization": f"Bearer {KEY}"}}
    for top, value in mine.items():  # the user's own servers and settings are untouched
        if top not in keys:
            assert doc[top] == value
    if keys[0] in mine:  # the user's own servers beside aimem's
        assert {k: v for k, v in _at(doc, keys).items() if k != "aimem"} == _at(mine, keys)
    assert path.stat().st_mode & 0o777 == 0o600  # it holds a credential now
    assert "already up to date" in cli("install-mcp", "--client", client, "--home", str(tmp_path), "--api-key", KEY)[1]

    code, out = cli("uninstall", "--client", client, "--home", str(tmp_path), "--project-dir", str(tmp_path / "cwd"))
    assert code == 0, out
    after = snapshot(tmp_path)
    assert after[rel] == before[rel]  # byte for byte
    assert {k for k in after if not k.startswith(".local/")} == set(before)


@pytest.mark.parametrize("client,rel,keys,entry,mine", CASES, ids=[c[0] for c in CASES])
def test_install_mcp_into_no_file_creates_it_and_uninstall_deletes_it(tmp_path, client, rel, keys, entry, mine):
    code, out = cli("install-mcp", "--client", client, "--home", str(tmp_path))
    assert code == 0, out
    assert json.loads((tmp_path / rel).read_text()) == _nest(keys, {"aimem": entry})
    code, out = cli("uninstall", "--client", client, "--home", str(tmp_path), "--project-dir", str(tmp_path / "cwd"))
    assert code == 0 and not (tmp_path / rel).exists(), out


def _nest(keys: tuple[str, ...], leaf: dict) -> dict:
    for key in reversed(keys):
        leaf = {key: leaf}
    return leaf


def test_project_scope_mcp_files_of_omp_and_antigravity_carry_no_token(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    for client, rel in (("omp", ".omp/mcp.json"), ("antigravity", ".agents/mcp_config.json")):
        code, out = cli("install-mcp", "--client", client, "--scope", "project", "--project-dir", str(repo),
                        "--home", str(tmp_path), "--api-key", KEY)
        assert code == 0, out
        doc = json.loads((repo / rel).read_text())
        assert "headers" not in doc["mcpServers"]["aimem"] and KEY not in (repo / rel).read_text()
    code, out = cli("install-mcp", "--client", "openclaw", "--scope", "project", "--project-dir", str(repo),
                    "--home", str(tmp_path))
    assert code == 1 and "no project-scope file" in out


def test_a_table_that_is_not_an_object_is_refused_and_left_alone(tmp_path):
    path = tmp_path / ".openclaw/openclaw.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"mcp": {"servers": []}}\n')
    code, out = cli("install-mcp", "--client", "openclaw", "--home", str(tmp_path))
    assert code == 1 and "`mcp.servers` is not an object" in out, out
    assert path.read_text() == '{"mcp": {"servers": []}}\n'


def test_openclaw_install_hooks_enables_its_plugin_and_uninstall_takes_only_that_out(tmp_path):
    """OpenClaw loads a discovered plugin only when ``plugins.entries.<id>.enabled`` says so
    (and, with a non-empty allowlist, only a listed one), and hands a non-bundled plugin the
    conversation hooks only with ``hooks.allowConversationAccess``: install-hooks sets those for
    aimem, uninstall-hooks takes exactly that out; the user's plugins and allowlist stay."""
    path = tmp_path / ".openclaw/openclaw.json"
    path.parent.mkdir(parents=True)
    mine = {"plugins": {"allow": ["voice-call"], "entries": {"voice-call": {"enabled": True, "config": {"x": 1}}}},
            "gateway": {"port": 18789}}
    path.write_text(json.dumps(mine, indent=2) + "\n")
    before = path.read_bytes()
    code, out = cli("install-hooks", "--client", "openclaw", "--home", str(tmp_path))
    assert code == 0, out
    doc = json.loads(path.read_text())
    assert doc["plugins"]["entries"]["aimem"] == {"enabled": True, "hooks": {"allowConversationAccess": True}}
    assert doc["plugins"]["allow"] == ["voice-call", "aimem"]
    assert doc["plugins"]["entries"]["voice-call"] == mine["plugins"]["entries"]["voice-call"]
    assert (tmp_path / ".openclaw/extensions/aimem/index.ts").is_file()
    assert "already up to date" in cli("install-hooks", "--client", "openclaw", "--home", str(tmp_path))[1]
    code, out = cli("uninstall-hooks", "--client", "openclaw", "--home", str(tmp_path))
    assert code == 0, out
    assert path.read_bytes() == before
    assert not (tmp_path / ".openclaw/extensions/aimem").exists() or not any(
        (tmp_path / ".openclaw/extensions/aimem").iterdir())


def test_openclaw_setup_agent_writes_plugin_switch_and_mcp_into_one_file_and_uninstall_deletes_it(tmp_path):
    """Plugin switch and MCP server share ``openclaw.json``: setup-agent writes both (the MCP plan
    starts from the switched file), uninstall removes both; a file aimem created is deleted."""
    repo = tmp_path / "repo"
    repo.mkdir()
    code, out = cli("setup-agent", "--client", "openclaw", "--home", str(tmp_path), "--project-dir", str(repo),
                    "--no-instructions", "--no-skills")
    assert code == 0, out
    doc = json.loads((tmp_path / ".openclaw/openclaw.json").read_text())
    assert doc["plugins"] == {"entries": {"aimem": {"enabled": True, "hooks": {"allowConversationAccess": True}}}}
    assert doc["mcp"]["servers"]["aimem"]["url"] == URL
    code, out = cli("uninstall", "--client", "openclaw", "--home", str(tmp_path), "--project-dir", str(repo))
    assert code == 0, out
    assert not (tmp_path / ".openclaw/openclaw.json").exists()


def test_openclaw_plugin_settings_of_the_user_survive_uninstall(tmp_path):
    """A user who configured aimem's plugin entry (``config``, another hook policy) keeps it;
    only ``enabled`` and ``hooks.allowConversationAccess`` go."""
    path = tmp_path / ".openclaw/openclaw.json"
    path.parent.mkdir(parents=True)
    mine = {"plugins": {"entries": {"aimem": {"config": {}, "hooks": {"allowPromptInjection": True}}}}}
    path.write_text(json.dumps(mine, indent=2) + "\n")
    assert cli("install-hooks", "--client", "openclaw", "--home", str(tmp_path))[0] == 0
    assert json.loads(path.read_text())["plugins"]["entries"]["aimem"] == {
        "config": {}, "enabled": True, "hooks": {"allowPromptInjection": True, "allowConversationAccess": True}}
    assert cli("uninstall-hooks", "--client", "openclaw", "--home", str(tmp_path))[0] == 0
    assert json.loads(path.read_text()) == mine


def test_openclaw_plugin_hooks_that_are_not_an_object_are_refused(tmp_path):
    path = tmp_path / ".openclaw/openclaw.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"plugins": {"entries": {"aimem": {"hooks": true}}}}\n')
    code, out = cli("install-hooks", "--client", "openclaw", "--home", str(tmp_path))
    assert code == 1 and "plugins.entries.aimem.hooks is not an object" in out, out
    assert path.read_text() == '{"plugins": {"entries": {"aimem": {"hooks": true}}}}\n'


def test_openclaw_empty_allowlist_is_not_turned_into_aimem_only(tmp_path):
    path = tmp_path / ".openclaw/openclaw.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"plugins": {"allow": []}}, indent=2) + "\n")
    before = path.read_bytes()
    assert cli("install-hooks", "--client", "openclaw", "--home", str(tmp_path))[0] == 0
    assert json.loads(path.read_text())["plugins"]["allow"] == []
    assert cli("uninstall-hooks", "--client", "openclaw", "--home", str(tmp_path))[0] == 0
    assert path.read_bytes() == before
