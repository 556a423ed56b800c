"""Hook ingest: POST /hook at fixed open-loop rates, and `aimem hook` wall time.

Starts a tmp ``nats-server -js``, a real writer and a real ingress (``python -m``), then for
each rate sends POST /hook requests on a fixed schedule (open loop: request *i* is due at
``t0 + i/rate`` whatever the earlier ones did; latency counts from the due time, so a
stalled server cannot hide queueing — no coordinated omission). Requests go over
``--conns`` keep-alive HTTP/1.1 connections from one asyncio process (hand-rolled client,
~10× cheaper than httpx per request, so the client is not the bottleneck it measures).

Reported per rate: achieved throughput (202/s), p50/p99 latency of the 202s, 429 share,
other errors, and the ingress's CPU per request (µs, from ``/proc``: on a shared machine the
wall-clock figures measure the neighbours too, the CPU cost measures ingress); then "zero
loss": every 202 is in SQLite once the writer caught up (a writer that exits fails the
bench at once, with its log, instead of reporting a shortfall). Finally
``aimem hook`` (the real console script, a fresh process each time) against the live
ingress: p50/p95 wall time. Targets: p99 ≤ 10 ms at 500 ev/s, ≥ 2,000 ev/s
sustained with zero loss, hook client ≤ 100 ms p95.

    .venv/bin/python -m bench.hook_ingest [--rates 500,1000,2000,3000] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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


def payload(i: int) -> bytes:
    return json.dumps({
        "session_id": f"bench-{i % 64}", "cwd": CWD, "hook_event_name": "PostToolUse",
        "transcript_path": f"/home/dev/.claude/projects/x/bench-{i % 64}.jsonl", "tool_name": "Bash",
        "tool_input": {"command": f"pytest tests/test_{i % 97}.py -x"},
        "tool_response": {"stdout": f"collected {i % 40} items ... passed " + "ok " * 40, "stderr": ""},
    }).encode()


async def _conn_worker(host: str, port: int, queue: asyncio.Queue, results: list) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while True:
            item = await queue.get()
            if item is None:
                return
            due, i = item
            body = payload(i)
            head = (f"POST /hook?agent=claude-code HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                    f"Idempotency-Key: bench-{i}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
            writer.write(head + body)
            await writer.drain()
            status_line = await reader.readline()
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            results.append((int(status_line.split()[1]), time.perf_counter() - due))
    finally:
        writer.close()


async def open_loop(host: str, port: int, rate: int, seconds: float, conns: int, start_i: int,
                    server_pid: int | None = None) -> dict:
    """Send ``rate × seconds`` requests on schedule; return throughput/latency/429 figures.

    With ``server_pid``, also the server's CPU µs per request over the run.
    """
    queue: asyncio.Queue = asyncio.Queue()
    results: list[tuple[int, float]] = []
    workers = [asyncio.create_task(_conn_worker(host, port, queue, results)) for _ in range(conns)]
    n = int(rate * seconds)
    cpu0 = cpu_seconds(server_pid) if server_pid else 0.0
    t0 = time.perf_counter() + 0.05
    for k in range(n):
        due = t0 + k / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        queue.put_nowait((due, start_i + k))
    for _ in workers:
        queue.put_nowait(None)
    await asyncio.gather(*workers)
    elapsed = time.perf_counter() - t0
    cpu_us = (cpu_seconds(server_pid) - cpu0) / max(1, n) * 1e6 if server_pid else 0.0
    ok = [lat for st, lat in results if st == 202]
    return {
        "rate": rate, "sent": n, "accepted": len(ok), "throughput_per_s": len(ok) / elapsed,
        "p50_ms": pct(ok, 50) * 1000, "p99_ms": pct(ok, 99) * 1000,
        "share_429": sum(1 for st, _ in results if st == 429) / max(1, n),
        "errors": sum(1 for st, _ in results if st not in (202, 429)),
        "ingress_cpu_us_per_req": cpu_us,
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


def start(service: str, settings: config.Settings, nats_url: str, log: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_DATA_DIR=str(settings.data_dir), AIMEM_PORT_BASE=str(settings.port_base),
               AIMEM_BUS__NATS_URL=nats_url, AIMEM_LOG_LEVEL="warning", AIMEM_WRITER__WATCH_WIKI="false")
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


def run(rates: list[int], seconds: float, conns: int, hook_runs: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="aimem-bench-hook-") as tmp:
        tmp_path = Path(tmp)
        with NatsServer(tmp_path / "nats") as nats_srv:
            settings = config.load(tmp_path / "data", environ={}, bus={"nats_url": nats_srv.url},
                                   port_base=free_port())
            procs = [start("writer", settings, nats_srv.url, tmp_path / "writer.log")]
            try:
                procs.append(start("ingress", settings, nats_srv.url, tmp_path / "ingress.log"))
                port = settings.port("ingress")
                rows, accepted, next_i = [], 0, 0
                warm = asyncio.run(open_loop("127.0.0.1", port, 200, 1.0, conns, 10**8))["accepted"]
                writer_cpu0 = cpu_seconds(procs[0].pid)
                for rate in rates:
                    row = asyncio.run(open_loop("127.0.0.1", port, rate, seconds, conns, next_i, procs[1].pid))
                    next_i += row["sent"]
                    accepted += row["accepted"]
                    rows.append(row)
                    time.sleep(1.0)
                conn = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True, timeout=5)
                want, got, deadline = accepted + warm, 0, time.monotonic() + 300
                while time.monotonic() < deadline:
                    got = conn.execute("SELECT count(*) FROM observations").fetchone()[0]
                    if got >= want:
                        break
                    if procs[0].poll() is not None:
                        raise RuntimeError(f"writer exited ({procs[0].returncode}) with {got}/{want} stored:\n"
                                           + (tmp_path / "writer.log").read_text()[-2000:])
                    time.sleep(0.2)
                time.sleep(0.5)
                got = conn.execute("SELECT count(*) FROM observations").fetchone()[0]
                writer_cpu_us = (cpu_seconds(procs[0].pid) - writer_cpu0) / max(1, got - warm) * 1e6
                hook = hook_walls(f"http://127.0.0.1:{port}", tmp_path / "client", hook_runs)
            finally:
                for p in reversed(procs):
                    p.terminate()
                    p.wait(20)
    return {"rates": rows, "accepted_total": want, "stored_total": got, "zero_loss": got == want,
            "writer_cpu_us_per_obs": writer_cpu_us,
            "hook_client": hook, "seconds_per_rate": seconds, "connections": conns}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="500,1000,2000,3000")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--conns", type=int, default=32)
    ap.add_argument("--hook-runs", type=int, default=60)
    args = ap.parse_args()
    res = run([int(r) for r in args.rates.split(",")], args.seconds, args.conns, args.hook_runs)
    print(table(res["rates"], ["rate", "sent", "accepted", "throughput_per_s", "p50_ms", "p99_ms",
                               "share_429", "errors", "ingress_cpu_us_per_req"]))
    print(f"\nstored {res['stored_total']} / accepted {res['accepted_total']} (zero loss: {res['zero_loss']}); "
          f"writer CPU {res['writer_cpu_us_per_obs']:.0f} µs per observation")
    h = res["hook_client"]
    print(f"aimem hook wall time over {h['runs']} runs: p50 {h['p50_ms']:.1f} ms, p95 {h['p95_ms']:.1f} ms, "
          f"max {h['max_ms']:.1f} ms")
    print(f"written to {write_result('hook_ingest', res)}")


if __name__ == "__main__":
    main()
