"""What ``aimem run`` adds to a harness's start and exit, against a real local stack.

A stand-in harness binary (``claude`` that notes when it started and exits) is run directly
and through ``aimem run claude-code`` in a git checkout, alternately, ``N`` times each: the
time until the harness starts is what ``aimem run`` adds to its start (the launcher's own
start and the lease open, one writer round trip through ingress); start to exit adds the
transcript scan, the git checkpoint, the append and the release. The session-start packet itself is measured separately: ``POST
/hook/session-start-context`` with and without a ``run_id`` (its read, render and cursor
claim), on a workstream of 200 events.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from aimem_testing.stack import LocalStack

from bench.common import pct, table, write_result

N = 15
AIMEM = str(Path(sys.executable).with_name("aimem"))


def main(argv: list[str] | None = None) -> None:
    """Run the stack, measure, print the table and write ``bench/results/``."""
    with tempfile.TemporaryDirectory(prefix="aimem-ws-start-") as tmp:
        base = Path(os.environ.get("AIMEM_BENCH_KEEP") or tmp)
        stack = LocalStack(base / "data", base / "logs").start()
        try:
            rows = measure(stack, base)
        finally:
            stack.stop()
    print(table(rows))
    write_result("workstream_start", {"rows": rows})


def measure(stack: LocalStack, base: Path) -> list[dict]:
    repo = base / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    bindir = base / "bin"
    bindir.mkdir()
    stamp = base / "started"
    (bindir / "claude").write_text(f"#!/bin/sh\ndate +%s.%N > {stamp}\nexit 0\n")
    (bindir / "claude").chmod(0o755)
    home = base / "home"
    (home / ".local" / "share" / "aimem").mkdir(parents=True)
    env = {**stack.client_env(), "HOME": str(home), "AIMEM_INGRESS_URL": stack.url("ingress"),
           "PATH": f"{bindir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin"}
    starts: dict[str, list[float]] = {"direct": [], "managed": []}
    totals: dict[str, list[float]] = {"direct": [], "managed": []}
    for _ in range(N):
        for kind, argv in (("direct", [str(bindir / "claude")]), ("managed", [AIMEM, "run", "claude-code"])):
            t_wall = time.time()
            t = time.perf_counter()
            subprocess.run(argv, cwd=repo, env=env, check=True, capture_output=True)
            totals[kind].append((time.perf_counter() - t) * 1000)
            starts[kind].append((float(stamp.read_text()) - t_wall) * 1000)
    rows = []
    for label, d in (("until the harness starts", starts), ("start to exit, all of it", totals)):
        rows += [{"what": f"harness alone: {label}", "p50_ms": pct(d["direct"], 50), "p95_ms": pct(d["direct"], 95)},
                 {"what": f"aimem run: {label}", "p50_ms": pct(d["managed"], 50), "p95_ms": pct(d["managed"], 95)}]
    rows += start_context(stack, repo)
    return rows


def start_context(stack: LocalStack, repo: Path) -> list[dict]:
    """Session-start context latency with and without a managed run (a 200-event workstream)."""
    ident = {"project": "repo", "root": str(repo.resolve())}
    url = stack.url("ingress")
    h = stack.headers
    results = {}
    with httpx.Client(base_url=url, headers=h, timeout=10) as c:
        run = uuid.uuid4().hex
        r = c.post("/hook/workstream/lease", params=ident, json={"action": "open", "run_id": run,
                                                                  "harness": "codex", "cwd": str(repo)})
        r.raise_for_status()
        c.post("/hook/workstream/append", params=ident, json={"run_id": run, "events": [
            {"role": "assistant", "text": f"event {i} " + "word " * 40} for i in range(200)]}).raise_for_status()
        c.post("/hook/workstream/lease", params=ident, json={"action": "release", "run_id": run}).raise_for_status()
        for label, with_run in (("start context, no run", False), ("start context, managed run", True)):
            times = []
            for i in range(N):
                q = {**ident, "agent": "claude-code", "cwd": str(repo)}
                if with_run:  # another harness said something new; then a claude-code run starts
                    other = uuid.uuid4().hex
                    for action, extra in (("open", {"harness": "codex", "cwd": str(repo)}), ("release", {})):
                        c.post("/hook/workstream/lease", params=ident,
                               json={"action": action, "run_id": other, **extra}).raise_for_status()
                        if action == "open":
                            c.post("/hook/workstream/append", params=ident, json={"run_id": other, "events": [
                                {"role": "user", "text": f"more {i}"}]}).raise_for_status()
                    rid = uuid.uuid4().hex
                    c.post("/hook/workstream/lease", params=ident, json={"action": "open", "run_id": rid,
                                                                          "harness": "claude-code",
                                                                          "cwd": str(repo)}).raise_for_status()
                    q["run_id"] = rid
                body = {"session_id": f"s-{label[-3:]}-{i}", "hook_event_name": "SessionStart", "source": "startup",
                        "cwd": str(repo)}
                t = time.perf_counter()
                r = c.post("/hook/session-start-context", params=q, json=body)
                times.append((time.perf_counter() - t) * 1000)
                r.raise_for_status()
                if with_run:
                    assert "[aimem-origin v1" in r.json()["context"], r.json()
                    c.post("/hook/workstream/lease", params=ident, json={"action": "release",
                                                                          "run_id": rid}).raise_for_status()
            results[label] = times
    return [{"what": k, "p50_ms": pct(v, 50), "p95_ms": pct(v, 95)} for k, v in results.items()]


if __name__ == "__main__":
    main(sys.argv[1:])
