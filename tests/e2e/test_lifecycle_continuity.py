"""Issue 26's lifecycle classes end to end: the real hook client → ingress → nats-server →
writer (→ maintainer for idle finalisation), one class per step, each asserting what the
next session is given (docs/lifecycle.md).

* a crashed session (finalised by the idle rule) is handed on to the next session, and
  lists stop showing its handoff open once claimed; an OpenCode child session opens no
  handoff when it goes idle; a session that claimed and went idle without work gives back;
* a start without ``source`` for a session that is already open claims nothing;
* an OpenCode session created with a ``parentID`` claims nothing;
* an event without a ``cwd`` joins its known session (an unknown one is a 400);
* a session end delivered late with its old event time neither supersedes newer work nor
  becomes the delivered handoff;
* two sessions that ran side by side are both handed on, neither folded into the other.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from aimem_testing.gitrepo import make_repo, wait_for
from tests.e2e.test_identity_lifecycle import Client, Store, sid, write_rule

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def start_without_source(client: Client, session_id: str, cwd: Path) -> str:
    """A ``SessionStart`` with no ``source`` field; the injected context ('' when none)."""
    out = client.hook("SessionStart", session_id, cwd).stdout
    return json.loads(out)["hookSpecificOutput"]["additionalContext"] if out.strip() else ""


def opencode(url: str, event: str, session_id: str, directory: Path, *, parent: str | None = None,
             context: bool = False, **input_: Any) -> httpx.Response:
    """Post the envelope the generated OpenCode plugin sends for a bus event (``session.created`` …)."""
    info: dict[str, Any] = {"id": session_id, "directory": str(directory), "title": "t",
                            "time": {"created": int(time.time() * 1000)}}
    if parent:
        info["parentID"] = parent
    body = {"agent": "opencode", "event": event, "sessionID": session_id, "directory": str(directory),
            "timestamp": int(time.time() * 1000),
            "input": {"event": {"type": event, "properties": {"info": info, "sessionID": session_id}}, **input_},
            "output": None}
    path = "/hook/session-start-context" if context else "/hook"
    return httpx.post(f"{url}{path}?agent=opencode", json=body, timeout=30)


def handoff_status(store: Store, session_id: str) -> str | None:
    h = store.handoff(session_id)
    return h["status"] if h is not None else None


@pytest.mark.timeout(600)
def test_a_crashed_session_is_handed_on_and_its_child_is_not(services, settings, tmp_path: Path) -> None:
    idle_env = {"AIMEM_MAINTENANCE__SESSION_IDLE_AFTER_S": "6", "AIMEM_MAINTENANCE__IDLE_CHECK_INTERVAL_S": "0.5"}
    procs = services("writer", "ingress", "query", "maintainer", extra_env=idle_env)
    client = Client(procs["ingress"].url, tmp_path / "client")
    store = Store(settings.db_path)
    repo = make_repo(tmp_path / "work" / "ledger")
    crashed = sid("crashed")
    assert client.start(crashed, repo) == ""
    client.work(crashed, repo, "migrate the ledger to UUIDs")  # ... then the terminal is closed
    h = wait_for(lambda: store.handoff(crashed), 120, "the idle finalisation's handoff")
    assert h["status"] == "open" and h["owner"] is None
    assert store.rows("SELECT end_reason FROM sessions WHERE session_id = ?", crashed)[0][0] == "idle"

    # An OpenCode subagent session (created with a parentID) does some work and goes quiet.
    child = f"ses_child{time.time_ns()}"
    assert opencode(procs["ingress"].url, "session.created", child, repo, parent="ses_parent").status_code == 202
    r = opencode(procs["ingress"].url, "session.created", child, repo, parent="ses_parent", context=True)
    assert r.status_code == 200 and crashed not in r.json()["context"] and r.json()["handoff_id"] is None
    assert httpx.post(f"{procs['ingress'].url}/hook?agent=opencode", timeout=30, json={
        "agent": "opencode", "event": "tool.execute.before", "sessionID": child, "directory": str(repo),
        "input": {"tool": "read", "sessionID": child, "callID": "c1"}, "output": {"args": {"filePath": "x"}},
    }).status_code == 202

    # The next session anywhere in the repository gets the crashed session's handoff, once.
    nxt = sid("next")
    ctx = client.start(nxt, repo)
    client.hook("UserPromptSubmit", nxt, repo, prompt="carry on")  # real work: it keeps its claim when idle
    assert crashed in ctx and "migrate the ledger to UUIDs" in ctx
    assert handoff_status(store, crashed) == "accepted"
    listed = httpx.get(f"{procs['query'].url}/api/v1/workspaces/default/projects/ledger/handoffs", timeout=30)
    assert listed.status_code == 200 and listed.json() == []
    assert crashed not in client.start(sid("after"), repo)

    # The child is finalised by the idle rule too, and hands nothing on.
    wait_for(lambda: store.rows("SELECT 1 FROM sessions WHERE session_id = ? AND ended_at IS NOT NULL", child),
             120, "the child's idle finalisation")
    assert store.rows("SELECT parent_session_id FROM sessions WHERE session_id = ?", child)[0][0] == "ses_parent"
    assert store.handoff(child) is None

    # A session that claims a handoff and is then finalised by the idle rule without doing
    # anything gives it back: the idle end is the session-end path.
    wait_for(lambda: store.handoff(nxt), 120, "the next session's own idle handoff")
    empty = sid("empty")
    assert nxt in client.start(empty, repo)
    assert handoff_status(store, nxt) == "accepted"
    wait_for(lambda: store.rows("SELECT 1 FROM sessions WHERE session_id = ? AND end_reason = 'idle'", empty),
             120, "the empty session's idle finalisation")
    wait_for(lambda: handoff_status(store, nxt) == "open", 60, "the handoff given back")


@pytest.mark.timeout(600)
def test_which_start_gets_which_handoff(services, settings, tmp_path: Path) -> None:
    procs = services("writer", "ingress")
    url = procs["ingress"].url
    client = Client(url, tmp_path / "client")
    store = Store(settings.db_path)
    repo = make_repo(tmp_path / "work" / "billing")
    first = sid("first")
    client.session(first, repo, "split the invoice table")
    wait_for(lambda: store.handoff(first), what="the first handoff")

    write_rule(settings, "billing", "Money is integer cents: never use floats for amounts.")
    # 5. A session already open fires a start without `source`: no mid-conversation injection.
    mid = sid("mid")
    client.hook("UserPromptSubmit", mid, repo, prompt="rename the invoice columns")
    wait_for(lambda: store.rows("SELECT 1 FROM sessions WHERE session_id = ?", mid), what="the open session")
    assert start_without_source(client, mid, repo) == ""
    assert handoff_status(store, first) == "open"

    # 4. An OpenCode child session (parentID) claims nothing.
    child = f"ses_child{time.time_ns()}"
    assert opencode(url, "session.created", child, repo, parent="ses_parent").status_code == 202
    r = opencode(url, "session.created", child, repo, parent="ses_parent", context=True)
    assert r.status_code == 200 and r.json()["handoff_id"] is None and first not in r.json()["context"]
    assert "integer cents" in r.json()["context"]  # a child still gets the project's rules
    assert handoff_status(store, first) == "open"

    # A new session without `source` claims it.
    fresh = sid("fresh")
    assert first in start_without_source(client, fresh, repo)
    assert handoff_status(store, first) == "accepted"

    # 7. An event with a known session id and no cwd joins its session; an unknown one is a 400.
    prompt = {"session_id": fresh, "hook_event_name": "UserPromptSubmit", "prompt": "no cwd on this one"}
    r = httpx.post(f"{url}/hook?agent=claude-code", json=prompt, timeout=30)
    assert r.status_code == 202, r.text
    row = wait_for(lambda: store.rows(
        "SELECT p.name, o.cwd FROM observations o JOIN projects p ON p.id = o.project_id"
        " WHERE o.session_id = ? AND o.body LIKE '%no cwd on this one%'", fresh), what="the cwd-less event")[0]
    assert row["name"] == "billing" and row["cwd"] == str(repo)
    r = httpx.post(f"{url}/hook?agent=claude-code", json={**prompt, "session_id": sid("unknown")}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["code"] == "missing_project"
    client.work(fresh, repo, "move amounts to integer cents")
    client.end(fresh, repo)
    wait_for(lambda: store.handoff(fresh), what="the fresh session's handoff")

    # 3. A session that ended an hour ago arrives now (a spool drained after an outage).
    late, an_hour_ago = sid("late"), time.time() - 3600
    for i, (event, extra) in enumerate((("SessionStart", {"source": "startup"}),
                                        ("UserPromptSubmit", {"prompt": "old work on refunds"}),
                                        ("SessionEnd", {"reason": "exit"}))):
        r = httpx.post(f"{url}/hook", params={"agent": "claude-code", "cwd": str(repo), "root": str(repo),
                                              "ts": f"{an_hour_ago + i:.3f}"},
                       json={"session_id": late, "cwd": str(repo), "hook_event_name": event, **extra}, timeout=30)
        assert r.status_code == 202, r.text
    wait_for(lambda: store.handoff(late), what="the late handoff")
    nxt = sid("next")
    ctx = client.start(nxt, repo)
    assert f"Handoff from claude-code (session {fresh}" in ctx and "old work on refunds" not in ctx
    assert handoff_status(store, fresh) == "accepted" and handoff_status(store, late) == "superseded"
    assert store.handoff(late)["event_at"].startswith(time.strftime("%Y-%m-%dT%H", time.gmtime(an_hour_ago)))
    client.work(nxt, repo, "archive the refunds table")
    client.end(nxt, repo)
    wait_for(lambda: store.handoff(nxt), what="the next session's handoff")

    # 10. Two sessions side by side, both ended before the next start: both handed on.
    left, right = sid("left"), sid("right")
    assert nxt in client.start(left, repo)  # the chain goes on in the left terminal
    assert "Handoff from" not in client.start(right, repo)  # nothing left to hand on: the brief only
    client.work(left, repo, "left: tune the invoice index")
    client.work(right, repo, "right: write the refunds report")
    client.end(left, repo)
    client.end(right, repo)
    wait_for(lambda: store.handoff(left) and store.handoff(right), what="both parallel handoffs")
    ctx = client.start(sid("then"), repo)
    assert "left: tune the invoice index" in ctx and "right: write the refunds report" in ctx
    assert "ran in parallel" in ctx
    assert handoff_status(store, left) == handoff_status(store, right) == "accepted"
