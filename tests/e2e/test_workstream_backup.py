"""``aimem backup`` / ``aimem restore`` carry the managed workstreams' ledger (``raw/workstreams``).

A real stack (``aimem up``) holds a workstream of two runs; ``aimem backup`` archives it; a
run appended after the backup must not survive the restore. After ``aimem restore`` and a
restart, ``aimem show``, ``aimem workstream-search`` and the next managed start (``aimem
run`` with a stand-in harness whose session start goes through ``aimem hook``, as a real
harness's hook would) see the restored ledger, and the next append continues its numbering.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aimem_cli.identity import resolve
from aimem_cli.managed import Ingress
from aimem_testing.stack import LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

AIMEM = str(Path(sys.executable).with_name("aimem"))
WORD = "wombatledger"  # said before the backup
LATE = "bilbylater"  # said after it


def _cli(env: dict[str, str], cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([AIMEM, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    if check:
        assert proc.returncode == 0, f"aimem {args[:2]}: {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc


def _run(stack: LocalStack, repo: Path, run_id: str, harness: str, texts: list[str]) -> dict:
    ingress = Ingress(stack.url("ingress"), stack.token, resolve(repo))
    ingress.post("/hook/workstream/lease", {"action": "open", "run_id": run_id, "harness": harness, "cwd": str(repo)})
    got = ingress.post("/hook/workstream/append", {"run_id": run_id, "events": [
        {"role": "user", "text": t} for t in texts]})
    ingress.post("/hook/workstream/lease", {"action": "release", "run_id": run_id})
    return got


def _segments(data_dir: Path) -> dict[str, str]:
    root = data_dir / "raw" / "workstreams"
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*.jsonl"))}


def test_backup_and_restore_carry_the_ledger_to_the_next_managed_start(tmp_path: Path) -> None:
    repo = tmp_path / "wsrepo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    data, logs = tmp_path / "data", tmp_path / "logs"
    stack = LocalStack(data, logs).start()
    try:
        _run(stack, repo, "a" * 32, "claude-code", [f"the {WORD} retry policy", "three tries, then give up"])
        _run(stack, repo, "b" * 32, "codex", [f"picked up the {WORD} policy"])
        before = _segments(data)
        assert len(before) == 2
        env = {**stack.client_env(), "HOME": str(tmp_path / "home")}
        archive = tmp_path / "ws.tar.gz"
        _cli(env, repo, "backup", "--to", str(archive))
        late = _run(stack, repo, "c" * 32, "gemini-cli", [f"{LATE}: said after the backup"])
        assert late["first_seq"] == 4 and len(_segments(data)) == 3
    finally:
        stack.stop()

    restore_env = {**{k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")},
                   "AIMEM_PORT_BASE": str(stack.port_base), "HOME": str(tmp_path / "home")}
    out = _cli(restore_env, tmp_path, "restore", "--from", str(archive), "--data-dir", str(data), "--force").stdout
    assert "2 workstream segment(s)" in out, out
    assert _segments(data) == before  # the segment appended after the backup is gone with its rows

    stack = LocalStack(data, logs).start()
    try:
        home = tmp_path / "home"
        (home / ".local" / "share" / "aimem").mkdir(parents=True, exist_ok=True)
        env = {**stack.client_env(), "HOME": str(home)}
        shown = json.loads(_cli(env, repo, "show", "--json").stdout)
        assert shown["events"] == 3 and [e["seq"] for e in shown["recent_events"]] == [1, 2, 3]
        assert {h["harness"] for h in shown["harnesses"]} == {"claude-code", "codex"}
        hits = json.loads(_cli(env, repo, "workstream-search", WORD, "--json").stdout)
        assert sorted(h["seq"] for h in hits) == [1, 3]
        assert json.loads(_cli(env, repo, "workstream-search", LATE, "--json").stdout) == []

        # The next managed start: a harness new to the workstream is handed all three events.
        bindir = tmp_path / "bin"
        bindir.mkdir()
        got = tmp_path / "start-context.json"
        start = json.dumps({"session_id": "restored-1", "hook_event_name": "SessionStart", "source": "startup",
                            "cwd": str(repo)})
        (bindir / "gemini").write_text(
            f"#!/bin/sh\necho '{start}' | {AIMEM} hook --agent gemini-cli --event SessionStart > {got}\n")
        (bindir / "gemini").chmod(0o755)
        run_env = {**env, "PATH": f"{bindir}{os.pathsep}{env['PATH']}", "AIMEM_HOOK_BUDGET_MS": "5000"}
        _cli(run_env, repo, "run", "gemini-cli", "--no-autowire")
        context = got.read_text()
        assert "[aimem-origin v1 workstream=" in context and "seq=1..3 harness=gemini-cli" in context, context
        assert context.count(WORD) == 2 and LATE not in context
        # ... and the ledger goes on from the restored end (the run's git checkpoint is #4).
        after = _segments(data)
        [new] = [k for k in after if k not in before]
        assert new.endswith("/0000000004-0000000004.jsonl") and '"role": "checkpoint"' in after[new]
    finally:
        stack.stop()
