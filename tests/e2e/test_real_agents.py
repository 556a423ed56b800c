"""The real agent CLIs from npm, wired by ``aimem install-hooks``, against the real stack.

Claude Code, Codex CLI and Gemini CLI (pinned in ``aimem_testing.agents``, cached
outside the repository) each run in a throwaway HOME with one fake: the model endpoint,
which speaks that vendor's wire protocol on loopback (``testing.fake_vendors``: streamed
Anthropic Messages API, OpenAI Responses API, Gemini API) and asks for one shell command
that fails and one file edit, then a final message. Everything else is real: the binary,
its hook runner and settings loader, ``aimem hook``, ingress, NATS, the writer, SQLite, git,
the MCP gateway. No vendor endpoint is reachable: the CLIs only know the fake's address.

``test_journey_with_real_binaries`` is the whole story: Claude Code in a subdirectory of a
repository → a session page in that repository's project, paths relative to the repository
root → Codex at the repository root gets the handoff injected once → Gemini CLI finds the
page through MCP.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aimem_testing.agents import AgentsUnavailable, ensure_agents, offline_env
from aimem_testing.fake_vendors import FakeVendor, Step
from aimem_testing.probe import db_rows, wait_for
from aimem_common.natsserver import free_port
from aimem_testing.stack import LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

AIMEM = str(Path(sys.executable).with_name("aimem"))
FINAL = "All done: notes.txt records the retry policy."
CLAUDE_SUBDIR = "api"  # the journey's Claude Code cwd under the repository root


@pytest.fixture(scope="module")
def agents_bin() -> Path:
    """``node_modules/.bin`` of the pinned CLIs (installed on first use, then cached)."""
    try:
        return ensure_agents()
    except AgentsUnavailable as exc:  # a failure, not a skip: CI installs npm for this
        pytest.fail(f"the real agent CLIs are not installable here: {exc}")


class Agent:
    """A throwaway HOME wired with ``aimem install-hooks`` and the client's fake-model settings."""

    def __init__(self, root: Path, bin_dir: Path, stack: LocalStack, client: str):
        self.home = root / f"home-{client}"
        self.bin_dir, self.stack, self.client = bin_dir, stack, client
        self.dead_port = free_port()
        data = self.home / ".local" / "share" / "aimem"  # the hook client's default data dir
        data.mkdir(parents=True)
        (data / "config.toml").write_text(f'ingress_url = "{stack.url("ingress")}"\n')

    def env(self, **extra: str) -> dict[str, str]:
        """Only loopback is reachable: anything else goes to a proxy port nothing listens on."""
        return offline_env(self.home, [self.bin_dir], self.dead_port, **extra)

    def aimem(self, *args: str) -> str:
        """Run an installer as its user would: the stack's data dir is where it finds the token."""
        where = ["--data-dir", str(self.stack.data_dir)] if args[0] in ("install-hooks", "install-mcp") else []
        proc = subprocess.run([AIMEM, *args, *where, "--home", str(self.home)], capture_output=True, text=True, timeout=60,
                              env={**{k: v for k, v in os.environ.items() if k != "CODEX_HOME"},
                                   "HOME": str(self.home)})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    def run(self, argv: list[str], cwd: Path, env: dict[str, str], timeout_s: float = 180) -> subprocess.CompletedProcess:
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, f"{argv[0]} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc


def claude(agent: Agent, vendor: FakeVendor, cwd: Path, prompt: str) -> subprocess.CompletedProcess:
    env = agent.env(ANTHROPIC_BASE_URL=vendor.url, ANTHROPIC_API_KEY="sk-ant-test-not-a-real-key",
                    DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1")
    return agent.run([str(agent.bin_dir / "claude"), "-p", prompt, "--allowedTools", "Bash,Write",
                      "--permission-mode", "acceptEdits", "--output-format", "text"], cwd, env)


def codex_config(agent: Agent, vendor: FakeVendor) -> None:
    """A custom model provider at the fake (Responses API); curated-plugin sync off (network)."""
    conf = agent.home / ".codex" / "config.toml"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(f'model = "gpt-5-codex"\nmodel_provider = "fake"\ncheck_for_update_on_startup = false\n\n'
                    f'[model_providers.fake]\nname = "fake"\nbase_url = "{vendor.url}/v1"\nwire_api = "responses"\n'
                    'env_key = "FAKE_OPENAI_KEY"\n\n[analytics]\nenabled = false\n\n[features]\nplugins = false\n')


def codex(agent: Agent, cwd: Path, prompt: str) -> subprocess.CompletedProcess:
    env = agent.env(FAKE_OPENAI_KEY="test-not-a-real-key", RUST_LOG="error")
    return agent.run([str(agent.bin_dir / "codex"), "exec", "--skip-git-repo-check", "--sandbox",
                      "danger-full-access", prompt], cwd, env)


def gemini_settings(agent: Agent) -> None:
    """API-key auth (the only thing GOOGLE_GEMINI_BASE_URL applies to); no folder-trust prompt."""
    path = agent.home / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = json.loads(path.read_text()) if path.exists() else {}
    doc["security"] = {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}}
    doc["privacy"] = {"usageStatisticsEnabled": False}
    doc["general"] = {"disableAutoUpdate": True, "disableUpdateNag": True}
    doc["telemetry"] = {"enabled": False}
    path.write_text(json.dumps(doc, indent=2))


def gemini(agent: Agent, vendor: FakeVendor, cwd: Path, prompt: str) -> subprocess.CompletedProcess:
    env = agent.env(GEMINI_API_KEY="test-not-a-real-key", GOOGLE_GEMINI_BASE_URL=vendor.url,
                    GEMINI_CLI_NO_RELAUNCH="1")
    return agent.run([str(agent.bin_dir / "gemini"), "-p", prompt, "--yolo"], cwd, env)


def repository(root: Path, name: str) -> Path:
    repo = root / name
    (repo / "api").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def rows(stack: LocalStack, sql: str, args: tuple = ()) -> list:
    return db_rows(stack.data_dir / "db" / "memory.sqlite", sql, args)


def ended_session(stack: LocalStack, agent: str, project: str):
    """The agent's session in ``project`` once its page is written."""
    return wait_for(lambda: next(iter(rows(
        stack, "SELECT s.*, pg.body AS page, pg.path AS page_path FROM sessions s JOIN projects p ON p.id = s.project_id"
               " JOIN pages pg ON pg.id = s.summary_page_id WHERE s.agent = ? AND p.name = ?", (agent, project))), None),
        timeout_s=90, what=f"the {agent} session page in {project}")


def kinds(stack: LocalStack, session_id: str) -> list[str]:
    return [r["kind"] for r in rows(stack, "SELECT kind FROM observations WHERE session_id = ? ORDER BY id",
                                    (session_id,))]


def plan(write_path: str) -> list[Step]:
    return [Step("shell", "ls missing_fixture_dir"), Step("write", write_path, "retries: 3, backoff 2s\n"),
            Step("text", FINAL)]


def test_codex_hooks_fire_only_once_trusted_by_the_installer(agents_bin, live, tmp_path):
    repo = repository(tmp_path, "codex-repo")
    agent = Agent(tmp_path, agents_bin, live, "codex")
    with FakeVendor(plan("notes.txt")) as vendor:
        codex_config(agent, vendor)
        dry = agent.aimem("install-hooks", "--client", "codex", "--dry-run")
        assert "trusted_hash" in dry and "+hooks = true  # added by aimem install-hooks" in dry
        agent.aimem("install-hooks", "--client", "codex")
        out = codex(agent, repo, "Write the retry policy to notes.txt")
        assert "hook: SessionStart" in out.stderr and "hook: PostToolUse" in out.stderr
        s = ended_session(live, "codex", "codex-repo")
        seen = kinds(live, s["session_id"])
        for kind in ("session-start", "user-prompt", "pre-tool-use", "post-tool-use", "stop", "session-end"):
            assert kind in seen, (kind, seen)
        page = s["page"]
        assert "## Task\n\nWrite the retry policy to notes.txt" in page
        assert "- notes.txt" in page.split("## Files changed", 1)[1]  # the apply_patch heredoc, parsed
        assert "`ls missing_fixture_dir` — failed" in page and "No such file or directory" in page
        assert f"## Final message\n\n{FINAL}" in page

        # Without the installer's trust block the same hooks.json is skipped by Codex.
        agent.aimem("uninstall-hooks", "--client", "codex")
        assert "aimem" not in (agent.home / ".codex" / "config.toml").read_text()
        agent.aimem("install-hooks", "--client", "codex")
        conf = agent.home / ".codex" / "config.toml"
        text = conf.read_text()
        conf.write_text(text.replace('trusted_hash = "sha256:', 'trusted_hash = "sha256:0'))
        before = len(rows(live, "SELECT id FROM sessions WHERE agent = 'codex'"))
        again = codex(agent, repo, "Write the retry policy to notes.txt")
        assert "hook: SessionStart" not in again.stderr
        time.sleep(2)
        assert len(rows(live, "SELECT id FROM sessions WHERE agent = 'codex'")) == before


def test_gemini_cli_hooks_fire_into_a_session_page(agents_bin, live, tmp_path):
    repo = repository(tmp_path, "gemini-repo")
    agent = Agent(tmp_path, agents_bin, live, "gemini-cli")
    gemini_settings(agent)
    agent.aimem("install-hooks", "--client", "gemini-cli")
    with FakeVendor(plan(str(repo / "notes.txt"))) as vendor:
        out = gemini(agent, vendor, repo, "Write the retry policy to notes.txt")
    assert FINAL in out.stdout and (repo / "notes.txt").exists()
    s = ended_session(live, "gemini-cli", "gemini-repo")
    seen = kinds(live, s["session_id"])
    for kind in ("session-start", "user-prompt", "pre-tool-use", "post-tool-use", "stop", "session-end"):
        assert kind in seen, (kind, seen)
    page = s["page"]
    assert "## Task\n\nWrite the retry policy to notes.txt" in page and "`ls missing_fixture_dir`" in page
    assert "## Files changed\n\n- notes.txt" in page and f"## Final message\n\n{FINAL}" in page


def test_journey_with_real_binaries(agents_bin, live, tmp_path):
    """Claude Code in ``api/`` → page in the repository's project (the command, the edited file
    relative to the root, the final message) → Codex at the root gets the handoff once →
    Gemini CLI finds the page through MCP."""
    repo = repository(tmp_path, "journey-repo")
    project = "journey-repo"

    # 1. Claude Code writes api/retry.md and quits.
    cc = Agent(tmp_path, agents_bin, live, "claude-code")
    cc.aimem("install-hooks", "--client", "claude-code")
    with FakeVendor(plan(str(repo / "api" / "retry.md"))) as vendor:
        out = claude(cc, vendor, repo / CLAUDE_SUBDIR, "Document the retry policy for the API")
    assert FINAL in out.stdout and (repo / "api" / "retry.md").read_text() == "retries: 3, backoff 2s\n"
    assert vendor.requests and all(p.startswith("/v1/messages") for p, _ in vendor.requests)  # only the fake
    s = ended_session(live, "claude-code", project)
    seen = kinds(live, s["session_id"])
    for kind in ("session-start", "user-prompt", "pre-tool-use", "post-tool-use", "stop", "session-end"):
        assert kind in seen, (kind, seen)
    failed = rows(live, "SELECT body FROM observations WHERE session_id = ? AND source_event = 'PostToolUseFailure'",
                  (s["session_id"],))
    assert failed and "No such file or directory" in failed[0]["body"]  # the failure keeps its error text
    page = s["page"]
    assert "## Task\n\nDocument the retry policy for the API" in page
    assert "`ls missing_fixture_dir` — failed (exit 2: ls: cannot access 'missing_fixture_dir'" in page
    assert "## Files changed\n\n- api/retry.md" in page
    assert f"## Final message\n\n{FINAL}" in page

    # 2. Codex starts at the repository root: the handoff reaches the model once.
    cx = Agent(tmp_path, agents_bin, live, "codex")
    with FakeVendor([Step("text", "Picking up the retry policy.")]) as vendor:
        codex_config(cx, vendor)
        cx.aimem("install-hooks", "--client", "codex")
        codex(cx, repo, "Continue where the last session stopped")
        first = json.dumps([b for p, b in vendor.requests if p.endswith("/responses")][0])
        assert s["session_id"] in first and "Document the retry policy for the API" in first
        assert "Changed: api/retry.md" in first and "Next: " in first  # the rule-based handoff
        vendor.requests.clear()
        codex(cx, repo, "Anything else?")
        again = json.dumps([b for p, b in vendor.requests if p.endswith("/responses")])
        assert s["session_id"] not in again  # claimed once
    [h] = rows(live, "SELECT status, accepted_by FROM handoffs WHERE from_session_id = ?", (s["session_id"],))
    assert (h["status"], h["accepted_by"]) == ("accepted", "codex")

    # 3. Gemini CLI asks aimem over MCP and gets the page back.
    gm = Agent(tmp_path, agents_bin, live, "gemini-cli")
    gemini_settings(gm)
    gm.aimem("install-mcp", "--client", "gemini-cli", "--url", live.url("mcp-gateway") + "/mcp")
    ask = Step("mcp", "memory_query", args={"workspace": "default", "project": project,
                                            "query": "retry policy for the API"})
    with FakeVendor([ask, Step("text", "The retry policy is in api/retry.md.")]) as vendor:
        out = gemini(gm, vendor, repo, "What did the last session do about retries?")
    assert "api/retry.md" in out.stdout
    answers = [json.dumps(b) for p, b in vendor.requests if "functionResponse" in json.dumps(b)]
    assert answers and s["page_path"] in answers[-1]  # the MCP tool result the model saw
