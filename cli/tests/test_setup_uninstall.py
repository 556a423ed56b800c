"""setup-agent (hooks + MCP + instructions in one step) and uninstall (only what aimem
installed; the data dir only with --purge-data --confirm) against a temp HOME."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aimem_cli.commands.operate import BEGIN
from aimem_common.clients import INSTALLABLE as CLIENTS
from aimem_cli.main import build_app


pytestmark = pytest.mark.usefixtures("no_server_here")  # conftest: an empty cwd, no server data dir or token


def cli(*args: str):
    r = CliRunner().invoke(build_app(), list(args))
    return r.exit_code, r.output


def snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_setup_agent_then_uninstall_restores_the_users_files(tmp_path):
    home, repo = tmp_path / "home", tmp_path / "repo"
    (home / ".claude").mkdir(parents=True)
    repo.mkdir()
    (home / ".claude/settings.json").write_text(json.dumps(
        {"model": "opus", "hooks": {"PostToolUse": [{"matcher": "Edit", "hooks": [
            {"type": "command", "command": "prettier -w"}]}]}}, indent=2) + "\n")
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {"other": {"type": "http", "url": "http://o"}}},
                                                  indent=2) + "\n")
    (home / ".codex").mkdir()
    (home / ".codex/config.toml").write_text('model = "o3"\n\n[mcp_servers.other]\nurl = "http://o"\n')
    (repo / "CLAUDE.md").write_text("# Rules\n")
    before = snapshot(home) | {f"repo/{k}": v for k, v in snapshot(repo).items()}

    code, out = cli("setup-agent", "--client", "claude-code", "--home", str(home), "--project-dir", str(repo),
                    "--dry-run")
    assert code == 0 and "aimem" in out
    assert snapshot(home) == {k: v for k, v in before.items() if not k.startswith("repo/")}  # dry run: nothing
    for client in ("claude-code", "codex"):
        code, out = cli("setup-agent", "--client", client, "--home", str(home), "--project-dir", str(repo))
        assert code == 0, out
    settings = json.loads((home / ".claude/settings.json").read_text())
    assert "SessionStart" in settings["hooks"] and settings["model"] == "opus"
    assert set(json.loads((home / ".claude.json").read_text())["mcpServers"]) == {"other", "aimem"}
    assert "[mcp_servers.aimem]" in (home / ".codex/config.toml").read_text()
    assert BEGIN in (repo / "CLAUDE.md").read_text() and BEGIN in (repo / "AGENTS.md").read_text()
    code, out = cli("setup-agent", "--client", "claude-code", "--home", str(home), "--project-dir", str(repo))
    assert code == 0 and "already up to date" in out  # idempotent

    code, out = cli("uninstall", "--home", str(home), "--project-dir", str(repo))
    assert code == 0, out
    after = snapshot(home) | {f"repo/{k}": v for k, v in snapshot(repo).items()}
    # aimem's entries are gone; the user's own hooks, servers and text are as they were
    assert json.loads(after[".claude/settings.json"]) == json.loads(before[".claude/settings.json"])
    assert json.loads(after[".claude.json"]) == json.loads(before[".claude.json"])
    assert "aimem" not in after[".codex/config.toml"] and "[mcp_servers.other]" in after[".codex/config.toml"]
    assert after["repo/CLAUDE.md"] == "# Rules\n" and "repo/AGENTS.md" not in after
    assert cli("uninstall", "--home", str(home), "--project-dir", str(repo))[1].strip().endswith("already up to date")
    assert cli("setup-agent", "--client", "nope")[0] == 1
    assert set(CLIENTS) >= {"claude-code", "codex"}


def test_uninstall_purge_data_needs_confirm_and_a_stopped_stack(tmp_path):
    data, other = tmp_path / "data", tmp_path / "other"
    (data / "db").mkdir(parents=True)
    (data / "db/memory.sqlite").write_text("x" * 100)
    (data / "config.toml").write_text("")
    other.mkdir()
    (other / "keep").write_text("k")
    home = tmp_path / "home"
    home.mkdir()
    code, out = cli("uninstall", "--home", str(home), "--purge-data", "--data-dir", str(data))
    assert code == 1 and "Would delete the data dir" in out and "2 files" in out
    assert data.exists()
    code, out = cli("uninstall", "--home", str(home), "--purge-data", "--confirm", "--data-dir", str(data))
    assert code == 0 and "Deleted the data dir" in out and "2 files" in out, out
    assert not data.exists() and (other / "keep").exists()


def test_uninstall_purge_data_that_refuses_changes_nothing(tmp_path):
    """Refused (stack running, or no --confirm): the hooks stay too, nothing is half-done."""
    import fcntl

    data, home = tmp_path / "data", tmp_path / "home"
    (data / "db").mkdir(parents=True)
    assert cli("install-hooks", "--client", "claude-code", "--home", str(home), "--api-key", "aim_k0123456789")[0] == 0
    installed = snapshot(home)
    with open(data / "db/writer.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what a running writer holds
        for extra in ((), ("--confirm",)):
            code, out = cli("uninstall", "--home", str(home), "--purge-data", "--data-dir", str(data), *extra)
            assert code == 1 and "stack is running" in out, out
            assert snapshot(home) == installed and data.exists()
    code, out = cli("uninstall", "--home", str(home), "--purge-data", "--data-dir", str(data))
    assert code == 1 and "Would delete the data dir" in out and snapshot(home) == installed


def test_backup_agents_redacts_and_restore_is_a_dry_run_unless_apply(tmp_path, monkeypatch):
    import tarfile

    home, repo = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    repo.mkdir()
    monkeypatch.setenv("AIMEM_DATA_DIR", str(home / ".local/share/aimem"))
    (home / ".codex").mkdir()
    (home / ".codex/config.toml").write_text('model = "o3"\n')  # the user's: it outlives uninstall
    key = "aim_secretkey_0123456789"
    for client in ("claude-code", "codex"):
        code, out = cli("setup-agent", "--client", client, "--home", str(home), "--project-dir", str(repo),
                        "--api-key", key)
        assert code == 0, out
    installed = snapshot(home)
    assert any(key in v for v in installed.values())

    code, out = cli("backup-agents", "--to", str(tmp_path / "a.tgz"), "--home", str(home))
    assert code == 0 and "secrets redacted" in out, out
    with tarfile.open(tmp_path / "a.tgz") as tar:
        blobs = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}
    assert "files/.claude.json" in blobs and "files/.codex/config.toml" in blobs
    # setup-agent put the skills under the home: they travel too (the user's own skills do not)
    assert blobs["files/.claude/skills/aimem-recall/SKILL.md"] == installed[".claude/skills/aimem-recall/SKILL.md"]
    assert "files/.agents/skills/aimem-handoff/SKILL.md" in blobs
    assert not any(key in v for v in blobs.values()) and "<redacted>" in blobs["files/.claude.json"]
    assert not any(n.endswith("client-token") for n in blobs)
    code, out = cli("backup-agents", "--to", str(tmp_path / "s.tgz"), "--home", str(home), "--include-secrets")
    with tarfile.open(tmp_path / "s.tgz") as tar:
        assert any(key in tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile())
    assert (tmp_path / "s.tgz").stat().st_mode & 0o777 == 0o600

    assert cli("uninstall", "--home", str(home), "--project-dir", str(repo))[0] == 0
    (home / ".claude.json").unlink(missing_ok=True)  # aimem created it: uninstall removed it
    after_uninstall = snapshot(home)
    code, out = cli("restore-agents", "--from", str(tmp_path / "s.tgz"), "--home", str(home))
    assert code == 0 and "dry run" in out and "would write (new)" in out, out
    assert snapshot(home) == after_uninstall  # the dry run wrote nothing
    code, out = cli("restore-agents", "--from", str(tmp_path / "s.tgz"), "--home", str(home), "--apply")
    assert code == 0, out
    assert (home / ".claude.json").read_text() == installed[".claude.json"]  # new: written
    assert "aimem" not in (home / ".codex/config.toml").read_text()  # differs: kept without --force
    code, out = cli("restore-agents", "--from", str(tmp_path / "s.tgz"), "--home", str(home), "--apply", "--force")
    assert snapshot(home)[".codex/config.toml"] == installed[".codex/config.toml"]
    assert list((home / ".codex").glob("config.toml.aimem-*"))  # the overwritten one kept beside it
    assert cli("restore-agents", "--from", str(tmp_path / "nope.tgz"))[0] == 1


def test_install_skills_writes_managed_skills_and_never_touches_the_users_own(tmp_path):
    from aimem_common.skills import MANAGED_MARK, SKILLS

    home, repo = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    mine = repo / ".agents/skills/aimem-handoff/SKILL.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("---\nname: aimem-handoff\ndescription: my own\n---\n")
    # a user's skill of one of our names: refused (exit 1, one line), nothing written
    code, out = cli("install-skills", "--dir", str(repo), "--home", str(home))
    assert code == 1 and "not written by aimem" in out and "--force" in out
    assert not (repo / ".claude").exists() and not (repo / ".agents/skills/aimem-recall").exists()
    mine.unlink()
    code, out = cli("install-skills", "--dir", str(repo), "--home", str(home))
    assert code == 0, out
    for base in (".claude/skills", ".agents/skills"):
        for rel, text in SKILLS.items():
            assert (repo / base / rel).read_text() == text and MANAGED_MARK in text
    assert cli("install-skills", "--dir", str(repo), "--home", str(home))[1].strip() == "already up to date"
    # an edited managed skill is refreshed; a neighbour skill of the user's stays
    (repo / ".claude/skills/aimem-recall/SKILL.md").write_text("old\n" + MANAGED_MARK)
    other = repo / ".claude/skills/deploy/SKILL.md"
    other.parent.mkdir()
    other.write_text("mine")
    code, out = cli("install-skills", "--client", "claude-code", "--dir", str(repo), "--home", str(home))
    assert code == 0 and out.count("updated") == 1, out
    mine.write_text("taken over by the user")  # no longer ours: --remove leaves it
    code, out = cli("install-skills", "--remove", "--dir", str(repo), "--home", str(home))
    assert code == 0, out
    assert {p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file()} == {
        ".claude/skills/deploy/SKILL.md", ".agents/skills/aimem-handoff/SKILL.md"}
    assert not (repo / ".agents/skills/aimem-recall").exists()  # emptied folders go too
    # user scope: the home
    assert cli("install-skills", "--scope", "user", "--client", "codex", "--home", str(home))[0] == 0
    assert (home / ".agents/skills/aimem-recall/SKILL.md").is_file()
    assert cli("install-skills", "--client", "emacs")[0] == 1
    assert cli("install-skills", "--scope", "global")[0] == 1


def test_setup_agent_installs_skills_and_uninstall_removes_them(tmp_path):
    home, repo = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    repo.mkdir()
    code, out = cli("setup-agent", "--client", "claude-code", "--home", str(home), "--project-dir", str(repo))
    assert code == 0, out
    assert (home / ".claude/skills/aimem-recall/SKILL.md").is_file()
    code, out = cli("setup-agent", "--client", "codex", "--scope", "project", "--home", str(home),
                    "--project-dir", str(repo), "--no-instructions")
    assert code == 0, out
    assert (repo / ".agents/skills/aimem-remember/SKILL.md").is_file() and not (repo / "AGENTS.md").exists()
    assert cli("uninstall", "--home", str(home), "--project-dir", str(repo))[0] == 0
    assert not list((home / ".claude/skills").rglob("SKILL.md"))
    assert cli("uninstall", "--scope", "project", "--home", str(home), "--project-dir", str(repo))[0] == 0
    assert not list(repo.rglob("SKILL.md"))


def test_install_instructions_replaces_the_block_an_agent_wrote_from_the_mcp_snippet(tmp_path):
    """memory_install_self_routing hands agents the same markers: install-instructions then
    replaces that block in place (never a second one), and so it does a block under the
    markers the tool used before; --remove takes every aimem block out."""
    from aimem_cli.commands.operate import BEGIN, END
    from aimem_common.skills import LEGACY_INSTRUCTION_MARKERS
    from aimem_mcp.tools.memory_install_self_routing import SNIPPET

    (old_begin, old_end), = LEGACY_INSTRUCTION_MARKERS
    repo = tmp_path / "repo"
    repo.mkdir()
    agent_block = SNIPPET.format(begin=BEGIN, end=END, workspace="default", project="app")
    for begin, end in ((BEGIN, END), (old_begin, old_end)):
        block = agent_block.replace(BEGIN, begin).replace(END, end)
        (repo / "CLAUDE.md").write_text("# Rules\n\n" + block + "\n## Build\nmake\n")
        code, out = cli("install-instructions", "--dir", str(repo))
        assert code == 0, out
        text = (repo / "CLAUDE.md").read_text()
        assert text.count(BEGIN) == 1 and text.count(END) == 1 and old_begin not in text and "pass `workspace" not in text
        assert text.startswith("# Rules\n\n" + BEGIN) and text.endswith("\n## Build\nmake\n")
    (repo / "CLAUDE.md").write_text("# Rules\n\n" + agent_block.replace(BEGIN, old_begin).replace(END, old_end))
    assert cli("install-instructions", "--dir", str(repo), "--remove")[0] == 0
    assert (repo / "CLAUDE.md").read_text() == "# Rules\n"


@pytest.mark.parametrize("client,path,mcp_key", [("crush", ".config/crush/crush.json", "mcp"),
                                                 ("gemini-cli", ".gemini/settings.json", "mcpServers")])
def test_setup_agent_keeps_hooks_and_mcp_that_share_one_file(tmp_path, client, path, mcp_key):
    """Crush and Gemini CLI keep hooks and MCP servers in one settings file: setup-agent writes
    both (the MCP plan starts from the hooked file), and uninstall removes both."""
    home, repo = tmp_path / "home", tmp_path / "repo"
    repo.mkdir()
    (home / path).parent.mkdir(parents=True)
    (home / path).write_text(json.dumps({"options": {"debug": False}}, indent=2) + "\n")
    code, out = cli("setup-agent", "--client", client, "--home", str(home), "--project-dir", str(repo),
                    "--no-instructions")
    assert code == 0, out
    doc = json.loads((home / path).read_text())
    assert doc["hooks"] and "aimem" in doc[mcp_key] and doc["options"] == {"debug": False}
    assert cli("uninstall", "--client", client, "--home", str(home), "--project-dir", str(repo))[0] == 0
    after = json.loads((home / path).read_text())  # (an emptied MCP table stays, as for every client)
    assert "hooks" not in after and not after.get(mcp_key) and after["options"] == {"debug": False}


def test_uninstall_leaves_no_file_or_folder_aimem_created(tmp_path):
    """What install created from nothing (``~/.claude.json``, a project's ``.mcp.json``,
    ``crush.json``, the skill and extension folders) is gone after uninstall, not left empty."""
    home, repo = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    repo.mkdir()
    (home / ".claude").mkdir()
    (home / ".claude/keep.txt").write_text("the user's")  # a folder that was there stays
    for client in ("claude-code", "crush", "pi", "codex", "opencode"):
        code, out = cli("setup-agent", "--client", client, "--home", str(home), "--project-dir", str(repo),
                        "--api-key", "aim_k0123456789")
        assert code == 0, out
    code, out = cli("install-mcp", "--client", "claude-code", "--scope", "project", "--project-dir", str(repo),
                    "--home", str(home))
    assert code == 0 and (repo / ".mcp.json").is_file(), out
    assert (home / ".claude.json").is_file() and (home / ".claude/skills").is_dir() and (home / ".agents").is_dir()
    code, out = cli("uninstall", "--home", str(home), "--project-dir", str(repo))
    assert code == 0 and f"removed {home / '.claude.json'}" in out, out
    code, out = cli("uninstall", "--scope", "project", "--home", str(home), "--project-dir", str(repo))
    assert code == 0 and not (repo / ".mcp.json").exists(), out
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")
                  if not p.is_relative_to(home / ".local/share/aimem"))
    print(left)
    # ~/.local/share held only the hook client's token and the installers' ledger: aimem made it, it went
    assert left == ["cwd", "home", "home/.claude", "home/.claude/keep.txt", "repo"], left


def test_install_skills_remove_says_removed_and_takes_its_folders(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    assert cli("install-skills", "--dir", str(repo))[0] == 0
    assert (repo / ".claude/skills").is_dir() and (repo / ".agents/skills").is_dir()
    code, out = cli("install-skills", "--dir", str(repo), "--remove")
    assert code == 0 and "removed " in out and "updated" not in out, out
    assert list(repo.iterdir()) == []
