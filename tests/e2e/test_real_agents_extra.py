"""The new clients' own history, as their real binaries write it: ``aimem import`` reads it.

Pi and Copilot CLI run from npm (``aimem_testing.agents.MORE_PINS``) in a throwaway HOME,
without aimem's hooks, against the fake Anthropic endpoint (``testing.fake_vendors``), as
``test_real_agents_more.py`` drives them. The session files they leave behind (Pi's
``~/.pi/agent/sessions/--<cwd>--/*.jsonl``, Copilot's
``~/.copilot/session-state/<id>/events.jsonl``) are then imported with ``aimem import
--home`` into a real stack: the session lands in the repository's project (the run was in a
subdirectory) with the prompt, the failed command, the written file and the final message
on its page, and as history (no handoff). A second run adds nothing.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from aimem_common.natsserver import free_port
from aimem_testing.agents import (
    AgentsUnavailable, agent_repository, ensure_omp, ensure_openclaw, offline_env, run_agent)
from aimem_testing.fake_vendors import FakeVendor, Step
from aimem_testing.probe import db_rows, wait_for
from aimem_testing.stack import LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

AIMEM = str(Path(sys.executable).with_name("aimem"))
FINAL = "All done: api/retry.md records the retry policy."
PROMPT = "Document the retry policy for the API"


def _plan(repo: Path) -> list[Step]:
    return [Step("shell", "ls missing_fixture_dir"), Step("write", str(repo / "api" / "retry.md"), "retries: 3\n"),
            Step("text", FINAL)]


def _import(stack: LocalStack, home: Path, client: str) -> dict:
    env = stack.client_env(AIMEM_DATA_DIR=str(home / ".local" / "share" / "aimem"))
    proc = subprocess.run([AIMEM, "import", "--client", client, "--home", str(home), "--json"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def _imported_page(stack: LocalStack, agent: str, project: str) -> dict:
    rows = lambda sql, args=(): db_rows(stack.data_dir / "db" / "memory.sqlite", sql, args)  # noqa: E731
    return wait_for(lambda: next(iter(rows(
        "SELECT s.*, pg.body AS page FROM sessions s JOIN projects p ON p.id = s.project_id"
        " JOIN pages pg ON pg.id = s.summary_page_id WHERE s.agent = ? AND p.name = ?", (agent, project))), None),
        timeout_s=90, what=f"the imported {agent} session page in {project}")


def _check_page(stack: LocalStack, s: dict) -> None:
    page = s["page"]
    assert f"## Task\n\n{PROMPT}" in page
    assert "`ls missing_fixture_dir`" in page
    assert "- api/retry.md" in page.split("## Files changed", 1)[1]
    assert FINAL in page
    handoffs = db_rows(stack.data_dir / "db" / "memory.sqlite",
                       "SELECT 1 FROM handoffs WHERE from_session_id = ?", (s["session_id"],))
    assert handoffs == []  # imported history opens no handoff


def test_a_real_pi_session_file_is_imported_into_the_repositorys_project(bins, live, tmp_path):
    repo = agent_repository(tmp_path, "pi-import")
    home = tmp_path / "home-pi"
    with FakeVendor(_plan(repo)) as vendor:
        models = home / ".pi" / "agent" / "models.json"
        models.parent.mkdir(parents=True)
        models.write_text(json.dumps({"providers": {"fake": {
            "baseUrl": vendor.url, "api": "anthropic-messages", "apiKey": "test-not-a-real-key",
            "models": [{"id": "claude-fake"}]}}}))
        env = offline_env(home, [bins[1], bins[0]], free_port(), PI_OFFLINE="1")
        run_agent([str(bins[1] / "pi"), "--provider", "fake", "--model", "claude-fake", "-p", PROMPT], repo / "api", env)
    [session_file] = list((home / ".pi" / "agent" / "sessions").glob("*/*.jsonl"))
    header = json.loads(session_file.read_text().splitlines()[0])
    assert header["type"] == "session" and header["cwd"] == str(repo / "api")

    first = _import(live, home, "pi")
    assert first["files"] == 1 and first["events"] >= 4 and first["malformed_lines"] == 0, first
    s = _imported_page(live, "pi", "pi-import")
    assert s["session_id"] == header["id"]
    _check_page(live, s)
    again = _import(live, home, "pi")
    assert again["events"] == 0 and again["files_unchanged"] == 1, again


def test_a_real_copilot_cli_session_log_is_imported_into_the_repositorys_project(bins, live, tmp_path):
    repo = agent_repository(tmp_path, "copilot-import")
    home = tmp_path / "home-copilot"
    home.mkdir()
    with FakeVendor(_plan(repo)) as vendor:
        env = offline_env(home, [bins[1], bins[0]], free_port(), COPILOT_PROVIDER_BASE_URL=vendor.url,
                          COPILOT_PROVIDER_TYPE="anthropic", COPILOT_PROVIDER_API_KEY="test-not-a-real-key",
                          COPILOT_MODEL="claude-sonnet-4", COPILOT_OFFLINE="1", COPILOT_AUTO_UPDATE="false")
        run_agent([str(bins[1] / "copilot"), "-p", PROMPT, "--allow-all"], repo / "api", env)
    logs = list((home / ".copilot" / "session-state").glob("*/events.jsonl"))
    assert len(logs) == 1, logs

    first = _import(live, home, "copilot-cli")
    assert first["files"] == 1 and first["events"] >= 4 and first["malformed_lines"] == 0, first
    s = _imported_page(live, "copilot-cli", "copilot-import")
    _check_page(live, s)
    assert _import(live, home, "copilot-cli")["events"] == 0


# --- OMP (Oh My Pi): a real binary here, on Bun from the npm registry -------------------------


@pytest.fixture(scope="module")
def omp_bin() -> Path:
    """OMP's and Bun's ``.bin`` (``aimem_testing.agents.OMP_PINS``), installed on first use."""
    try:
        return ensure_omp()
    except AgentsUnavailable as exc:
        pytest.fail(f"OMP is not installable here: {exc}")


def _omp_snapshot(root: Path) -> dict[str, bytes]:
    """The user's OMP configuration (what OMP writes for itself while it runs left out)."""
    files = {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}
    return {rel: p.read_bytes() for rel, p in files.items() if rel.startswith("agent/settings")
            or rel.startswith("agent/extensions") or rel.startswith("agent/mcp") or rel == "agent/keep.json"}


def _aimem(home: Path, stack: LocalStack, *args: str) -> str:
    where = ["--data-dir", str(stack.data_dir)] if args[0] in ("install-hooks", "install-mcp") else []
    proc = subprocess.run([AIMEM, *args, *where, "--home", str(home)], capture_output=True, text=True,
                          timeout=60, env={**stack.client_env(), "HOME": str(home)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _pi_picks_up(session_id: str, repo: Path, pi_home: Path, bins: tuple[Path, Path], stack: LocalStack) -> None:
    """Pi (hooks installed) at ``repo``'s root: the handoff of ``session_id`` is in the system
    prompt of its first model request."""
    (pi_home / ".local/share/aimem").mkdir(parents=True)
    (pi_home / ".local/share/aimem/config.toml").write_text(f'ingress_url = "{stack.url("ingress")}"\n')
    _aimem(pi_home, stack, "install-hooks", "--client", "pi")
    with FakeVendor([Step("text", "Picking up the retry policy.")]) as vendor:
        models = pi_home / ".pi" / "agent" / "models.json"
        models.write_text(json.dumps({"providers": {"fake": {
            "baseUrl": vendor.url, "api": "anthropic-messages", "apiKey": "test-not-a-real-key",
            "models": [{"id": "claude-fake"}]}}}))
        run_agent([str(bins[1] / "pi"), "--provider", "fake", "--model", "claude-fake", "-p",
              "Continue where the last session stopped"], repo, offline_env(pi_home, [bins[1], bins[0]], free_port(),
                                                                          PI_OFFLINE="1"))
        first = json.dumps(vendor.requests[0][1]["system"])
    assert session_id in first and PROMPT in first


def test_omp_session_in_a_subdirectory_hands_off_to_pi_and_uninstall_is_byte_for_byte(bins, omp_bin, live,
                                                                                       tmp_path):
    """OMP in ``api/`` (the generated extension, ``--agent omp``) → a session page in the
    repository's project → Pi at the root gets the handoff in its first system prompt; its
    own transcript imported afterwards adds nothing (live capture wins); uninstalling leaves
    the user's OMP files byte for byte."""
    repo = agent_repository(tmp_path, "omp-repo")
    home = tmp_path / "home-omp"
    client_dir = home / ".local" / "share" / "aimem"
    client_dir.mkdir(parents=True)
    (client_dir / "config.toml").write_text(f'ingress_url = "{live.url("ingress")}"\n')
    (home / ".omp" / "agent").mkdir(parents=True)
    (home / ".omp" / "agent" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"files": {"command": "fs-mcp"}}}, indent=2) + "\n")  # the user's own
    before = _omp_snapshot(home / ".omp")

    _aimem(home, live, "install-hooks", "--client", "omp")
    _aimem(home, live, "install-mcp", "--client", "omp")
    assert "aimem" in json.loads((home / ".omp/agent/mcp.json").read_text())["mcpServers"]
    with FakeVendor(_plan(repo)) as vendor:
        models = home / ".omp" / "agent" / "models.yml"  # YAML; JSON is YAML
        models.write_text(json.dumps({"providers": {"fake": {
            "baseUrl": vendor.url, "api": "anthropic-messages", "apiKey": "test-not-a-real-key",
            "models": [{"id": "claude-fake"}]}}}))
        env = offline_env(home, [omp_bin, bins[0]], free_port())
        run_agent([str(omp_bin / "omp"), "--provider", "fake", "--model", "claude-fake", "-p", PROMPT], repo / "api", env)
    assert (repo / "api" / "retry.md").read_text() == "retries: 3\n"

    rows = lambda sql, args=(): db_rows(live.data_dir / "db" / "memory.sqlite", sql, args)  # noqa: E731
    s = wait_for(lambda: next(iter(rows(
        "SELECT s.*, pg.body AS page FROM sessions s JOIN projects p ON p.id = s.project_id"
        " JOIN pages pg ON pg.id = s.summary_page_id WHERE s.agent = 'omp' AND p.name = 'omp-repo'")), None),
        timeout_s=90, what="the omp session page in omp-repo")
    seen = {r["kind"] for r in rows("SELECT kind FROM observations WHERE session_id = ?", (s["session_id"],))}
    assert {"session-start", "user-prompt", "pre-tool-use", "post-tool-use", "stop", "session-end"} <= seen, seen
    page = s["page"]
    assert f"## Task\n\n{PROMPT}" in page and "`ls missing_fixture_dir`" in page
    assert "- api/retry.md" in page.split("## Files changed", 1)[1]

    # Pi at the repository root: the handoff is in the system prompt of its first request.
    _pi_picks_up(s["session_id"], repo, tmp_path / "home-pi-next", bins, live)
    [h] = rows("SELECT status, accepted_by FROM handoffs WHERE from_session_id = ?", (s["session_id"],))
    assert (h["status"], h["accepted_by"]) == ("accepted", "pi")

    # OMP's own transcript of that session: read, and nothing doubles (live capture wins).
    imported = _import(live, home, "omp")
    assert imported["files"] == 1 and imported["events"] >= 4 and imported["new"] == 0, imported

    _aimem(home, live, "uninstall", "--client", "omp", "--project-dir", str(repo))
    assert _omp_snapshot(home / ".omp") == before


# --- OpenClaw: a real binary here, on Node 24 from the npm registry ---------------------------


@pytest.fixture(scope="module")
def openclaw_bins() -> tuple[Path, Path]:
    """(OpenClaw's ``.bin``, Node 24's ``.bin``), installed on first use."""
    try:
        return ensure_openclaw()
    except AgentsUnavailable as exc:
        pytest.fail(f"OpenClaw is not installable here: {exc}")


def _openclaw_plugin(openclaw_bins: tuple[Path, Path], home: Path) -> dict:
    """What the real ``openclaw plugins list --json`` says of the plugin ``aimem`` (``{}``: not found)."""
    env = offline_env(home, [openclaw_bins[0], openclaw_bins[1]], free_port())
    out = run_agent([str(openclaw_bins[0] / "openclaw"), "plugins", "list", "--json"], home, env).stdout
    return next((p for p in json.loads(out)["plugins"] if p.get("id") == "aimem"), {})


def test_openclaw_loads_the_plugin_install_hooks_switched_on_and_uninstall_is_byte_for_byte(
        openclaw_bins, live, tmp_path):
    """The real OpenClaw 2026.9.6 with a user's plugin allowlist: aimem's generated plugin is
    discovered but disabled until ``install-hooks`` names it (``plugins.entries.aimem.enabled``,
    ``plugins.allow``); then OpenClaw loads it. Uninstall leaves ``openclaw.json`` byte for byte
    and the plugin gone. (A session through OpenClaw's gateway: the next test.)"""
    home = tmp_path / "home-openclaw"
    config = home / ".openclaw" / "openclaw.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"plugins": {"allow": ["memory-core"]}, "logging": {
        "file": str(tmp_path / "openclaw-file.log")}, "models": {"providers": {"fake": {
        "baseUrl": "http://127.0.0.1:9", "api": "anthropic-messages", "apiKey": "test-not-a-real-key",
        "models": [{"id": "claude-fake", "name": "claude-fake"}]}}}}, indent=2) + "\n")
    before = config.read_bytes()
    _aimem(home, live, "install-hooks", "--client", "openclaw")
    doc = json.loads(config.read_text())
    doc["plugins"] = {"allow": ["memory-core"]}  # the folder, without the switch: what OpenClaw does then
    config.write_text(json.dumps(doc, indent=2) + "\n")
    assert _openclaw_plugin(openclaw_bins, home)["enabled"] is False

    _aimem(home, live, "install-hooks", "--client", "openclaw")
    _aimem(home, live, "install-mcp", "--client", "openclaw")
    loaded = _openclaw_plugin(openclaw_bins, home)
    assert (loaded["enabled"], loaded["status"], loaded["origin"]) == (True, "loaded", "global"), loaded
    assert json.loads(config.read_text())["mcp"]["servers"]["aimem"]["transport"] == "streamable-http"

    _aimem(home, live, "uninstall", "--client", "openclaw", "--project-dir", str(tmp_path))
    assert config.read_bytes() == before
    assert _openclaw_plugin(openclaw_bins, home) == {}


def _openclaw_gateway(openclaw_bins: tuple[Path, Path], home: Path, env: dict[str, str], port: int,
                      log: Path) -> subprocess.Popen:
    """The real OpenClaw gateway on ``127.0.0.1:<port>`` (token auth, token from its config),
    started from ``home`` and waited for until it says ``ready`` (plugins loaded)."""
    out = open(log, "w")
    proc = subprocess.Popen([str(openclaw_bins[0] / "openclaw"), "gateway", "run", "--port", str(port),
                             "--bind", "loopback"], cwd=home, env=env, stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    out.close()
    try:
        wait_for(lambda: proc.poll() is not None or "[gateway] ready" in _plain(log),
                 timeout_s=180, what="the OpenClaw gateway to be ready", poll_s=0.5)
        assert proc.poll() is None, f"the OpenClaw gateway exited {proc.returncode}\n{log.read_text()[-3000:]}"
    except BaseException:
        _stop(proc)
        raise
    return proc


def _plain(log: Path) -> str:
    """A log's text without terminal colours."""
    return re.sub(r"\x1b\[[0-9;]*m", "", log.read_text(errors="replace"))


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM (OpenClaw then ends its active sessions: ``session_end``), SIGKILL after 60 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _openclaw_turn(openclaw_bins: tuple[Path, Path], home: Path, port: int, log: Path, cwd: Path,
                   *args: str) -> dict:
    """One ``openclaw agent`` turn (``args`` added) through a gateway started for it and stopped
    after it (which ends its sessions); the turn's JSON. No typed hook of a plugin was refused."""
    env = offline_env(home, [openclaw_bins[0], openclaw_bins[1]], free_port())
    gateway = _openclaw_gateway(openclaw_bins, home, env, port, log)
    try:
        out = run_agent([str(openclaw_bins[0] / "openclaw"), "agent", "--agent", "main", "--json", "--timeout", "150",
                    *args], cwd, env).stdout
    finally:
        _stop(gateway)
    turn = json.loads(out[out.index("{"):])
    assert turn["status"] == "ok", turn
    assert "blocked" not in _plain(log), _plain(log)[-3000:]  # e.g. "typed hook ... blocked"
    return turn


def test_openclaw_session_through_its_gateway_hands_off_to_pi_and_back_and_uninstall_is_byte_for_byte(
        bins, openclaw_bins, live, tmp_path):
    """OpenClaw fires its session hooks from the gateway only (a session's first turn starts
    it, the gateway stopping ends it), so the real gateway runs here on a free loopback port
    and ``openclaw agent`` drives one turn through it; the agent's workspace is the
    repository's ``api/``. The generated plugin (``install-hooks``) then leaves a session page
    in the repository's project with the prompt, the failed command, the written file and the
    final answer; Pi at the root gets the handoff; a new OpenClaw session gets Pi's handoff
    before its first prompt; uninstall leaves ``openclaw.json`` byte for byte."""
    repo = agent_repository(tmp_path, "openclaw-repo")
    home = tmp_path / "home-openclaw-live"
    client_dir = home / ".local" / "share" / "aimem"
    client_dir.mkdir(parents=True)
    (client_dir / "config.toml").write_text(f'ingress_url = "{live.url("ingress")}"\n')
    config = home / ".openclaw" / "openclaw.json"
    config.parent.mkdir(parents=True)
    port = free_port()
    rows = lambda sql, args=(): db_rows(live.data_dir / "db" / "memory.sqlite", sql, args)  # noqa: E731
    with FakeVendor(_plan(repo)) as vendor:
        config.write_text(json.dumps({
            "gateway": {"mode": "local", "port": port, "auth": {"mode": "token", "token": "test-gateway-token"}},
            "logging": {"file": str(tmp_path / "openclaw-file.log")},
            "agents": {"defaults": {"workspace": str(repo / "api"), "model": {"primary": "fake/claude-fake"},
                                    "skipBootstrap": True}},  # else OpenClaw `git init`s a new workspace
            "models": {"providers": {"fake": {
                "baseUrl": vendor.url, "api": "anthropic-messages", "apiKey": "test-not-a-real-key",
                "models": [{"id": "claude-fake", "name": "claude-fake"}]}}}}, indent=2) + "\n")
        before = config.read_bytes()
        _aimem(home, live, "install-hooks", "--client", "openclaw")
        entry = json.loads(config.read_text())["plugins"]["entries"]["aimem"]
        assert entry == {"enabled": True, "hooks": {"allowConversationAccess": True}}

        turn = _openclaw_turn(openclaw_bins, home, port, tmp_path / "openclaw-gateway.log", repo / "api",
                              "--message", PROMPT)
        session_id = turn["result"]["meta"]["agentMeta"]["sessionId"]  # not the key agent:main:main
        assert (repo / "api" / "retry.md").read_text() == "retries: 3\n"

        s = wait_for(lambda: next(iter(rows(
            "SELECT s.*, pg.body AS page FROM sessions s JOIN projects p ON p.id = s.project_id"
            " JOIN pages pg ON pg.id = s.summary_page_id WHERE s.agent = 'openclaw' AND p.name = 'openclaw-repo'")),
            None), timeout_s=90, what="the openclaw session page in openclaw-repo")
        assert s["session_id"] == session_id
        kinds = [r["kind"] for r in rows("SELECT kind FROM observations WHERE session_id = ? ORDER BY id",
                                         (session_id,))]
        assert kinds.count("session-start") == 1 and kinds[-1] == "session-end", kinds
        assert {"user-prompt", "pre-tool-use", "post-tool-use", "stop"} <= set(kinds), kinds
        page = s["page"]
        assert f"## Task\n\n{PROMPT}" in page
        assert "- `ls missing_fixture_dir` — failed (ls: cannot access 'missing_fixture_dir'" in page  # its text
        assert "- api/retry.md" in page.split("## Files changed", 1)[1]
        assert FINAL in page

        _pi_picks_up(session_id, repo, tmp_path / "home-pi-after-openclaw", bins, live)
        [h] = rows("SELECT status, accepted_by FROM handoffs WHERE from_session_id = ?", (session_id,))
        assert (h["status"], h["accepted_by"]) == ("accepted", "pi")

        # Back to OpenClaw, a new session (another key): Pi's handoff is before its first prompt.
        pi_session = wait_for(lambda: next(iter(rows(
            "SELECT h.from_session_id FROM handoffs h JOIN sessions s ON s.session_id = h.from_session_id"
            " JOIN projects p ON p.id = s.project_id WHERE s.agent = 'pi' AND p.name = 'openclaw-repo'"
            " AND h.status = 'open'")), None), timeout_s=90, what="Pi's open handoff")
        vendor.plan, asked = [Step("text", "Picking up after Pi.")], len(vendor.requests)
        _openclaw_turn(openclaw_bins, home, port, tmp_path / "openclaw-gateway-2.log", repo / "api",
                       "--session-key", "agent:main:next", "--message", "What did the last session do?")
        first = json.dumps(vendor.requests[asked][1]["messages"])
    assert pi_session["from_session_id"] in first and "Continue where the last session stopped" in first
    [h] = rows("SELECT status, accepted_by FROM handoffs WHERE from_session_id = ?", (pi_session["from_session_id"],))
    assert (h["status"], h["accepted_by"]) == ("accepted", "openclaw")

    _aimem(home, live, "uninstall", "--client", "openclaw", "--project-dir", str(repo))
    assert config.read_bytes() == before
    assert not (home / ".openclaw" / "extensions" / "aimem" / "index.ts").exists()
