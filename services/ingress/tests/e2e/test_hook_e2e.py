"""The real hook path: `aimem hook` → ingress → JetStream → writer → SQLite + wiki git.

* every shared fixture replayed through the hook client: stored kind, session, project and
  tool excerpts match the normaliser's reading of the same payload;
* a full Claude Code session leaves ``sessions/<id>.md`` in git and a handoff; the next
  session start in another client (same cwd) prints it once, a third gets nothing;
* the bad-input matrix against the real process stores nothing and the server keeps serving;
* events spooled while ingress is down arrive once it is back.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from aimem_ingress.normalize import normalize
from aimem_testing.probe import db_rows, wait_for

JSON = {"Content-Type": "application/json"}
pytestmark = [pytest.mark.e2e, pytest.mark.integration]
FIXTURES = Path(__file__).resolve().parents[4].parent / "shared" / "fixtures" / "hooks"


def hook(client_dir: Path, url: str, agent: str, payload: bytes | dict, event: str | None = None,
         cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_DATA_DIR=str(client_dir), AIMEM_INGRESS_URL=url, AIMEM_HOOK_DEBUG="1")
    args = [str(Path(sys.executable).with_name("aimem")), "hook", "--agent", agent]
    if event:
        args += ["--event", event]
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run(args, input=data, capture_output=True, env=env, timeout=30, cwd=cwd)


def drain(client_dir: Path, url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_DATA_DIR=str(client_dir), AIMEM_INGRESS_URL=url)
    subprocess.run([sys.executable, "-m", "aimem_cli.hookclient", "--drain"], env=env, timeout=90, check=True)


def observations(settings, session_id: str) -> list[sqlite3.Row]:
    return db_rows(settings.db_path, "SELECT o.*, p.name AS project FROM observations o JOIN projects p"
                             " ON p.id = o.project_id WHERE o.session_id = ? ORDER BY o.id", (session_id,))


@pytest.fixture
def stack(services):
    procs = services("writer", "ingress")
    return procs["ingress"].url


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared fixtures absent")
def test_every_fixture_through_the_real_path(stack, settings, tmp_path):
    url = stack
    files = sorted(p for p in FIXTURES.glob("*/*.json") if not p.name.startswith("_"))
    expected = []
    for path in files:
        agent = path.parent.name
        raw = path.read_bytes()
        if agent == "opencode":  # what the generated plugin pipes into `aimem hook`: its envelope around the hook args
            raw = json.dumps(opencode_envelope(path, json.loads(raw))).encode()
        proc = hook(tmp_path / "client", url, agent, raw)
        assert proc.returncode == 0, proc.stderr
        expected.append((path, normalize(agent, json.loads(raw))))
    drain(tmp_path / "client", url)  # anything a slow first request left in the spool
    total = len(expected)
    wait_for(lambda: len(db_rows(settings.db_path, "SELECT id FROM observations")) >= total, 90,
             f"{total} observations")
    rows = db_rows(settings.db_path, "SELECT o.*, p.name AS project FROM observations o JOIN projects p"
                             " ON p.id = o.project_id ORDER BY o.id")
    assert len(rows) == total  # each event stored once (no duplicate from the drain)
    by_key: dict[tuple, list] = {}
    for r in rows:
        by_key.setdefault((r["session_id"], r["kind"], r["title"]), []).append(r)
    for path, ev in expected:
        got = by_key.get((ev.session_id, ev.kind.value, ev.title))
        assert got, f"{path.parent.name}/{path.name}: no stored {ev.kind.value} for {ev.session_id}"
        # file.edited and tool.execute.after share a title: take the row with this excerpt
        row = next((r for r in got if not ev.tool_output or ev.tool_output[:40] in r["body"]), got[0])
        assert row["project"] == "acme-api" and row["agent"] == ev.agent, path.name
        if ev.tool_name:
            assert row["tool_name"] == ev.tool_name, path.name
        if ev.tool_output:
            assert "output: " in row["body"] and ev.tool_output[:40] in row["body"], path.name
        if ev.tool_input:
            assert "input: " in row["body"], path.name


def opencode_envelope(path: Path, raw: dict) -> dict:
    """The generated plugin's envelope (aimem_common.clients.opencode) around a raw (input, output) fixture."""
    stem = path.stem
    if stem.startswith("event."):
        env = {"event": raw["event"]["type"], "input": raw, "output": None}
    else:
        env = {"event": stem, "input": raw.get("input"), "output": raw.get("output")}
    env.update(agent="opencode", directory="/home/dev/projects/acme-api", sessionID="ses_5f1a2b3c4d5eFg6H7i8J9k0L")
    return env


def claude(event: str, sid: str, cwd: str, **extra) -> dict:
    return {"session_id": sid, "transcript_path": f"/home/dev/.claude/projects/x/{sid}.jsonl", "cwd": cwd,
            "permission_mode": "default", "hook_event_name": event, **extra}


def test_full_session_handoff_is_delivered_once_to_the_next_client(stack, settings, tmp_path):
    url = stack
    cwd = "/home/dev/projects/billing"
    client = tmp_path / "client"
    sid = f"cc-{uuid.uuid4().hex[:8]}"
    steps = [
        ("SessionStart", claude("SessionStart", sid, cwd, source="startup")),
        ("UserPromptSubmit", claude("UserPromptSubmit", sid, cwd, prompt="Add cursor pagination to /invoices")),
        ("PostToolUse", claude("PostToolUse", sid, cwd, tool_name="Bash", tool_input={"command": "pytest -q"},
                               tool_response={"stdout": "14 passed", "stderr": ""})),
        ("PostToolUse", claude("PostToolUse", sid, cwd, tool_name="Edit",
                               tool_input={"file_path": f"{cwd}/src/invoices.py", "old_string": "a", "new_string": "b"},
                               tool_response={"filePath": f"{cwd}/src/invoices.py"})),
        ("PostToolUse", claude("PostToolUse", sid, cwd, tool_name="Bash", tool_input={"command": "git diff --stat"},
                               tool_response={"stdout": "1 file changed", "stderr": ""})),
        ("Stop", claude("Stop", sid, cwd, last_assistant_message="Pagination is in; all 14 tests pass.")),
        ("SessionEnd", claude("SessionEnd", sid, cwd, reason="exit")),
    ]
    first = None
    for event, payload in steps:
        proc = hook(client, url, "claude-code", payload, event)
        assert proc.returncode == 0
        first = first if first is not None else proc.stdout
    assert first == b""  # nothing to hand over yet
    wait_for(lambda: db_rows(settings.db_path, "SELECT id FROM handoffs WHERE from_session_id = ? AND status = 'open'",
                             (sid,)), 60, "the automatic handoff")
    assert len(observations(settings, sid)) == len(steps)
    page = f"sessions/{sid}.md"
    wiki = settings.wiki_dir

    def committed() -> bool:
        out = subprocess.run(["git", "-C", str(wiki), "log", "--name-only", "--format="], capture_output=True,
                             text=True)
        return any(line.endswith(page) for line in out.stdout.splitlines())

    wait_for(committed, 60, f"{page} in git")

    cursor_start = {"conversation_id": f"cur-{uuid.uuid4().hex[:8]}", "generation_id": "g", "model": "m",
                    "hook_event_name": "sessionStart", "cursor_version": "1.7.52", "workspace_roots": [cwd]}
    proc = hook(client, url, "cursor", cursor_start, "sessionStart")
    assert proc.returncode == 0
    assert proc.stdout, proc.stderr
    out = json.loads(proc.stdout)
    ctx = out["additional_context"]
    assert "untrusted" in ctx and sid in ctx and len(ctx) <= 10_000
    [h] = db_rows(settings.db_path, "SELECT status, accepted_by FROM handoffs WHERE from_session_id = ?", (sid,))
    assert (h["status"], h["accepted_by"]) == ("accepted", "cursor")

    gemini_start = {"session_id": f"gem-{uuid.uuid4().hex[:8]}", "transcript_path": "/home/dev/.gemini/tmp/x.json",
                    "cwd": cwd, "hook_event_name": "SessionStart", "timestamp": "2026-03-14T09:20:00Z",
                    "source": "startup"}
    proc = hook(client, url, "gemini-cli", gemini_start, "SessionStart")
    assert proc.returncode == 0 and proc.stdout == b""  # claimed once: the third session gets nothing


BAD = [b"not json", b'{"session_id": 5, "cwd": "/x", "hook_event_name": "Stop"}', b"\xff\xfe{}",
       b'{"cwd": "/x", "hook_event_name": "Stop"}', b'{"session_id": "s", "x": ' + b"[" * 300 + b"]" * 300 + b"}"]


def test_bad_input_against_the_real_server_stores_nothing(stack, settings):
    url = stack
    with httpx.Client(base_url=url, timeout=10) as c:
        for body in BAD:
            r = c.post("/hook?agent=claude-code", content=body, headers=JSON)
            assert 400 <= r.status_code < 500 and r.json()["error"]["code"], body[:30]
        r = c.post("/hook?agent=claude-code", content=b"x" * (11 * 1024 * 1024), headers=JSON)
        assert r.status_code == 413
        good = claude("Stop", "good-1", "/home/dev/projects/acme-api", last_assistant_message="ok")
        assert c.post("/hook?agent=claude-code", json=good).status_code == 202
    wait_for(lambda: observations(settings, "good-1"), 60, "the valid event")
    assert len(db_rows(settings.db_path, "SELECT id FROM observations")) == 1


def test_spooled_events_arrive_once_ingress_is_back(services, settings, tmp_path):
    procs = services("writer")
    port = settings.port("ingress")
    url = f"http://127.0.0.1:{port}"
    client = tmp_path / "client"
    sid = "spooled-1"
    for i in range(3):
        proc = hook(client, url, "claude-code", claude("UserPromptSubmit", sid, "/home/dev/projects/acme-api",
                                                        prompt=f"prompt {i}"), "UserPromptSubmit")
        assert proc.returncode == 0
    services("ingress")
    drain(client, url)
    wait_for(lambda: len(observations(settings, sid)) >= 3, 60, "the spooled events")
    time.sleep(0.5)
    assert sorted(r["body"] for r in observations(settings, sid)) == ["prompt 0", "prompt 1", "prompt 2"]
    assert procs["writer"].proc.poll() is None
