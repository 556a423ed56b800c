"""The main job on real input: Claude Code works, quits; Codex continues; Gemini finds it all.

1. A Claude Code session from ``../shared/fixtures/hooks/claude-code`` replayed through
   ``aimem hook`` (stdin, as Claude Code calls it) → ``sessions/<id>.md`` in the wiki and
   a git commit naming ``session.end``.
2. A Codex session starting in the same cwd gets that handoff injected on session start
   (once), then writes a decision page through MCP (official ``mcp`` client).
3. A Gemini CLI session finds both with ``memory_query`` — via the official client and via
   the MCP Inspector CLI (a client nobody here wrote).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pygit2
import pytest

from aimem_testing.probe import wait_for as probe_wait_for

pytestmark = [pytest.mark.e2e]

CLAUDE_EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUse.Bash", "Stop", "SessionEnd"]
PROJECT = "acme-api"
DECISION = "decisions/0007-cursor-pagination.md"


def hook(stack, tmp_path: Path, agent: str, event_file: Path) -> subprocess.CompletedProcess:
    """Run ``aimem hook`` exactly as an agent CLI does: payload on stdin, output on stdout."""
    event = event_file.stem.split(".")[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_INGRESS_URL=stack.url("ingress"), AIMEM_DATA_DIR=str(tmp_path / "client-data"),
               AIMEM_HOOK_BUDGET_MS="3000", AIMEM_AUTH__TOKEN=stack.token)  # a loaded CI box: the budget, not the behaviour, grows
    return subprocess.run(
        [sys.executable, "-m", "aimem_cli", "hook", "--agent", agent, "--event", event],
        input=event_file.read_bytes(), env=env, capture_output=True, timeout=30,
    )


def wait_for(fn, timeout_s: float = 30.0, what: str = "condition"):
    """``aimem_testing.probe.wait_for`` polling every 0.2 s, with this module's 30 s default."""
    return probe_wait_for(fn, timeout_s, what, poll_s=0.2)


def git_messages(stack) -> list[str]:
    """Commit messages of the wiki repository, newest first."""
    repo = pygit2.Repository(str(stack.data_dir / "wiki"))
    return [c.message for c in repo.walk(repo.head.target)]


def tool_result(res: Any) -> Any:
    structured = getattr(res, "structured_content", None) or getattr(res, "structuredContent", None)
    if structured is not None:
        return structured.get("result", structured) if isinstance(structured, dict) and set(structured) == {"result"} else structured
    text = "".join(getattr(b, "text", "") for b in res.content)
    return json.loads(text)


async def mcp_call(url: str, name: str, args: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            res = await client.call_tool(name, args)
            assert not getattr(res, "is_error", False) and not getattr(res, "isError", False), res
            return tool_result(res)


def test_agent_journey(stack, shared_dir: Path, tmp_path: Path) -> None:
    fixtures = shared_dir / "fixtures" / "hooks"
    claude_sid = json.loads((fixtures / "claude-code" / "SessionStart.json").read_text())["session_id"]
    query = stack.url("query") + f"/api/v1/workspaces/default/projects/{PROJECT}"
    mcp_url = stack.url("mcp-gateway") + "/mcp"

    # 1. Claude Code session, every event through the real hook command.
    for name in CLAUDE_EVENTS:
        out = hook(stack, tmp_path, "claude-code", fixtures / "claude-code" / f"{name}.json")
        assert out.returncode == 0, out.stderr
    page = wait_for(lambda: (r := httpx.get(f"{query}/page", params={"path": f"sessions/{claude_sid}.md"},
                                                headers=stack.headers)).status_code == 200 and r.json(),
                    what="the session page")
    body = page["body"]
    assert "Add pagination to GET /v1/invoices" in body  # the user's prompt
    assert "next_cursor" in body  # the final stop message
    assert page["frontmatter"]["session_id"] == claude_sid
    assert page["frontmatter"]["agent"] == "claude-code"

    # Git checkpoints are debounced: the commit lands shortly after the DB transaction.
    wait_for(lambda: any("session.end" in m for m in git_messages(stack)), what="a git commit naming session.end")
    files = [p for p in (stack.data_dir / "wiki").rglob(f"sessions/{claude_sid}.md")]
    assert len(files) == 1 and "Add pagination" in files[0].read_text()

    # 2. Codex starts in the same cwd: the handoff is injected once.
    codex_start = fixtures / "codex" / "SessionStart.json"
    first = hook(stack, tmp_path, "codex", codex_start)
    assert first.returncode == 0, first.stderr
    ctx = json.loads(first.stdout)["hookSpecificOutput"]["additionalContext"]
    assert claude_sid in ctx and "untrusted" in ctx.lower()
    assert "next_cursor" in ctx or "pagination" in ctx.lower()
    again = hook(stack, tmp_path, "codex", codex_start)
    assert again.returncode == 0
    if again.stdout.strip():
        assert claude_sid not in json.loads(again.stdout)["hookSpecificOutput"]["additionalContext"]

    decision = ("# Cursor-based pagination everywhere\n\nAll list endpoints (GET /v1/invoices first) take "
                "`cursor` + `limit` (default 50, max 200) and return `next_cursor`. Offset pagination is "
                f"not used. Agreed in session {claude_sid}.\n")
    written = asyncio.run(mcp_call(mcp_url, "memory_write_page", {
        "workspace": "default", "project": PROJECT, "path": DECISION, "body": decision,
        "frontmatter": {"entities": ["pagination", "invoices API"]}}, stack.headers))
    assert written["path"] == DECISION and written["page_id"] > 0

    # 3. Gemini finds both through memory_query (official client) ...
    found = asyncio.run(mcp_call(mcp_url, "memory_query", {
        "workspace": "default", "project": PROJECT, "query": "how do we paginate the invoices endpoint?"}, stack.headers))
    paths = [h["path"] for h in found["hits"]]
    assert DECISION in paths and f"sessions/{claude_sid}.md" in paths, paths
    session_hit = next(h for h in found["hits"] if h["path"] == f"sessions/{claude_sid}.md")
    assert session_hit["session_id"] == claude_sid
    wait_for(lambda: any("page.write" in m and DECISION in m for m in git_messages(stack)),
             what="a git commit naming page.write and the decision page")

    # ... and through the MCP Inspector CLI.
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx (Node) is not installed: the MCP Inspector CLI leg cannot run")
    proc = subprocess.run(
        [npx, "-y", "@modelcontextprotocol/inspector-cli@0.16.8", "--cli", mcp_url, "--transport", "http",
         "--header", f"Authorization: Bearer {stack.token}",
         "--method", "tools/call", "--tool-name", "memory_query",
         "--tool-arg", "workspace=default", f"--tool-arg", f"project={PROJECT}",
         "--tool-arg", "query=cursor pagination invoices"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert DECISION in proc.stdout and claude_sid in proc.stdout
