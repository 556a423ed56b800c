"""The agents beyond the first three, as real binaries: Pi, Copilot CLI and OpenCode.

Each runs from npm (pinned in ``aimem_testing.agents.MORE_PINS`` and ``OPENCODE_PINS``) in a
throwaway HOME, against
the fake Anthropic Messages endpoint (``testing.fake_vendors``): Pi through a provider in
``~/.pi/agent/models.json``, Copilot CLI in its BYOK mode (``COPILOT_PROVIDER_BASE_URL``,
``COPILOT_PROVIDER_TYPE=anthropic``, ``COPILOT_OFFLINE=1``: no GitHub login, no network),
OpenCode through its ``anthropic`` provider's ``baseURL`` (``OPENCODE_CONFIG_CONTENT``).
``aimem install-hooks --client pi`` (``opencode``) writes the generated extension (plugin)
(``aimem_cli.installers.extension``), which pipes every event into ``aimem hook``; Copilot's
are command hooks in ``~/.copilot/hooks/aimem.json``. Everything else is real: the binaries'
own hook runners, ``aimem hook``, ingress, NATS, the writer, SQLite, git, and Claude Code or
Pi as the next client.

The others of issue 32 cannot run here; the README's client table says why and their
bridges are checked against their documents (``services/ingress/tests/fixtures/hooks``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aimem_common.natsserver import free_port
from aimem_testing.agents import (AgentsUnavailable, agent_repository, ensure_opencode, offline_env,
                                  opencode_npm_env, run_agent)
from aimem_testing.fake_vendors import FakeVendor, Step
from aimem_testing.probe import db_rows, wait_for
from aimem_testing.stack import LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

AIMEM = str(Path(sys.executable).with_name("aimem"))
FINAL = "All done: api/retry.md records the retry policy."


def _env(home: Path, bins: tuple[Path, Path], **extra: str) -> dict[str, str]:
    return offline_env(home, [bins[1], bins[0]], free_port(), **extra)


def _home(root: Path, name: str, stack: LocalStack) -> Path:
    home = root / f"home-{name}"
    data = home / ".local" / "share" / "aimem"
    data.mkdir(parents=True)
    (data / "config.toml").write_text(f'ingress_url = "{stack.url("ingress")}"\n')
    return home


def _aimem(home: Path, stack: LocalStack, *args: str) -> str:
    where = ["--data-dir", str(stack.data_dir)] if args[0] == "install-hooks" else []
    proc = subprocess.run([AIMEM, *args, *where, "--home", str(home)], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "HOME": str(home)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _ended(stack: LocalStack, agent: str, project: str) -> dict:
    """``agent``'s session in ``project`` once its page is written, after checking that the
    six kinds of a whole session were stored."""
    rows = lambda sql, args=(): db_rows(stack.data_dir / "db" / "memory.sqlite", sql, args)  # noqa: E731
    s = wait_for(lambda: next(iter(rows(
        "SELECT s.*, pg.body AS page FROM sessions s JOIN projects p ON p.id = s.project_id"
        " JOIN pages pg ON pg.id = s.summary_page_id WHERE s.agent = ? AND p.name = ?", (agent, project))), None),
        timeout_s=90, what=f"the {agent} session page in {project}")
    seen = [r["kind"] for r in rows("SELECT kind FROM observations WHERE session_id = ? ORDER BY id",
                                    (s["session_id"],))]
    for kind in ("session-start", "user-prompt", "pre-tool-use", "post-tool-use", "stop", "session-end"):
        assert kind in seen, (kind, seen)
    return s


def _journey_plan(repo: Path) -> list[Step]:
    """The first session's model turns: a command that fails, a file written in ``api/``, a final message."""
    return [Step("shell", "ls missing_fixture_dir"), Step("write", str(repo / "api" / "retry.md"), "retries: 3\n"),
            Step("text", FINAL)]


def _check_page(page: str) -> None:
    """The session page of the journey's first session: the task, the failed command, the file
    written (relative to the repository root) and the final message."""
    assert "## Task\n\nDocument the retry policy for the API" in page
    assert "`ls missing_fixture_dir`" in page and "No such file or directory" in page
    assert "- api/retry.md" in page.split("## Files changed", 1)[1]
    assert f"## Final message\n\n{FINAL}" in page


def _claude_code_takes_the_handoff(root: Path, bins: tuple[Path, Path], stack: LocalStack, repo: Path,
                                   session_id: str) -> None:
    """Claude Code at ``repo``'s root: ``session_id``'s handoff reaches its model, and is accepted once."""
    home = _home(root, "claude", stack)
    _aimem(home, stack, "install-hooks", "--client", "claude-code")
    env = _env(home, bins, ANTHROPIC_API_KEY="sk-ant-test-not-a-real-key", DISABLE_AUTOUPDATER="1",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1")
    with FakeVendor([Step("text", "Picking up the retry policy.")]) as vendor:
        claude = [str(bins[0] / "claude"), "-p", "Continue where the last session stopped", "--output-format", "text"]
        run_agent(claude, repo, {**env, "ANTHROPIC_BASE_URL": vendor.url})
        sent = json.dumps([b for p, b in vendor.requests if p.startswith("/v1/messages")])
    assert session_id in sent and "Document the retry policy for the API" in sent
    [h] = db_rows(stack.data_dir / "db" / "memory.sqlite",
                  "SELECT status, accepted_by FROM handoffs WHERE from_session_id = ?", (session_id,))
    assert (h["status"], h["accepted_by"]) == ("accepted", "claude-code")


def _pi_models(home: Path, vendor: FakeVendor) -> None:
    """A custom provider at the fake (Pi's docs/models.md: ``api: anthropic-messages``)."""
    path = home / ".pi" / "agent" / "models.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"providers": {"fake": {"baseUrl": vendor.url, "api": "anthropic-messages",
                                                       "apiKey": "test-not-a-real-key",
                                                       "models": [{"id": "claude-fake"}]}}}))


def _pi(home: Path, bins: tuple[Path, Path], cwd: Path, prompt: str) -> subprocess.CompletedProcess:
    return run_agent([str(bins[1] / "pi"), "--provider", "fake", "--model", "claude-fake", "-p", prompt], cwd,
                _env(home, bins, PI_OFFLINE="1"))


PI_STATE = ("agent/sessions/", "agent/auth.json")  # what Pi itself writes while it runs


def _snapshot(root: Path) -> dict[str, bytes]:
    """Pi's configuration files (its own session logs and auth store left out)."""
    files = {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}
    return {rel: p.read_bytes() for rel, p in files.items() if not rel.startswith(PI_STATE)}


def test_pi_session_in_a_subdirectory_hands_off_to_claude_code(bins, live, tmp_path):
    """Pi in ``api/`` → a session page in the repository's project (the prompt, the failed
    command, the written file relative to the root, the final message) → Claude Code at the
    root gets the handoff once; uninstalling Pi's hooks leaves its folder byte for byte."""
    repo = agent_repository(tmp_path, "pi-repo")
    home = _home(tmp_path, "pi", live)
    (home / ".pi" / "agent").mkdir(parents=True)
    (home / ".pi" / "agent" / "settings.json").write_text('{"theme": "dark"}\n')  # the user's own
    before = _snapshot(home / ".pi")

    _aimem(home, live, "install-hooks", "--client", "pi")
    ext = (home / ".pi" / "agent" / "extensions" / "aimem.ts").read_text()
    assert "aimem-managed-extension" in ext and '"--agent", AGENT' in ext
    with FakeVendor(_journey_plan(repo)) as vendor:
        _pi_models(home, vendor)
        before = {**before, **{k: v for k, v in _snapshot(home / ".pi").items() if k.endswith("models.json")}}
        out = _pi(home, bins, repo / "api", "Document the retry policy for the API")
    assert FINAL in out.stdout and (repo / "api" / "retry.md").read_text() == "retries: 3\n"
    assert vendor.requests and all(p.startswith("/v1/messages") for p, _ in vendor.requests)

    s = _ended(live, "pi", "pi-repo")
    _check_page(s["page"])

    # Claude Code at the repository root: the handoff reaches its model once.
    _claude_code_takes_the_handoff(tmp_path / "claude", bins, live, repo, s["session_id"])

    # Uninstall: Pi's folder is as it was (the user's settings and models untouched).
    _aimem(home, live, "uninstall-hooks", "--client", "pi")
    assert _snapshot(home / ".pi") == before


def test_pi_capture_rules_stop_an_excluded_file_before_the_spool(bins, live, tmp_path):
    """A ``.aimem.toml`` that excludes ``secrets/**``: Pi's write of ``secrets/key.txt`` never
    reaches the spool or the store, the rest of the session does."""
    repo = tmp_path / "pi-rules"
    (repo / "secrets").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".aimem.toml").write_text('exclude = ["secrets/**"]\n')
    home = _home(tmp_path, "pi-rules", live)
    _aimem(home, live, "install-hooks", "--client", "pi")
    plan = [Step("write", str(repo / "secrets" / "key.txt"), "hunter2\n"), Step("text", "Stored.")]
    with FakeVendor(plan) as vendor:
        _pi_models(home, vendor)
        _pi(home, bins, repo, "Store the key")
    rows = lambda sql, args=(): db_rows(live.data_dir / "db" / "memory.sqlite", sql, args)  # noqa: E731
    s = wait_for(lambda: next(iter(rows(
        "SELECT s.* FROM sessions s JOIN projects p ON p.id = s.project_id WHERE s.agent = 'pi'"
        " AND p.name = 'pi-rules' AND s.summary_page_id IS NOT NULL")), None), timeout_s=90, what="the session")
    bodies = " ".join(r["title"] + r["body"] for r in rows(
        "SELECT title, body FROM observations WHERE session_id = ?", (s["session_id"],)))
    assert "Store the key" in bodies and "key.txt" not in bodies
    spool = home / ".local" / "share" / "aimem" / "spool"
    assert "key.txt" not in "".join(p.read_text(errors="replace") for p in spool.rglob("*") if p.is_file())


def _copilot(home: Path, bins: tuple[Path, Path], vendor: FakeVendor, cwd: Path, prompt: str) -> subprocess.CompletedProcess:
    env = _env(home, bins, COPILOT_PROVIDER_BASE_URL=vendor.url, COPILOT_PROVIDER_TYPE="anthropic",
               COPILOT_PROVIDER_API_KEY="test-not-a-real-key", COPILOT_MODEL="claude-sonnet-4",
               COPILOT_OFFLINE="1", COPILOT_AUTO_UPDATE="false")
    return run_agent([str(bins[1] / "copilot"), "-p", prompt, "--allow-all"], cwd, env)


def test_copilot_cli_session_in_a_subdirectory_hands_off_to_pi(bins, live, tmp_path):
    """Copilot CLI (BYOK, offline) in ``api/`` → a session page in the repository's project →
    Pi at the root gets the handoff in its system prompt once; uninstalling Copilot's hooks
    leaves the user's Copilot files byte for byte."""
    repo = agent_repository(tmp_path, "copilot-repo")
    home = _home(tmp_path, "copilot", live)
    mine = home / ".copilot" / "hooks" / "mine.json"
    mine.parent.mkdir(parents=True)
    mine.write_text('{"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": "true"}]}}\n')
    (home / ".copilot" / "config.json").write_text('{"banner": "never"}\n')
    before = mine.read_bytes()

    _aimem(home, live, "install-hooks", "--client", "copilot-cli")
    assert (home / ".copilot" / "hooks" / "aimem.json").is_file()
    with FakeVendor(_journey_plan(repo)) as vendor:
        out = _copilot(home, bins, vendor, repo / "api", "Document the retry policy for the API")
    assert (repo / "api" / "retry.md").read_text() == "retries: 3\n", out.stdout
    assert vendor.requests and all(p.startswith("/v1/messages") for p, _ in vendor.requests)

    rows = lambda sql, args=(): db_rows(live.data_dir / "db" / "memory.sqlite", sql, args)  # noqa: E731
    s = _ended(live, "copilot-cli", "copilot-repo")
    page = s["page"]
    assert "## Task\n\nDocument the retry policy for the API" in page
    assert "`ls missing_fixture_dir`" in page
    assert "- api/retry.md" in page.split("## Files changed", 1)[1]

    # Pi at the repository root: the handoff is in the system prompt of its first request.
    pi_home = _home(tmp_path, "pi-next", live)
    _aimem(pi_home, live, "install-hooks", "--client", "pi")
    with FakeVendor([Step("text", "Picking up the retry policy.")]) as vendor:
        _pi_models(pi_home, vendor)
        _pi(pi_home, bins, repo, "Continue where the last session stopped")
        first = json.dumps(vendor.requests[0][1]["system"])
    assert s["session_id"] in first and "Document the retry policy for the API" in first
    [h] = rows("SELECT status, accepted_by FROM handoffs WHERE from_session_id = ?", (s["session_id"],))
    assert (h["status"], h["accepted_by"]) == ("accepted", "pi")

    # Uninstall: the hooks folder is as before the install; the config Copilot itself keeps
    # (it stamps `firstLaunchAt` into config.json) is not touched.
    config = (home / ".copilot" / "config.json").read_bytes()
    _aimem(home, live, "uninstall-hooks", "--client", "copilot-cli")
    assert [p.name for p in mine.parent.iterdir()] == ["mine.json"] and mine.read_bytes() == before
    assert (home / ".copilot" / "config.json").read_bytes() == config


@pytest.fixture(scope="module")
def opencode_bin() -> Path:
    """OpenCode's ``.bin`` (with the npm cache its own plugin-package install reads), installed on first use."""
    try:
        return ensure_opencode()
    except AgentsUnavailable as exc:
        pytest.fail(f"OpenCode is not installable here: {exc}")


# What OpenCode itself writes into its config folder (the folder's own .gitignore lists them):
# the install of its plugin package. Not the user's configuration, not aimem's.
OPENCODE_STATE = (".gitignore", "package.json", "package-lock.json", "bun.lock", "node_modules/")


def _opencode_snapshot(home: Path) -> dict[str, bytes]:
    root = home / ".config" / "opencode"
    files = {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file() or p.is_symlink()}
    return {rel: p.read_bytes() for rel, p in files.items() if not rel.startswith(OPENCODE_STATE)}


def _opencode(home: Path, bins: tuple[Path, Path], opencode_bin: Path, vendor: FakeVendor, cwd: Path,
              prompt: str) -> subprocess.CompletedProcess:
    """``opencode run`` with its ``anthropic`` provider at the fake (Messages API): models list,
    autoupdate and LSP downloads off (they fetch from the network), its npm offline on the cache
    ``ensure_opencode`` filled."""
    provider = {"provider": {"anthropic": {"options": {"baseURL": f"{vendor.url}/v1", "apiKey": "test-not-a-real-key"}}}}
    env = offline_env(home, [opencode_bin, bins[1], bins[0]], free_port(), OPENCODE_CONFIG_CONTENT=json.dumps(provider),
                      OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_AUTOUPDATE="1",
                      OPENCODE_DISABLE_LSP_DOWNLOAD="1", **opencode_npm_env())
    # word by word: `opencode run` wraps an argument holding a space in double quotes
    return run_agent([str(opencode_bin / "opencode"), "run", "--model", "anthropic/claude-sonnet-4-5", *prompt.split()],
                cwd, env)


def test_opencode_session_in_a_subdirectory_hands_off_to_claude_code(bins, opencode_bin, live, tmp_path):
    """OpenCode in ``api/`` → its generated plugin pipes every hook through ``aimem hook`` → a
    session page in the repository's project (the prompt, the failed command, the written file
    relative to the root, the final message; the end sent by the plugin's ``dispose`` as the
    process exits) → Claude Code at the root gets the handoff once → OpenCode again gets Claude
    Code's in its system prompt; uninstalling leaves the user's OpenCode config byte for byte."""
    repo = agent_repository(tmp_path, "oc-repo")
    home = _home(tmp_path, "opencode", live)
    config = home / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True)
    config.write_text('{\n  "$schema": "https://opencode.ai/config.json",\n  "autoupdate": false,\n  "share": "disabled"\n}\n')
    before = _opencode_snapshot(home)

    _aimem(home, live, "install-hooks", "--client", "opencode")
    plugin = (home / ".config" / "opencode" / "plugins" / "aimem.ts").read_text()
    assert "aimem-managed-extension" in plugin and 'const AGENT = "opencode"' in plugin
    with FakeVendor(_journey_plan(repo)) as vendor:
        out = _opencode(home, bins, opencode_bin, vendor, repo / "api", "Document the retry policy for the API")
    assert FINAL in out.stdout and (repo / "api" / "retry.md").read_text() == "retries: 3\n", out.stdout + out.stderr
    assert vendor.requests and all(p.startswith("/v1/messages") for p, _ in vendor.requests)

    rows = lambda sql, args=(): db_rows(live.data_dir / "db" / "memory.sqlite", sql, args)  # noqa: E731
    s = _ended(live, "opencode", "oc-repo")
    assert s["session_id"].startswith("ses_")
    _check_page(s["page"])

    # Claude Code at the repository root: the handoff reaches its model once.
    _claude_code_takes_the_handoff(tmp_path / "claude-after-opencode", bins, live, repo, s["session_id"])

    # OpenCode again, at the root: Claude Code's handoff is in the system prompt of its model
    # calls (the plugin's session start → `experimental.chat.system.transform`).
    cc = wait_for(lambda: next(iter(rows(
        "SELECT s.session_id FROM sessions s JOIN projects p ON p.id = s.project_id JOIN handoffs h"
        " ON h.from_session_id = s.session_id WHERE s.agent = 'claude-code' AND p.name = 'oc-repo'")), None),
        timeout_s=90, what="Claude Code's handoff")
    with FakeVendor([Step("text", "Picking up where Claude Code stopped.")]) as vendor:
        _opencode(home, bins, opencode_bin, vendor, repo, "Continue where the last session stopped")
        first = next(b for p, b in vendor.requests if p.startswith("/v1/messages") and b.get("tools"))
    assert cc["session_id"] in json.dumps(first["system"])
    [h] = rows("SELECT status, accepted_by FROM handoffs WHERE from_session_id = ?", (cc["session_id"],))
    assert (h["status"], h["accepted_by"]) == ("accepted", "opencode")

    # Uninstall: the user's OpenCode config is as it was (OpenCode's own package install aside).
    _aimem(home, live, "uninstall-hooks", "--client", "opencode")
    assert _opencode_snapshot(home) == before
    assert not (home / ".config" / "opencode" / "plugins").exists()
