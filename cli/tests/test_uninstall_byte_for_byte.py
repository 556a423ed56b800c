"""setup-agent then uninstall gives the user's home back byte for byte: content AND mode of
the user's own files, no file or folder aimem created, the hook client's token file gone with
the last client that used it (``installers.base.Ledger``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aimem_cli.main import build_app

KEY = "aim_bytes_for_bytes_test_key"


@pytest.fixture(autouse=True)
def _here(no_server_here):
    """The conftest's empty cwd without a server's environment, and the usual umask (the modes
    compared below are the ones a user's files get)."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def cli(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(build_app(), list(args))
    return r.exit_code, r.output


def tree(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every file and folder under ``root``: relative path -> (mode, bytes; None for a folder)."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        out[p.relative_to(root).as_posix()] = (st.st_mode & 0o7777, None if p.is_dir() else p.read_bytes())
    return out


def user_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    files = {  # compact JSON, odd modes, no final newline: what a re-serialisation would change
        ".config/opencode/opencode.json": (b'{"theme":"dark"}', 0o644),
        ".omp/agent/mcp.json": (b'{"mcpServers":{"other":{"type":"http","url":"http://o"}}}\r\n', 0o640),
        ".gemini/config/mcp_config.json": (b'{ "mcpServers": {} }', 0o644),
        ".gemini/config/hooks.json": (b'{"mine":{"Stop":[{"type":"command","command":"true"}]}}', 0o664),
        ".openclaw/openclaw.json": (b'{"gateway":{"port":18789}}', 0o600),
        ".local/share/aimem/spool/keep": (b"x", 0o644),  # the hook client's dir exists already
    }
    for rel, (data, mode) in files.items():
        p = home / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        p.chmod(mode)
    (home / ".openclaw/empty-by-choice").mkdir()  # a folder of the user's, empty: it stays
    return home


CLIENTS = ("opencode", "omp", "antigravity", "openclaw")


def test_setup_agent_then_uninstall_gives_every_byte_and_mode_back(tmp_path):
    home = user_home(tmp_path)
    repo = tmp_path / "repo"
    repo.mkdir()
    before = tree(home), tree(repo)
    for client in CLIENTS:
        code, out = cli("setup-agent", "--client", client, "--home", str(home), "--project-dir", str(repo),
                        "--api-key", KEY)
        assert code == 0, out
    token = home / ".local/share/aimem/auth/client-token"
    assert token.read_text() == KEY + "\n" and token.stat().st_mode & 0o777 == 0o600
    opencode = json.loads((home / ".config/opencode/opencode.json").read_text())
    assert opencode["theme"] == "dark" and opencode["mcp"]["aimem"]["headers"] == {"Authorization": f"Bearer {KEY}"}
    assert (home / ".config/opencode/opencode.json").stat().st_mode & 0o777 == 0o600  # it holds the key now
    assert (home / ".openclaw/extensions/aimem/index.ts").is_file()
    assert (home / ".local/share/aimem/installers/originals.json").stat().st_mode & 0o777 == 0o600

    for i, client in enumerate(CLIENTS):
        code, out = cli("uninstall", "--client", client, "--home", str(home), "--project-dir", str(repo))
        assert code == 0, out
        if i < len(CLIENTS) - 1:
            assert token.is_file(), f"the token went with {client}, though other clients still use it"
    after = tree(home), tree(repo)
    assert after[1] == before[1]
    changed = {k: (before[0].get(k), after[0].get(k)) for k in before[0].keys() | after[0].keys()
               if before[0].get(k) != after[0].get(k)}
    assert changed == {}


def test_a_file_the_user_edited_after_install_keeps_the_edit_and_loses_only_aimem(tmp_path):
    home = user_home(tmp_path)
    code, out = cli("setup-agent", "--client", "opencode", "--home", str(home), "--no-instructions",
                    "--api-key", KEY)
    assert code == 0, out
    path = home / ".config/opencode/opencode.json"
    doc = json.loads(path.read_text())
    doc["model"] = "mine"
    path.write_text(json.dumps(doc))
    code, out = cli("uninstall", "--client", "opencode", "--home", str(home))
    assert code == 0, out
    # the user edit makes the file theirs: aimem's entry and its emptied table go, the rest stays
    assert json.loads(path.read_text()) == {"theme": "dark", "model": "mine", "$schema": "https://opencode.ai/config.json"}
    # the last client is gone: so are the credential file and the ledger
    assert not (home / ".local/share/aimem/auth/client-token").exists()
    assert not (home / ".local/share/aimem/installers").exists()


def test_uninstall_hooks_alone_keeps_the_mcp_entry_in_a_shared_file(tmp_path):
    home = tmp_path / "home"
    settings = home / ".gemini/settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_bytes(b'{"theme":"x"}')
    code, out = cli("setup-agent", "--client", "gemini-cli", "--home", str(home), "--no-instructions",
                    "--no-skills", "--api-key", KEY)
    assert code == 0, out
    code, out = cli("uninstall-hooks", "--client", "gemini-cli", "--home", str(home))
    assert code == 0, out
    doc = json.loads(settings.read_text())
    assert "hooks" not in doc and doc["mcpServers"]["aimem"]["httpUrl"].endswith("/mcp")
    code, out = cli("uninstall", "--client", "gemini-cli", "--home", str(home))
    assert code == 0, out
    assert settings.read_bytes() == b'{"theme":"x"}'


def test_uninstalling_openclaw_alone_takes_its_plugin_folder(tmp_path):
    """OpenClaw's switch and MCP entry share openclaw.json (two writes in one uninstall): the
    plugin folder the first one emptied goes too, while another client keeps aimem's ledger."""
    home = user_home(tmp_path)
    for client in ("openclaw", "opencode"):
        code, out = cli("setup-agent", "--client", client, "--home", str(home), "--no-instructions",
                        "--no-skills", "--api-key", KEY)
        assert code == 0, out
    code, out = cli("uninstall", "--client", "openclaw", "--home", str(home))
    assert code == 0, out
    assert not (home / ".openclaw/extensions").exists()
    assert (home / ".openclaw/openclaw.json").read_bytes() == b'{"gateway":{"port":18789}}'
    assert (home / ".local/share/aimem/auth/client-token").is_file()  # OpenCode still uses it


def test_a_json5_openclaw_config_is_refused_untouched(tmp_path):
    """OpenClaw's config may be JSON5 (comments, trailing commas): writing it back would lose
    them, so aimem refuses with one line and changes nothing."""
    home = tmp_path / "home"
    config = home / ".openclaw/openclaw.json"
    config.parent.mkdir(parents=True)
    body = b'{\n  // my gateway\n  gateway: { port: 18789, },\n}\n'
    config.write_bytes(body)
    before = tree(home)
    code, out = cli("setup-agent", "--client", "openclaw", "--home", str(home), "--no-instructions", "--no-skills",
                    "--api-key", KEY)
    assert code == 1 and f"{config}: not plain JSON" in out and "merge the aimem entries by hand" in out
    assert tree(home) == before
