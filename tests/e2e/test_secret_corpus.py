"""No raw secret is stored on any write path: hook, MCP, admin REST and the CLI.

Every path gets the same secret-bearing lines (the command-line forms redaction used to
miss, and relatives); then the DB files (with WAL), the wiki working tree, every object
in its git history, the NATS store and every log are searched for the raw values.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

import httpx
import pygit2
import pytest

from tests.e2e.test_agent_journey import mcp_call  # the official MCP client, one call

pytestmark = [pytest.mark.e2e]

AWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYZQ8WEXAMPL"  # 40 chars, fake
GHP = "ghp_" + "Q7x9Lm2Vb4Nc8Tz1Ka5Pw3Rd6Hf0Js2Ue4Yo"  # fake, 36 after the prefix
SECRETS = ["Zq1pwA", "My5qlPw", "Pw9short", AWS, "Pg7secret", "Dk8secret", "Ss4pass", GHP[4:], "Nrc3pw"]
LINES = [
    "curl -u alice:Zq1pwA https://api.example.com/v1",
    "mysql -u root -p'My5qlPw' app",
    "deploy --password Pw9short --env prod",
    f"aws configure set aws_secret_access_key {AWS}",
    "PGPASSWORD=Pg7secret psql -h db",
    "docker login -u me -p Dk8secret registry.example.com",
    "sshpass -p Ss4pass ssh build@host",
    f"git push https://x:{GHP}@github.com/o/r",
    "machine api.example.com login me password Nrc3pw",
]
TEXT = "\n".join(LINES)


def _hook(stack, event: dict) -> None:
    r = httpx.post(stack.url("ingress") + "/hook?agent=claude-code", json=event, timeout=10, headers=stack.headers)
    assert r.status_code == 202, r.text


def _raw_hits(stack) -> list[str]:
    """Every place a raw secret value occurs, as ``<where>: <secret>``."""
    hits: list[str] = []
    needles = [s.encode() for s in SECRETS]

    def scan(where: str, data: bytes) -> None:
        hits.extend(f"{where}: {n.decode()}" for n in needles if n in data)

    data_dir = stack.data_dir
    for f in data_dir.rglob("*"):
        if f.is_file() and ".git" not in f.parts:
            scan(str(f.relative_to(data_dir)), f.read_bytes())
    for f in (data_dir / "wiki" / ".git").rglob("*"):  # loose objects are zlib-compressed
        if f.is_file():
            raw = f.read_bytes()
            try:
                raw = zlib.decompress(raw)
            except zlib.error:
                pass
            scan(f"git:{f.name}", raw)
    repo = pygit2.Repository(str(data_dir / "wiki"))
    for oid in repo.odb:  # packed objects too
        scan(f"git-object:{oid}", repo.odb.read(oid)[1])
    for f in stack.log_dir.glob("*.log"):
        scan(f"log:{f.name}", f.read_bytes())
    return hits


def test_no_raw_secret_on_any_write_path(stack, tmp_path: Path) -> None:
    sid = "secret-session-1"
    base = {"session_id": sid, "cwd": "/home/dev/secret-proj"}
    # 1. hooks: a prompt, a tool call, its output, the session end (session page, handoff, ledger)
    _hook(stack, {**base, "hook_event_name": "SessionStart", "source": "startup"})
    _hook(stack, {**base, "hook_event_name": "UserPromptSubmit", "prompt": "run these:\n" + TEXT})
    for line in LINES:
        _hook(stack, {**base, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                      "tool_input": {"command": line}})
        _hook(stack, {**base, "hook_event_name": "PostToolUse", "tool_name": "Bash",
                      "tool_input": {"command": line}, "tool_response": {"stdout": line, "stderr": ""}})
    _hook(stack, {**base, "hook_event_name": "Stop", "last_assistant_message": "done: " + TEXT})
    _hook(stack, {**base, "hook_event_name": "SessionEnd", "reason": "logout"})

    # 2. MCP write tools
    mcp = stack.url("mcp-gateway") + "/mcp"
    scope = {"workspace": "default", "project": "secret-proj"}

    async def mcp_writes() -> None:
        await mcp_call(mcp, "memory_write_page", {**scope, "path": "notes/creds.md", "title": LINES[0],
                                                   "body": "# Creds\n" + TEXT}, stack.headers)
        await mcp_call(mcp, "memory_write_page", {**scope, "project": "other-proj", "path": "notes/x.md", "body": "x"}, stack.headers)
        await mcp_call(mcp, "memory_message_send", {**scope, "to_project": "other-proj", "subject": LINES[2],
                                                    "body": TEXT}, stack.headers)
        await mcp_call(mcp, "memory_handoff_begin", {**scope, "summary": TEXT, "title": LINES[1],
                                                     "next_steps": LINES[:3]}, stack.headers)
        await mcp_call(mcp, "memory_feedback", {**scope, "path": "notes/creds.md", "signal": "wrong",
                                                "reason": TEXT}, stack.headers)

    asyncio.run(mcp_writes())
    # 3. admin REST
    r = httpx.post(stack.url("query") + "/admin/pages", timeout=30, headers=stack.headers,
                   json={**scope, "path": "notes/admin.md", "title": LINES[3], "body": TEXT})
    assert r.status_code == 200, r.text
    # 4. the CLI
    body_file = tmp_path / "page.md"
    body_file.write_text("# From the CLI\n" + TEXT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")} | {"AIMEM_DATA_DIR": str(stack.data_dir)}
    out = subprocess.run([sys.executable, "-m", "aimem_cli", "write-page", "notes/cli.md", "--file", str(body_file),
                          "--title", LINES[4], "-w", "default", "-p", "secret-proj",
                          "--server", stack.url("query")], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr

    # Everything applied and checkpointed: the session page exists and git has committed.
    query = stack.url("query") + "/api/v1/workspaces/default/projects/secret-proj"
    deadline = time.monotonic() + 30
    while httpx.get(f"{query}/page", params={"path": f"sessions/{sid}.md"}, headers=stack.headers).status_code != 200:
        assert time.monotonic() < deadline, "the session page never appeared"
        time.sleep(0.25)
    page = httpx.get(f"{query}/page", params={"path": "notes/creds.md"}, headers=stack.headers).json()
    assert "[REDACTED:" in page["body"] and "[REDACTED:" in page["title"]
    time.sleep(2.0)  # the debounced git checkpoint (500 ms) and ledger appends
    hits = _raw_hits(stack)
    assert hits == [], hits
