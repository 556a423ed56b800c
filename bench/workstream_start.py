"""What ``aimem run`` adds to a harness's start and exit, against a real local stack.

A stand-in harness binary (``claude`` that notes when it started and exits) is run directly
and through ``aimem run claude-code`` in a git checkout, alternately, ``N`` times each (40 by
default, ``--n``): the time until the harness starts is what ``aimem run`` adds to its start
(the launcher's own start and the lease open, one writer round trip through ingress); start
to exit adds the transcript scan, the git checkpoint, the append and the release.

The first launch in a HOME is measured alone and kept out of the percentiles: it wires the
harness's hooks and MCP server into the user's files (``autowire``, once per harness and
HOME) and creates the workstream. What the steady-state figure is made of is measured
beside it, ``N`` times each: the interpreter starting (``python -c pass``), the launcher's
imports on the ``run`` path, and the lease ``open`` round trip alone (the launcher's own
HTTP client, then ``release``). Wall times on a shared 2-core machine grow with its load, so
the CPU time of each launch (launcher and harness, ``RUSAGE_CHILDREN``) is measured beside
them. The packages' byte code is written first (``compile_byte_code``), as an install has it. Raw samples and the load average before and after are kept in the result file.

The session-start packet itself is measured separately: ``POST /hook/session-start-context``
with and without a ``run_id`` (its read, render and cursor claim), on a workstream of 200
events.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from aimem_testing.stack import LocalStack

from bench.common import pct, table, write_result

N = 40
AIMEM = str(Path(sys.executable).with_name("aimem"))
# The imports ``aimem run`` makes before the harness starts (``aimem_cli.main`` → ``managed``).
RUN_IMPORTS = "import aimem_cli.main, aimem_cli.managed, aimem_cli.hookconfig"


def main(argv: list[str] | None = None) -> None:
    """Run the stack, measure, print the table and write ``bench/results/``."""
    ap = argparse.ArgumentParser(prog="python -m bench workstream_start")
    ap.add_argument("--n", type=int, default=N, help="launches of each kind (default %(default)s)")
    args = ap.parse_args(argv or [])
    with tempfile.TemporaryDirectory(prefix="aimem-ws-start-") as tmp:
        base = Path(os.environ.get("AIMEM_BENCH_KEEP") or tmp)
        stack = LocalStack(base / "data", base / "logs").start()
        try:
            out = measure(stack, base, args.n)
        finally:
            stack.stop()
    print(table(out["rows"]))
    write_result("workstream_start", out)


def _stats(what: str, values: list[float]) -> dict:
    return {"what": what, "n": len(values), "p50_ms": round(pct(values, 50), 1), "p95_ms": round(pct(values, 95), 1),
            "max_ms": round(max(values), 1) if values else 0.0}


def measure(stack: LocalStack, base: Path, n: int = N) -> dict:
    """Return ``{rows, samples, first_launch_ms, loadavg_before, loadavg_after, n}`` (ms)."""
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
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    compile_byte_code()
    load_before = [round(v, 2) for v in os.getloadavg()]

    def launch(argv: list[str]) -> tuple[float, float, float]:
        t_wall = time.time()
        cpu = _children_cpu()
        t = time.perf_counter()
        subprocess.run(argv, cwd=repo, env=env, check=True, capture_output=True)
        total = (time.perf_counter() - t) * 1000
        return (float(stamp.read_text()) - t_wall) * 1000, total, (_children_cpu() - cpu) * 1000

    managed = [AIMEM, "run", "claude-code"]
    first = launch(managed)  # wires the hooks into HOME and creates the workstream: once
    samples: dict[str, list[float]] = {k: [] for k in (
        "direct_start", "managed_start", "direct_total", "managed_total", "direct_cpu", "managed_cpu",
        "python_start", "run_imports", "python_start_cpu", "run_imports_cpu", "lease_open")}
    for _ in range(n):
        for kind, argv in (("direct", [str(bindir / "claude")]), ("managed", managed)):
            s, t, c = launch(argv)
            samples[f"{kind}_start"].append(s)
            samples[f"{kind}_total"].append(t)
            samples[f"{kind}_cpu"].append(c)
    for _ in range(n):
        for key, code in (("python_start", "pass"), ("run_imports", RUN_IMPORTS)):
            cpu = _children_cpu()
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
            samples[key].append((time.perf_counter() - t) * 1000)
            samples[f"{key}_cpu"].append((_children_cpu() - cpu) * 1000)
    samples["lease_open"] = lease_round_trips(stack, repo, n)
    load_after = [round(v, 2) for v in os.getloadavg()]
    rows = [
        _stats("harness alone: until the harness starts", samples["direct_start"]),
        _stats("aimem run: until the harness starts", samples["managed_start"]),
        _stats("harness alone: start to exit, all of it", samples["direct_total"]),
        _stats("aimem run: start to exit, all of it", samples["managed_total"]),
        {"what": "aimem run, first launch in a HOME (wires hooks): until the harness starts", "n": 1,
         "p50_ms": round(first[0], 1), "p95_ms": round(first[0], 1), "max_ms": round(first[0], 1)},
        _stats("harness alone: CPU, start to exit", samples["direct_cpu"]),
        _stats("aimem run: CPU (launcher and harness), start to exit", samples["managed_cpu"]),
        _stats("part: the interpreter starts (python -c pass)", samples["python_start"]),
        _stats("part: interpreter + the run path's imports", samples["run_imports"]),
        _stats("part: CPU of the interpreter starting", samples["python_start_cpu"]),
        _stats("part: CPU of the interpreter + the run path's imports", samples["run_imports_cpu"]),
        _stats("part: lease open, one writer round trip through ingress", samples["lease_open"]),
    ]
    rows += start_context(stack, repo, n)
    return {"n": n, "rows": rows, "first_launch_ms": {"start": round(first[0], 1), "total": round(first[1], 1)},
            "samples": {k: [round(v, 2) for v in vs] for k, vs in samples.items()},
            "loadavg_before": load_before, "loadavg_after": load_after}


def compile_byte_code() -> None:
    """Write the byte code of aimem's packages as ``pip install`` does: an editable checkout
    whose ``.pyc`` files are stale (or never written: ``PYTHONDONTWRITEBYTECODE``) would
    compile every changed module again at each launch, which an installed ``aimem`` never does."""
    import compileall
    import importlib

    for name in ("aimem_cli", "aimem_common"):
        for folder in importlib.import_module(name).__path__:
            compileall.compile_dir(folder, quiet=1)


def _children_cpu() -> float:
    """user + system CPU seconds of this process's waited-for children so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def lease_round_trips(stack: LocalStack, repo: Path, n: int) -> list[float]:
    """``n`` lease opens (each released after) with the launcher's own client; open times in ms."""
    from aimem_cli.identity import resolve
    from aimem_cli.managed import Ingress

    ingress = Ingress(stack.url("ingress"), stack.token, resolve(repo))
    times = []
    for _ in range(n):
        run = uuid.uuid4().hex
        t = time.perf_counter()
        ingress.post("/hook/workstream/lease", {"action": "open", "run_id": run, "harness": "claude-code",
                                                "cwd": str(repo)})
        times.append((time.perf_counter() - t) * 1000)
        ingress.post("/hook/workstream/lease", {"action": "release", "run_id": run})
    return times


def start_context(stack: LocalStack, repo: Path, n: int = N) -> list[dict]:
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
            for i in range(n):
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
    return [_stats(k, v) for k, v in results.items()]


if __name__ == "__main__":
    main(sys.argv[1:])
