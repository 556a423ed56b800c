"""Managed workstreams with the real binaries: ``aimem run claude-code`` → ``aimem run codex``
→ ``aimem run gemini-cli``, each in a throwaway HOME against the real stack and its fake
vendor (``aimem_testing.fake_vendors``).

The launcher opens the lease, the child's hooks carry ``AIMEM_RUN_ID``, ingress injects the
workstream events the harness has not seen (origin marker, fenced) at its session start, and
the launcher imports the child's native transcript and a git checkpoint into the ledger when
it exits. What the next model receives is read from the fake vendor's captured requests.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aimem_testing.fake_vendors import FakeVendor, Step
from aimem_testing.probe import wait_for

from tests.e2e.test_real_agents import (Agent, agents_bin, codex_config, gemini_settings,  # noqa: F401
                                        repository, rows)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

AIMEM = str(Path(sys.executable).with_name("aimem"))
WORD = "quokkaretry"  # said only in Claude's transcript
MARKER = re.compile(r"\[aimem-origin v1 workstream=([0-9a-f]{32}) seq=(\d+)\.\.(\d+) harness=([a-z-]+)\]")


def aimem(agent: Agent, cwd: Path, *args: str, env: dict[str, str], timeout_s: float = 240,
          check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([AIMEM, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s,
                          stdin=subprocess.DEVNULL)
    if check:
        assert proc.returncode == 0, f"aimem {args[:2]} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def packet(request_json: str) -> str:
    """The packet inside a captured model request: from its marker to the end of its fence."""
    start = request_json.index("[aimem-origin")
    ends = [request_json.find(close, start) for close in ("</aimem-memory>", "&lt;/aimem-memory&gt;")]
    return request_json[start:min(e for e in ends if e > 0)]  # Gemini CLI escapes the hook text's < and >


def reader_env(agent: Agent, stack) -> dict[str, str]:
    return agent.env(AIMEM_SERVER_URL=stack.url("query"))


def test_run_carries_the_visible_exchange_to_the_next_harness_once(agents_bin, live, tmp_path):  # noqa: F811
    repo = repository(tmp_path, "ws-repo")
    (repo / "README.md").write_text("demo\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "init"],
                   check=True)

    # 1. Claude Code in api/: a prompt, a command, an edit, a final message naming the word.
    cc = Agent(tmp_path, agents_bin, live, "claude-code")
    cc.aimem("install-hooks", "--client", "claude-code")
    plan = [Step("shell", "ls missing_fixture_dir"), Step("write", str(repo / "api" / "retry.md"), "retries: 3\n"),
            Step("text", f"Done: the {WORD} policy is in api/retry.md.")]
    env = cc.env(ANTHROPIC_API_KEY="sk-ant-test-not-a-real-key", DISABLE_AUTOUPDATER="1",
                 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1")
    with FakeVendor(plan) as vendor:
        t0 = time.perf_counter()
        out = aimem(cc, repo / "api", "run", "claude-code", "--", "-p", "Document the retry policy for the API",
                    "--allowedTools", "Bash,Write", "--permission-mode", "acceptEdits", "--output-format", "text",
                    env={**env, "ANTHROPIC_BASE_URL": vendor.url})
        claude_s = time.perf_counter() - t0
        first_claude = json.dumps(vendor.requests[0][1])
    assert WORD in out.stdout and (repo / "api" / "retry.md").exists()
    assert "[aimem-origin" not in first_claude  # an empty workstream: nothing to hand over
    [ws] = rows(live, "SELECT * FROM workstreams")
    assert ws["checkout_root"] == str(repo.resolve())  # the repository, not the api/ subdirectory
    events = rows(live, "SELECT seq, harness, role, text FROM workstream_events WHERE workstream_id = ? ORDER BY seq",
                  (ws["id"],))
    roles = [e["role"] for e in events]
    assert roles[0] == "user" and "assistant" in roles and "tool" in roles and roles[-1] == "checkpoint"
    assert "Document the retry policy for the API" in events[0]["text"]
    assert any(WORD in e["text"] for e in events if e["role"] == "assistant")
    assert "api/retry.md" in events[-1]["text"] and "branch" in events[-1]["text"]
    [run] = rows(live, "SELECT * FROM managed_runs")
    assert (run["harness"], run["state"], run["exit_code"]) == ("claude-code", "released", 0)
    segs = list((live.data_dir / "raw" / "workstreams" / ws["id"]).glob("*.jsonl"))
    assert segs and sum(len(p.read_text().splitlines()) for p in segs) == len(events)
    # The child's hook observations carry the run id (migration 18), and the run its native session.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not rows(live, "SELECT 1 FROM observations WHERE kind = 'user-prompt'"):
        time.sleep(0.1)
    tagged = rows(live, "SELECT DISTINCT run_id, session_id FROM observations WHERE agent = 'claude-code'")
    assert [t["run_id"] for t in tagged] == [run["id"]] and tagged[0]["session_id"] == run["native_session_id"]

    # 2. Codex at the root: its first model request holds Claude's exchange once, behind the marker.
    cx = Agent(tmp_path, agents_bin, live, "codex")
    with FakeVendor([Step("text", "Picking up the retry policy.")]) as vendor:
        codex_config(cx, vendor)
        cx.aimem("install-hooks", "--client", "codex")
        t0 = time.perf_counter()
        aimem(cx, repo, "run", "codex", "--", "exec", "--skip-git-repo-check", "--sandbox", "danger-full-access",
              "Continue where the last session stopped", env=cx.env(FAKE_OPENAI_KEY="test-not-a-real-key", RUST_LOG="error"))
        codex_s = time.perf_counter() - t0
        first = json.dumps([b for p, b in vendor.requests if p.endswith("/responses")][0])
    markers = MARKER.findall(first)
    assert markers == [(ws["id"], "1", str(len(events)), "codex")], markers
    pkt = packet(first)
    assert pkt.count("Document the retry policy for the API") == 1 and pkt.count(WORD) == 1
    assert pkt.count("ls missing_fixture_dir") == 1 and "api/retry.md" in pkt
    assert first.count("[aimem-origin") == 1  # one packet, in one place of the request
    cursors = {r["harness"]: r["delivered_seq"] for r in rows(live, "SELECT * FROM workstream_harnesses")}
    assert cursors["codex"] >= len(events)
    after_codex = rows(live, "SELECT seq, harness, role, text FROM workstream_events WHERE seq > ? ORDER BY seq",
                       (len(events),))
    assert after_codex and {e["harness"] for e in after_codex} == {"codex"}
    assert [e["role"] for e in after_codex] == ["user", "assistant", "checkpoint"]
    assert after_codex[0]["text"] == "Continue where the last session stopped"
    assert not any("[aimem-origin" in e["text"] for e in rows(live, "SELECT text FROM workstream_events"))

    # 3. Gemini CLI: only what it has not seen (everything so far, once), Codex's part included.
    gm = Agent(tmp_path, agents_bin, live, "gemini-cli")
    gemini_settings(gm)
    gm.aimem("install-hooks", "--client", "gemini-cli")
    with FakeVendor([Step("text", "Nothing left to do.")]) as vendor:
        aimem(gm, repo, "run", "gemini-cli", "--", "-p", "Anything left?", "--yolo",
              env=gm.env(GEMINI_API_KEY="test-not-a-real-key", GOOGLE_GEMINI_BASE_URL=vendor.url,
                         GEMINI_CLI_NO_RELAUNCH="1"))
        gem_first = json.dumps(vendor.requests[0][1]) if vendor.requests else ""
    (tmp_path / "gemini-first-request.json").write_text(gem_first)
    total = rows(live, "SELECT last_seq FROM workstreams")[0]["last_seq"]
    gm_markers = MARKER.findall(gem_first)
    assert len(gm_markers) == 1 and gm_markers[0][0] == ws["id"] and gm_markers[0][3] == "gemini-cli", gm_markers
    assert packet(gem_first).count(WORD) == 1 and "Picking up the retry policy." in packet(gem_first)
    said = [(e["role"], e["text"]) for e in rows(live, "SELECT role, text FROM workstream_events WHERE harness ="
                                                       " 'gemini-cli' ORDER BY seq")]
    assert said[:2] == [("user", "Anything left?"),
                        ("assistant", "Nothing left to do.")]  # the echoed context cut out, the prompt kept

    # 4. Claude again: it is handed only what Codex and Gemini said (it said the rest itself).
    with FakeVendor([Step("text", "ok")]) as vendor:
        aimem(cc, repo, "run", "claude-code", "--", "-p", "Status?", "--output-format", "text",
              env={**env, "ANTHROPIC_BASE_URL": vendor.url})
        again = json.dumps(vendor.requests[0][1])
    (tmp_path / "claude-again-request.json").write_text(again)
    [m] = set(MARKER.findall(again))
    assert int(m[1]) > len(events) and "Picking up the retry policy." in packet(again) and WORD not in packet(again)
    assert "Nothing left to do." in packet(again)
    # ... in its own native session, resumed: the model sees Claude's first exchange again (outside the packet).
    outside = again.replace(packet(again), "")
    assert "Document the retry policy for the API" in outside and WORD in outside
    assert len({r["native_session_id"] for r in rows(
        live, "SELECT native_session_id FROM managed_runs WHERE harness = 'claude-code'")}) == 1

    # 5. The verbs: search finds the word said only by Claude; list; audit is clean.
    renv = reader_env(cc, live)
    hits = json.loads(aimem(cc, repo, "workstream-search", WORD, "--json", env=renv).stdout)
    assert hits and {h["harness"] for h in hits} == {"claude-code"} and hits[0]["workstream_id"] == ws["id"]
    listed = json.loads(aimem(cc, repo, "workstreams", "--json", env=renv).stdout)
    assert [w["id"] for w in listed] == [ws["id"]] and listed[0]["events"] == rows(
        live, "SELECT last_seq FROM workstreams")[0]["last_seq"] and listed[0]["live_run"] is None
    assert {h["harness"] for h in listed[0]["harnesses"]} == {"claude-code", "codex", "gemini-cli"}
    assert aimem(cc, repo, "audit-contamination", env=renv).stdout.strip() == "clean"
    aimem(cc, repo, "rename-workstream", "retry policy", env=renv)
    shown = aimem(cc, repo / "api", "show", env=renv).stdout
    assert '"retry policy"' in shown and "codex" in shown
    local = json.loads(aimem(cc, repo / "api", "show", "--json", env=renv).stdout)["local_checkout"]
    [claude_session] = {r["native_session_id"] for r in rows(live, "SELECT native_session_id FROM managed_runs"
                                                                  " WHERE harness = 'claude-code'")}
    assert local["checkout_root"] == str(repo.resolve()) and local["harnesses"]["claude-code"] == claude_session
    # 6. Resume it by name from elsewhere: the run happens in the workstream's checkout.
    with FakeVendor([Step("text", "resumed")]) as vendor:
        aimem(cc, tmp_path, "resume", "retry policy", "claude-code", "--project", "ws-repo", "--", "-p", "Go on",
              "--output-format", "text", env={**renv, **env, "ANTHROPIC_BASE_URL": vendor.url})
    [last_run] = rows(live, "SELECT * FROM managed_runs ORDER BY started_at DESC LIMIT 1")
    assert (last_run["workstream_id"], last_run["cwd"], last_run["state"]) == (ws["id"], str(repo.resolve()), "released")
    print(f"\nstart+run wall time: claude {claude_s:.1f}s codex {codex_s:.1f}s; ledger {total} events")


def test_a_killed_launcher_leaves_a_lease_that_expires(agents_bin, live, tmp_path):  # noqa: F811
    repo = repository(tmp_path, "crash-repo")
    cc = Agent(tmp_path, agents_bin, live, "claude-code")
    cc.aimem("install-hooks", "--client", "claude-code")
    # A harness that never answers: the fake vendor is not started, the child just waits on stdin.
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir()
    (fake_bin / "claude").write_text("#!/bin/sh\nsleep 120\n")
    (fake_bin / "claude").chmod(0o755)
    env = cc.env()
    env["PATH"] = f"{fake_bin}{os.pathsep}{env['PATH']}"
    proc = subprocess.Popen([AIMEM, "run", "claude-code", "--lease-seconds", "5", "--heartbeat-seconds", "1"],
                            cwd=repo, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        run = wait_for(lambda: next(iter(rows(live, "SELECT m.* FROM managed_runs m JOIN workstreams w ON"
                                                    " w.id = m.workstream_id WHERE w.checkout_root = ?",
                                              (str(repo.resolve()),))), None), timeout_s=30, what="the run")
        time.sleep(3)  # heartbeats move the expiry on
        renewed = rows(live, "SELECT lease_expires_at FROM managed_runs WHERE id = ?", (run["id"],))[0][0]
        assert renewed > run["lease_expires_at"]
        busy = aimem(cc, repo, "run", "codex", env=cc.env(), check=False)
        assert busy.returncode == 1 and "workstream_leased" in busy.stderr
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher and its child die without a word
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    time.sleep(6)  # past the 5 s lease
    # The next run takes the workstream; the dead run's lease is marked expired.
    gone = tmp_path / "nobin"
    gone.mkdir()
    env2 = cc.env()
    env2["PATH"] = f"{gone}{os.pathsep}/usr/bin:/bin"
    nxt = aimem(cc, repo, "run", "claude-code", env=env2, check=False)
    assert nxt.returncode == 1 and "not on PATH" in nxt.stderr  # a handled failure, before any lease
    runs = "SELECT id, state FROM managed_runs WHERE workstream_id = ?"
    assert [r["id"] for r in rows(live, runs, (run["workstream_id"],))] == [run["id"]]
    (gone / "claude").write_text("#!/bin/sh\nexit 0\n")  # a harness that starts and ends at once
    (gone / "claude").chmod(0o755)
    nxt = aimem(cc, repo, "run", "claude-code", env=env2, check=False)
    assert nxt.returncode == 0, nxt.stderr
    states = {r["id"]: r["state"] for r in rows(live, runs, (run["workstream_id"],))}
    assert states[run["id"]] == "expired"
    assert sorted(s for i, s in states.items() if i != run["id"]) == ["released"]  # ... and ends its own


def test_codex_exec_resumes_its_own_native_session(agents_bin, live, tmp_path):  # noqa: F811
    """``aimem run codex -- exec … PROMPT`` twice: the second run is ``codex exec … resume <id>
    PROMPT`` of the session the first one appended under, so the model sees the first turn."""
    repo = repository(tmp_path, "codex-resume")
    cx = Agent(tmp_path, agents_bin, live, "codex")
    env = cx.env(FAKE_OPENAI_KEY="test-not-a-real-key", RUST_LOG="error")
    exec_args = ["exec", "--skip-git-repo-check", "--sandbox", "danger-full-access"]

    def runs() -> list:
        return rows(live, "SELECT m.* FROM managed_runs m JOIN workstreams w ON w.id = m.workstream_id"
                          " WHERE w.checkout_root = ? ORDER BY m.started_at", (str(repo.resolve()),))

    with FakeVendor([Step("text", "Plan: move the bilby table first.")]) as vendor:
        codex_config(cx, vendor)
        cx.aimem("install-hooks", "--client", "codex")
        aimem(cx, repo, "run", "codex", "--", *exec_args, "Plan the bilby migration", env=env)
        [first] = runs()
        assert first["native_session_id"] and first["state"] == "released"
        seen = len(vendor.requests)
        vendor.plan = [Step("text", "Step two is done.")]
        aimem(cx, repo, "run", "codex", "--", *exec_args, "Now do step two", env=env)
        second_requests = [b for p, b in vendor.requests[seen:] if p.endswith("/responses")]
    request = json.dumps(second_requests[0])
    (tmp_path / "codex-second-request.json").write_text(request)
    # The resumed session: the first turn comes back as the conversation's own items, before the
    # new prompt (a fresh session would only see it inside the handoff's context text).
    turns = [(i["role"], " ".join(c.get("text", "") for c in i.get("content", [])))
             for i in second_requests[0]["input"] if i.get("type") == "message" and i["role"] != "developer"]
    assert turns[-3:] == [("user", "Plan the bilby migration"), ("assistant", "Plan: move the bilby table first."),
                          ("user", "Now do step two")], turns
    assert "[aimem-origin" not in request  # Codex said everything in the ledger itself: no packet
    assert [r["native_session_id"] for r in runs()] == [first["native_session_id"]] * 2
    said = [(e["role"], e["text"]) for e in rows(
        live, "SELECT role, text FROM workstream_events WHERE workstream_id = ? AND role != 'checkpoint' ORDER BY seq",
        (first["workstream_id"],))]
    assert said == [("user", "Plan the bilby migration"), ("assistant", "Plan: move the bilby table first."),
                    ("user", "Now do step two"), ("assistant", "Step two is done.")]  # the first turn once
