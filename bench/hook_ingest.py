"""Hook ingest: POST /hook under a Go load generator, side by side with /healthz in the same run.

Starts a tmp ``nats-server -js``, a real writer and a real ingress (``python -m``, the
ingress with ``--ingress-workers`` uvicorn workers), then, per offered rate, runs two ``hey``
processes at once (a Go client: it does not eat the CPU the server needs like a Python loop
would): one posting Claude Code ``PostToolUse`` payloads to ``/hook`` at the rate, one
reading ``/healthz`` at 50 req/s on the same server — the reference: what the same server
answers, under the same load, for a request that does no work. Reported per rate: accepted
(202/s), ``/hook`` and ``/healthz`` p50/p99 and their p99 ratio, 429/other shares, the
ingress's CPU µs per request (``/proc``, all workers: load-independent), the machine's load
average. Then ``max`` (no rate limit, 64 connections): the sustained accepted rate; then
"zero loss": every 202 is in SQLite once the writer caught up. Finally ``aimem hook`` (the
real console script, a fresh process each time): p50/p95 wall time.

Targets on a 2-core machine: at 500 ev/s ``/hook`` p99 ≤ 2× ``/healthz`` p99, ≤ 250 µs ingress
CPU per hook; ≥ 3,000 ev/s accepted with zero loss.

``hey`` paces each connection with a ticker (``-q`` per connection), so a slow answer delays
that connection's next request: latencies under saturation are closed-loop figures.

    .venv/bin/python -m bench hook_ingest            # or: python -m bench.hook_ingest
        [--rates 500,1000,2000] [--seconds 10] [--ingress-workers 1] [--profile DIR]

``--profile DIR`` records the ingress with py-spy during the 500 ev/s run (folded stacks).
Needs ``hey`` (``apt-get install hey``).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from aimem_common import config
from aimem_common.natsserver import NatsServer, free_port

try:
    from bench.common import cpu_seconds, pct, table, write_result
except ImportError:  # run as a plain script
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.common import cpu_seconds, pct, table, write_result

CWD = "/home/dev/projects/acme-api"
HEALTHZ_RATE = 50


def payload(i: int) -> bytes:
    return json.dumps({
        "session_id": f"bench-{i % 64}", "cwd": CWD, "hook_event_name": "PostToolUse",
        "transcript_path": f"/home/dev/.claude/projects/x/bench-{i % 64}.jsonl", "tool_name": "Bash",
        "tool_input": {"command": f"pytest tests/test_{i % 97}.py -x"},
        "tool_response": {"stdout": f"collected {i % 40} items ... passed " + "ok " * 40, "stderr": ""},
    }).encode()


def _hey(url: str, *, rate: int | None, seconds: float, conns: int, body: Path | None = None) -> subprocess.Popen:
    cmd = ["hey", "-z", f"{seconds}s", "-c", str(conns), "-o", "csv", "-disable-compression"]
    if rate:
        cmd += ["-q", f"{rate / conns:.3f}"]
    if body is not None:
        cmd += ["-m", "POST", "-T", "application/json", "-D", str(body)]
    return subprocess.Popen(cmd + [url], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _parse(out: bytes) -> tuple[list[float], dict[int, int]]:
    """hey CSV → (latencies of the 2xx answers in s, count per status)."""
    lat: list[float] = []
    statuses: dict[int, int] = {}
    for row in csv.DictReader(io.StringIO(out.decode())):
        st = int(row["status-code"])
        statuses[st] = statuses.get(st, 0) + 1
        if 200 <= st < 300:
            lat.append(float(row["response-time"]))
    return lat, statuses


def _tree_pids(pid: int) -> list[int]:
    """``pid`` and its children (uvicorn workers)."""
    out = [pid]
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        kids = []
    for k in kids:
        out += _tree_pids(int(k))
    return out


def _cpu(pids: list[int]) -> float:
    total = 0.0
    for p in pids:
        try:
            total += cpu_seconds(p)
        except OSError:
            pass
    return total


def load_step(port: int, rate: int | None, seconds: float, conns: int, body: Path, ingress_pid: int,
              profile: Path | None = None) -> dict:
    """One run: ``/hook`` at ``rate`` (None = as fast as ``conns`` connections go) beside ``/healthz``."""
    pids = _tree_pids(ingress_pid)
    spy = None
    if profile is not None:
        profile.mkdir(parents=True, exist_ok=True)
        spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "-p", str(pids[-1]),
                                "-d", str(int(seconds)), "-r", "250", "-f", "raw", "--nonblocking", "-o",
                                str(profile / f"ingress-{rate or 'max'}.folded")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    load0, cpu0, t0 = os.getloadavg()[0], _cpu(pids), time.perf_counter()
    hook = _hey(f"{base}/hook?agent=claude-code", rate=rate, seconds=seconds, conns=conns, body=body)
    health = _hey(f"{base}/healthz", rate=HEALTHZ_RATE, seconds=seconds, conns=2)
    hook_out, hook_err = hook.communicate()
    health_out, _ = health.communicate()
    elapsed = time.perf_counter() - t0
    cpu = _cpu(pids) - cpu0
    if spy is not None:
        spy.wait(60)
    if hook.returncode:
        raise RuntimeError(f"hey failed: {hook_err.decode()[-500:]}")
    lat, statuses = _parse(hook_out)
    hlat, _ = _parse(health_out)
    sent = sum(statuses.values())
    accepted = statuses.get(202, 0)
    hook_p99, health_p99 = pct(lat, 99) * 1000, pct(hlat, 99) * 1000
    return {
        "rate": rate or "max", "sent": sent, "accepted": accepted, "accepted_per_s": accepted / seconds,
        "hook_p50_ms": pct(lat, 50) * 1000, "hook_p99_ms": hook_p99,
        "healthz_p50_ms": pct(hlat, 50) * 1000, "healthz_p99_ms": health_p99,
        "p99_ratio": hook_p99 / health_p99 if health_p99 else 0.0,
        "share_429": statuses.get(429, 0) / max(1, sent),
        "other_errors": sent - accepted - statuses.get(429, 0),
        "ingress_cpu_us_per_req": cpu / max(1, sent + len(hlat)) * 1e6,
        "ingress_cpu_share": cpu / elapsed,
        "loadavg_1m": round((load0 + os.getloadavg()[0]) / 2, 2),
    }


def hook_walls(url: str, client_dir: Path, runs: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_DATA_DIR=str(client_dir), AIMEM_INGRESS_URL=url)
    aimem = str(Path(sys.executable).with_name("aimem"))
    walls = []
    for i in range(runs):
        t0 = time.perf_counter()
        subprocess.run([aimem, "hook", "--agent", "claude-code", "--event", "PostToolUse"], input=payload(10**9 + i),
                       env=env, capture_output=True, check=True)
        walls.append(time.perf_counter() - t0)
    return {"runs": runs, "p50_ms": pct(walls, 50) * 1000, "p95_ms": pct(walls, 95) * 1000,
            "max_ms": max(walls) * 1000}


def start(service: str, settings: config.Settings, nats_url: str, log: Path,
          extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_DATA_DIR=str(settings.data_dir), AIMEM_PORT_BASE=str(settings.port_base),
               AIMEM_BUS__NATS_URL=nats_url, AIMEM_LOG_LEVEL="warning", AIMEM_WRITER__WATCH_WIKI="false",
               **(extra_env or {}))
    module = {"writer": "aimem_writer", "ingress": "aimem_ingress"}[service]
    proc = subprocess.Popen([sys.executable, "-m", module], env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{settings.port(service)}/healthz", timeout=0.5).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"{service} did not start:\n{log.read_text()[-2000:]}")


def run(rates: list[int], seconds: float, conns: int, hook_runs: int, workers: int,
        profile: Path | None = None, max_run: bool = True) -> dict:
    if shutil.which("hey") is None:
        raise SystemExit("hook_ingest needs the hey load generator: apt-get install -y hey")
    with tempfile.TemporaryDirectory(prefix="aimem-bench-hook-") as tmp:
        tmp_path = Path(tmp)
        body = tmp_path / "body.json"
        body.write_bytes(payload(1))
        with NatsServer(tmp_path / "nats") as nats_srv:
            settings = config.load(tmp_path / "data", environ={}, bus={"nats_url": nats_srv.url},
                                   port_base=free_port())
            procs = [start("writer", settings, nats_srv.url, tmp_path / "writer.log")]
            try:
                procs.append(start("ingress", settings, nats_srv.url, tmp_path / "ingress.log",
                                   {"AIMEM_INGRESS__WORKERS": str(workers)}))
                time.sleep(0.5 * workers)  # every worker up
                port = settings.port("ingress")
                warm = load_step(port, 200, 1.0, 4, body, procs[1].pid)
                rows, accepted = [], warm["accepted"]
                writer_cpu0 = cpu_seconds(procs[0].pid)
                steps: list[int | None] = [*rates, None] if max_run else list(rates)
                for rate in steps:
                    row = load_step(port, rate, seconds, conns if rate is None else max(8, min(conns, rate // 12)),
                                    body, procs[1].pid, profile if rate == 500 else None)
                    accepted += row["accepted"]
                    rows.append(row)
                    time.sleep(1.0)
                conn = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True, timeout=5)
                got, deadline = 0, time.monotonic() + 300
                while time.monotonic() < deadline:
                    got = conn.execute("SELECT count(*) FROM observations").fetchone()[0]
                    if got >= accepted:
                        break
                    if procs[0].poll() is not None:
                        raise RuntimeError(f"writer exited ({procs[0].returncode}) with {got}/{accepted} stored:\n"
                                           + (tmp_path / "writer.log").read_text()[-2000:])
                    time.sleep(0.2)
                time.sleep(0.5)
                got = conn.execute("SELECT count(*) FROM observations").fetchone()[0]
                writer_cpu_us = (cpu_seconds(procs[0].pid) - writer_cpu0) / max(1, got - warm["accepted"]) * 1e6
                hook = hook_walls(f"http://127.0.0.1:{port}", tmp_path / "client", hook_runs) if hook_runs else None
            finally:
                for p in reversed(procs):
                    p.terminate()
                    p.wait(20)
    return {"rates": rows, "accepted_total": accepted, "stored_total": got, "zero_loss": got == accepted,
            "writer_cpu_us_per_obs": writer_cpu_us, "hook_client": hook, "seconds_per_rate": seconds,
            "max_connections": conns, "ingress_workers": workers, "healthz_rate": HEALTHZ_RATE}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="500,1000,2000")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--conns", type=int, default=64, help="connections of the unthrottled (max) run")
    ap.add_argument("--hook-runs", type=int, default=30)
    ap.add_argument("--ingress-workers", type=int, default=1)
    ap.add_argument("--no-max", action="store_true", help="skip the unthrottled run")
    ap.add_argument("--profile", type=Path, default=None, help="py-spy the ingress at 500 ev/s into DIR")
    args = ap.parse_args(argv)
    res = run([int(r) for r in args.rates.split(",") if r], args.seconds, args.conns, args.hook_runs,
              args.ingress_workers, args.profile, not args.no_max)
    print(table(res["rates"], ["rate", "sent", "accepted_per_s", "hook_p50_ms", "hook_p99_ms", "healthz_p99_ms",
                               "p99_ratio", "share_429", "other_errors", "ingress_cpu_us_per_req",
                               "ingress_cpu_share", "loadavg_1m"]))
    print(f"\ningress workers {res['ingress_workers']}; stored {res['stored_total']} / accepted {res['accepted_total']} "
          f"(zero loss: {res['zero_loss']}); writer CPU {res['writer_cpu_us_per_obs']:.0f} µs per observation")
    if h := res["hook_client"]:
        print(f"aimem hook wall time over {h['runs']} runs: p50 {h['p50_ms']:.1f} ms, p95 {h['p95_ms']:.1f} ms, "
              f"max {h['max_ms']:.1f} ms")
    name = "hook_ingest" if res["ingress_workers"] == 1 else f"hook_ingest-w{res['ingress_workers']}"
    print(f"written to {write_result(name, res)}")


if __name__ == "__main__":
    main()
