"""Backfill on start through the real stack (``aimem up``) and the real hook command.

A fresh project whose repository has 20 earlier Claude Code transcripts (generated here in
Claude Code's line format, as the import tests do; plus 3 of another repository and the live
session's own transcript):

* the first session start spawns the backfill and answers without waiting for it — shown by
  structure: the test holds the client's import lock while the hook runs, so the import cannot
  have begun; the hook has answered (context printed, exit 0) and the claim is recorded as
  ``running`` in ``/admin/status`` with nothing imported yet;
* once the lock is released, the 20 sessions are stored (historical ends, no handoff) and
  searchable within a minute; the other repository's sessions are not; the live session stays
  open (an imported end never ends a session hooks captured); status says ``done``;
* a second start spawns nothing (local marker); without the marker the server refuses
  (``already``: its row is the durable "once"), and so it does after a restart of the stack;
* ``[hooks] backfill_on_start = false`` does nothing.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from aimem_testing.gitrepo import make_repo, wait_for
from aimem_testing.stack import LocalStack
from aimem_testing.transcripts import _Clock, claude_turn

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]
AIMEM = str(Path(sys.executable).with_name("aimem"))
WORD = "quillwort"  # in every backfilled prompt of the repository


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> LocalStack:
    base = tmp_path_factory.mktemp("backfill")
    with LocalStack(base / "data", base / "logs") as s:
        yield s


def write_transcripts(home: Path, cwd: Path, n: int, *, seed: int, word: str) -> list[str]:
    """``n`` Claude Code sessions of ``cwd`` under ``home/.claude/projects/<escaped cwd>/``; their ids."""
    rng = random.Random(seed)
    clock = _Clock(datetime(2026, 5, 1, 9, 0, tzinfo=UTC))
    folder = home / ".claude" / "projects" / str(cwd).replace("/", "-")
    folder.mkdir(parents=True, exist_ok=True)
    sids = []
    for i in range(n):
        sid = str(uuid.UUID(int=rng.getrandbits(128)))
        lines = claude_turn(sid, str(cwd), clock, rng, i, prompt_extra=f"Mind the {word} case {i}.")
        (folder / f"{sid}.jsonl").write_text("".join(line + "\n" for line in lines), "utf-8")
        sids.append(sid)
    return sids


def hook(stack: LocalStack, env: dict, payload: dict, cwd: Path) -> subprocess.CompletedProcess:
    """Run the native hook command as Claude Code does (payload on stdin)."""
    return subprocess.run([AIMEM, "hook", "--agent", "claude-code", "--event", payload["hook_event_name"]],
                          input=json.dumps(payload), capture_output=True, text=True, env=env, cwd=cwd, timeout=60)


def start(stack, env, repo: Path, sid: str) -> subprocess.CompletedProcess:
    run = hook(stack, env, {"hook_event_name": "SessionStart", "session_id": sid, "cwd": str(repo),
                            "source": "startup", "transcript_path": "/dev/null"}, repo)
    assert run.returncode == 0, run.stderr
    return run


def backfills(stack: LocalStack, project: str) -> list[dict]:
    body = httpx.get(stack.url("query") + "/admin/status", headers=stack.headers, timeout=10).json()
    return [b for b in body["backfills"] if b["project"] == project]


def rows(stack: LocalStack, sql: str, args=()) -> list[sqlite3.Row]:
    conn = sqlite3.connect(f"file:{stack.data_dir / 'db' / 'memory.sqlite'}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def client(stack: LocalStack, tmp: Path, **extra: str) -> tuple[dict, Path, Path]:
    """A developer's machine: its HOME (the transcripts) and the hook client's data dir."""
    home, data = tmp / "home", tmp / "client"
    home.mkdir()
    data.mkdir()
    return stack.client_env(HOME=str(home), AIMEM_DATA_DIR=str(data), **extra), home, data


@pytest.mark.timeout(300)
def test_first_start_backfills_once_in_the_background(stack, tmp_path) -> None:
    env, home, data = client(stack, tmp_path)
    repo = make_repo(tmp_path / "repos" / "fernbank", origin="https://example.com/acme/fernbank.git")
    other = make_repo(tmp_path / "repos" / "elsewhere")
    history = write_transcripts(home, repo, 20, seed=1, word=WORD)
    foreign = write_transcripts(home, other, 3, seed=2, word=WORD)
    live = f"live-{uuid.uuid4().hex[:8]}"
    # The live session's own transcript is in the same folder: its events are captured live.
    (home / ".claude" / "projects" / str(repo).replace("/", "-") / f"{live}.jsonl").write_text("".join(
        line + "\n" for line in claude_turn(live, str(repo), _Clock(datetime(2026, 6, 1, tzinfo=UTC)),
                                            random.Random(4), 1)), "utf-8")

    lock = os.open(data / "import.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)  # the import cannot start while the test holds this
    try:
        first = start(stack, env, repo, live)
        # The hook answered with the lock held: it did not wait on the import. The backfill was
        # claimed (its detached process asks first) and nothing of the history is stored yet.
        claimed = wait_for(lambda: backfills(stack, "fernbank"), 30, "the backfill claim")
        assert claimed[0]["state"] == "running" and claimed[0]["session_id"] == live
        assert claimed[0]["agent"] == "claude-code"
        assert not rows(stack, "SELECT 1 FROM sessions WHERE session_id IN (%s)" % ",".join("?" * 20), history)
        assert "error" not in first.stderr.lower()
    finally:
        os.close(lock)

    t0 = time.monotonic()
    done = wait_for(lambda: [b for b in backfills(stack, "fernbank") if b["state"] == "done"], 60, "backfill done")[0]
    ended = wait_for(lambda: len(rows(stack, "SELECT 1 FROM sessions WHERE ended_at IS NOT NULL AND session_id IN (%s)"
                                      % ",".join("?" * 20), history)) == 20, 60, "the 20 sessions stored")
    assert ended
    hits = wait_for(lambda: httpx.get(stack.url("query") + "/api/v1/search", headers=stack.headers, timeout=10, params={
        "q": WORD, "workspace": "default", "project": "fernbank", "limit": 50}).json().get("hits"), 60, "search hits")
    assert time.monotonic() - t0 < 60
    assert {h.get("session_id") for h in hits} & set(history)
    assert (done["files"], done["sessions"], done["truncated"], done["error"]) == (21, 21, False, None)
    assert done["new_events"] == done["events"] - 3  # the live session's 3 events: captured live, not sent
    # Only this repository's history; no handoff from history; the live session still open.
    assert not rows(stack, "SELECT 1 FROM sessions WHERE session_id IN (?, ?, ?)", foreign)
    assert rows(stack, "SELECT count(*) AS n FROM handoffs")[0]["n"] == 0
    assert rows(stack, "SELECT ended_at FROM sessions WHERE session_id = ?", (live,))[0]["ended_at"] is None

    # A second start: the local marker says "asked already" — nothing is spawned.
    markers = list((data / "backfill").glob("*.json"))
    assert len(markers) == 1 and json.loads(markers[0].read_text())["answer"]["claimed"] is True
    before = markers[0].stat().st_mtime_ns
    start(stack, env, repo, f"live-{uuid.uuid4().hex[:8]}")
    # Without the marker (another machine, a wiped data dir) the server refuses: once per project.
    markers[0].unlink()
    start(stack, env, repo, f"live-{uuid.uuid4().hex[:8]}")
    again = wait_for(lambda: markers[0].exists() and json.loads(markers[0].read_text()), 30, "the refused claim")
    assert again["answer"]["claimed"] is False and again["answer"]["reason"] == "already"
    assert markers[0].stat().st_mtime_ns != before
    assert backfills(stack, "fernbank") == [done]
    # ... and after a restart of the whole stack: the row is durable.
    stack.stop()
    stack.start()
    markers[0].unlink()
    start(stack, env, repo, f"live-{uuid.uuid4().hex[:8]}")
    after = wait_for(lambda: markers[0].exists() and json.loads(markers[0].read_text()), 30, "the refused claim")
    assert after["answer"]["reason"] == "already" and backfills(stack, "fernbank") == [done]


@pytest.mark.timeout(120)
def test_backfill_on_start_false_does_nothing(stack, tmp_path) -> None:
    env, home, data = client(stack, tmp_path)
    (data / "config.toml").write_text("[hooks]\nbackfill_on_start = false\n", "utf-8")
    repo = make_repo(tmp_path / "repos" / "mossgate")
    history = write_transcripts(home, repo, 20, seed=5, word=WORD)
    start(stack, env, repo, f"live-{uuid.uuid4().hex[:8]}")
    # The same start with the setting on spawns at once (previous test); give a spawn time to show.
    time.sleep(5)
    assert not (data / "backfill").exists()
    assert backfills(stack, "mossgate") == []
    assert not rows(stack, "SELECT 1 FROM sessions WHERE session_id IN (%s)" % ",".join("?" * 20), history)


def test_the_backfill_routes_refuse_bad_input_clearly(stack) -> None:
    url = stack.url("ingress") + "/hook/backfill"
    q = {"project": "badinput"}

    def post(action: str, body, *, params=q, headers=None) -> httpx.Response:
        return httpx.post(f"{url}/{action}", params=params, json=body, timeout=10,
                          headers=stack.headers if headers is None else headers)

    cases = [(post("claim", {"agent": "Not An Agent!"}), 400, "invalid_payload"),
             (post("claim", {"agent": "claude-code", "extra": 1}), 400, "invalid_payload"),
             (post("claim", {"agent": "claude-code"}, params={}), 400, "missing_project"),
             (post("claim", [1, 2]), 400, "invalid_body"),
             (post("finish", {"state": "maybe"}), 400, "invalid_payload"),
             (post("claim", {"agent": "claude-code"}, headers={}), 401, "unauthorized")]
    for resp, status, code in cases:
        assert (resp.status_code, resp.json()["error"]["code"]) == (status, code), resp.text
    # A finish for a project that never claimed one is a clear 404, not a 5xx.
    assert post("claim", {"agent": "claude-code", "session_id": "s"}).json()["claimed"] is True
    other = post("finish", {"state": "done"}, params={"project": "neverclaimed"})
    assert other.status_code in (404,) and other.json()["error"]["code"] in ("not_found", "backfill_not_found")
