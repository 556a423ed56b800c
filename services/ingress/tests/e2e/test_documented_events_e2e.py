"""Every documented client event through the real path: ``aimem hook`` → ingress → writer.

Each fixture in ``tests/fixtures/hooks`` (one per event each vendor documents) is piped
into the hook client exactly as the client would run it (``--agent``, ``--event``,
payload on stdin); the stored observation must have the fixture's kind, title, tool and
kept text. Each client's fixtures form one session; its session end then writes a page
that shows what the events carried (a Copilot initial prompt as the task, Codex patch
files as changed files, tool failures with their error line).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aimem_testing.probe import db_rows, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hooks"
AIMEM = str(Path(sys.executable).with_name("aimem"))


def rows(settings, sql: str, args: tuple = ()):
    return db_rows(settings.db_path, sql, args)


def ordered(files: list[Path]) -> list[Path]:
    """A client's session end goes last, so its page sees every other event."""
    return sorted(files, key=lambda p: (json.loads(p.read_text())["expect"]["kind"] == "session-end", p.name))


def test_every_documented_event_is_stored_with_its_kind_and_fields(services, settings, tmp_path):
    procs = services("writer", "ingress")
    url = procs["ingress"].url
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_DATA_DIR=str(tmp_path / "client"), AIMEM_INGRESS_URL=url, AIMEM_HOOK_BUDGET_MS="5000")
    sent: list[tuple[Path, dict]] = []
    for client_dir in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        for path in ordered(list(client_dir.glob("*.json"))):
            doc = json.loads(path.read_text())
            proc = subprocess.run([AIMEM, "hook", "--agent", client_dir.name, "--event", doc["event"]],
                                  input=json.dumps(doc["payload"]).encode(), capture_output=True, env=env,
                                  timeout=60)
            assert proc.returncode == 0, proc.stderr
            sent.append((path, doc))
    subprocess.run([sys.executable, "-m", "aimem_cli.hookclient", "--drain"], env=env, timeout=120, check=True)
    wait_for(lambda: len(rows(settings, "SELECT id FROM observations")) >= len(sent), what=f"{len(sent)} observations")
    stored = rows(settings, "SELECT o.*, p.name AS project FROM observations o JOIN projects p ON p.id = o.project_id")
    assert len(stored) == len(sent)  # each event once
    for path, doc in sent:
        expect, name = doc["expect"], f"{path.parent.name}/{path.name}"
        match = [r for r in stored if r["source_event"] == doc["event"] and r["title"].startswith(expect["title"])
                 and r["agent"] == path.parent.name]
        assert len(match) >= 1, name
        row = match[0]
        assert row["kind"] == expect["kind"] and row["project"] == "acme-api", name
        assert row["title"] != "Other event", name
        if "tool_name" in expect:
            assert row["tool_name"] == expect["tool_name"], name
        for text in expect.get("body", []):
            assert text in row["body"], (name, text, row["body"][:300])

    ending = {path.parent.name for path, doc in sent if doc["expect"]["kind"] == "session-end"}

    def pages() -> dict[str, str]:  # one per client with a session end (Antigravity has none)
        got = rows(settings, "SELECT s.agent, pg.body FROM sessions s JOIN pages pg ON pg.id = s.summary_page_id")
        return {r["agent"]: r["body"] for r in got} if {r["agent"] for r in got} >= ending else {}

    by_agent = wait_for(pages, what="a session page per client")
    assert "## Task\n\nFix the flaky customers test" in by_agent["copilot-cli"]  # carried on sessionStart
    assert "- src/export.rs\n- tests/retry.rs" in by_agent["codex"]  # the apply_patch heredoc
    claude = by_agent["claude-code"]
    assert "`pytest tests/test_export.py -q` — failed (exit 1: E AssertionError: expected 3 retries, got 0)" in claude
    assert "## Compaction summary\n\nSummary: Export retries on 503" in claude
    assert "## Subagents\n\n- Explore" in claude and "- src/export.py" in claude
    assert "Error: model call timed out" in by_agent["copilot-cli"] or "model call timed out" in by_agent["copilot-cli"]
    assert "## Final message\n\nThe job timed out because TIMEOUT_S was 5" in by_agent["gemini-cli"]
