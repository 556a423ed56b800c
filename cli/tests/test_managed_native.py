"""``aimem run``'s native sessions, auto-wiring and local checkout registry (real files)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from aimem_cli.identity import Identity
from aimem_cli.managed import autowire, native_args, note_checkout, read_checkouts, was_wired

SID = "3b9e0c1e-5f1d-4a51-9a6c-0d3c2f1b7e11"


def test_a_harness_resumes_its_session_of_this_workstream() -> None:
    assert native_args("claude-code", ["-p", "go on"], SID) == (["--resume", SID, "-p", "go on"], None)
    assert native_args("gemini-cli", ["-p", "go on"], SID) == (["--resume", SID, "-p", "go on"], None)
    assert native_args("codex", [], SID) == (["resume", SID], None)
    assert native_args("codex", ["-m", "o3", "fix it"], SID) == (["resume", SID, "-m", "o3", "fix it"], None)
    # `codex exec [OPTIONS] PROMPT`: exec's options stay where exec parses them.
    assert native_args("codex", ["exec", "--sandbox", "danger-full-access", "fix it"], SID) == (
        ["exec", "--sandbox", "danger-full-access", "resume", SID, "fix it"], None)


def test_a_harness_new_to_the_workstream_starts_a_session_with_an_id_aimem_picks() -> None:
    args, created = native_args("claude-code", ["-p", "hi"], None)
    assert args == ["--session-id", created, "-p", "hi"] and uuid.UUID(created).version == 4
    args, created = native_args("gemini-cli", [], None)
    assert args == ["--session-id", created]
    assert native_args("codex", ["exec", "hi"], None) == (["exec", "hi"], None)  # Codex names its own


def test_arguments_that_pick_a_session_are_left_alone() -> None:
    for harness, args in (("claude-code", ["--continue"]), ("claude-code", ["--resume=abc"]),
                          ("claude-code", ["--session-id", "x"]), ("gemini-cli", ["-r", "latest"]),
                          ("codex", ["resume", "--last"]), ("codex", ["login"])):
        assert native_args(harness, args, SID) == (args, None), (harness, args)


def test_autowire_installs_hooks_and_mcp_once_and_never_rewrites(tmp_path: Path) -> None:
    home, repo = tmp_path / "home", tmp_path / "repo"
    repo.mkdir(parents=True)
    written = autowire("claude-code", home, repo, "http://127.0.0.1:8701", "tok-1")
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert home / ".claude" / "settings.json" in written and home / ".claude.json" in written
    assert any("aimem" in h["command"] and "hook" in h["command"]
               for g in settings["hooks"]["SessionStart"] for h in g["hooks"])
    assert "aimem" in json.loads((home / ".claude.json").read_text())["mcpServers"]
    assert autowire("claude-code", home, repo, "http://127.0.0.1:8701", "tok-1") == []  # wired: nothing
    # A user who wired it differently keeps their files.
    (home / ".gemini").mkdir()
    mine = {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "aimem hook --agent gemini-cli"}]}]}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(mine))
    assert autowire("gemini-cli", home, repo, "http://127.0.0.1:8701", None) == []
    assert json.loads((home / ".gemini" / "settings.json").read_text()) == mine


def test_the_checkout_registry_keeps_each_harness_session(tmp_path: Path) -> None:
    ident = Identity.__new__(Identity)
    ident.workspace, ident.project = None, "shop"
    run = {"harness": "claude-code", "started_at": "2026-12-05T03:00:00Z",
           "workstream": {"id": "a" * 32, "name": "shop", "checkout_root": "/src/shop"}}
    note_checkout(tmp_path, run, ident, SID)
    note_checkout(tmp_path, {**run, "harness": "codex"}, ident, "c0de")
    entry = read_checkouts(tmp_path)["workstreams"]["a" * 32]
    assert entry["checkout_root"] == "/src/shop" and entry["harnesses"] == {"claude-code": SID, "codex": "c0de"}
    assert not was_wired(tmp_path, "codex", Path("/home/u"))
    note_checkout(tmp_path, {**run, "harness": "codex"}, ident, None, wired=Path("/home/u"))
    assert was_wired(tmp_path, "codex", Path("/home/u")) and not was_wired(tmp_path, "codex", Path("/home/v"))
    assert read_checkouts(tmp_path)["workstreams"]["a" * 32]["harnesses"]["codex"] == "c0de"  # kept
    (tmp_path / "client-projects.json").write_text("{not json")
    assert read_checkouts(tmp_path) == {"version": 1, "workstreams": {}}


def _git(repo: Path, *args: str) -> str:
    import subprocess

    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@e", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def test_the_git_checkpoint_names_branch_head_and_every_changed_file(tmp_path: Path) -> None:
    from aimem_cli.managed import git_checkpoint

    assert git_checkpoint(str(tmp_path), "codex") is None  # not a repository
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "trunk")
    fresh = git_checkpoint(str(repo), "codex")["text"]
    assert fresh == "Git checkpoint after the codex run: branch trunk, HEAD (no commit yet), changed files: none"
    for name in ("kept.txt", "? old name.txt", "edited.txt"):  # "? …": read as a status line, it would be a file
        (repo / name).write_text(name + "\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "init")
    head = _git(repo, "rev-parse", "--short=12", "HEAD")
    (repo / "edited.txt").write_text("changed\n")
    _git(repo, "mv", "? old name.txt", "new name.txt")
    (repo / "sub").mkdir()
    (repo / "sub" / "untracked file.md").write_text("x\n")
    got = git_checkpoint(str(repo), "claude-code")
    assert got["role"] == "checkpoint" and got["source_key"] is None
    assert got["text"] == (f"Git checkpoint after the claude-code run: branch trunk, HEAD {head}, changed files: "
                           "edited.txt, new name.txt, sub/untracked file.md")
    _git(repo, "checkout", "-q", "--detach")
    assert f"branch (detached), HEAD {head}," in git_checkpoint(str(repo), "codex")["text"]
