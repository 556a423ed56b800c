"""Where a lone hook waits: ``POST /hook`` one at a time on the whole stack, with parts paused.

``hook_ingest`` shows that at 500 ev/s a hook's wall time (p50 ~20 ms) is far above its CPU
(~0.5 ms) and above ``/healthz`` in the same seconds (~1.3 ms). This bench sends hooks one
after another (``--gap-ms`` apart, one keep-alive connection, the root token) to a fresh
``aimem up`` stack and repeats the run with parts of the stack stopped (``SIGSTOP``, resumed
after): every service running; only the ingress, nats-server and the writer (query,
mcp-gateway and maintainer stopped); the writer stopped too (its commands wait in
JetStream: a run is kept short so the writer's back-pressure bound is not reached); then
everything again, back to back and 2 ms apart. Per run it prints the client's wall p50 /
p90 / p99 and, from the ingress's own ``/metrics`` histograms, the mean time inside the
route and inside the bus publish (the PubAck round trip) over that run, beside ``/healthz``
through the same client.

    .venv/bin/python -m bench.hook_wait [--hooks 300] [--gap-ms 10]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

try:
    from bench.common import machine_info, pct, table, write_result
    from bench.footprint import stack_processes
    from bench.hook_ingest import payload
except ImportError:  # run as a plain script
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.common import machine_info, pct, table, write_result
    from bench.footprint import stack_processes
    from bench.hook_ingest import payload

SUMS = {"route_ms": "aimem_hook_request_duration_seconds", "publish_ms": "aimem_bus_publish_seconds"}


def _sums(metrics: str) -> dict[str, tuple[float, float]]:
    """(sum in s, count) of the route and publish histograms in the ingress's ``/metrics``."""
    out: dict[str, tuple[float, float]] = {}
    for key, name in SUMS.items():
        s = sum(float(v) for v in re.findall(rf"^{name}_sum\{{[^}}]*\}} (\S+)$", metrics, re.M))
        n = sum(float(v) for v in re.findall(rf"^{name}_count\{{[^}}]*\}} (\S+)$", metrics, re.M))
        out[key] = (s, n)
    return out


def one_run(client: httpx.Client, url: str, headers: dict[str, str], label: str, hooks: int,
            gap_s: float) -> dict[str, Any]:
    """``hooks`` sequential hooks ``gap_s`` apart: client wall percentiles and in-ingress means (ms)."""
    before = _sums(client.get(f"{url}/metrics", headers=headers).text)
    lat = []
    for i in range(hooks):
        t = time.perf_counter()
        r = client.post(f"{url}/hook?agent=claude-code", content=payload(i), headers=headers)
        lat.append(time.perf_counter() - t)
        if r.status_code != 202:
            raise RuntimeError(f"{label}: /hook answered {r.status_code}: {r.text[:300]}")
        if gap_s:
            time.sleep(gap_s)
    after = _sums(client.get(f"{url}/metrics", headers=headers).text)
    row: dict[str, Any] = {"run": label, "hooks": hooks, "gap_ms": gap_s * 1000,
                           "wall_p50_ms": pct(lat, 50) * 1000, "wall_p90_ms": pct(lat, 90) * 1000,
                           "wall_p99_ms": pct(lat, 99) * 1000}
    for key in SUMS:
        ds, dn = after[key][0] - before[key][0], after[key][1] - before[key][1]
        row[f"mean_{key}"] = ds / dn * 1000 if dn else 0.0
    return row


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the sequence of runs; print the table; write ``bench/results/hook_wait-*.json``."""
    from aimem_testing.stack import LocalStack

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hooks", type=int, default=300)
    ap.add_argument("--gap-ms", type=float, default=10.0)
    args = ap.parse_args(argv)
    gap = args.gap_ms / 1000
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="aimem-bench-wait-") as tmp:
        tmp_path = Path(tmp)
        with LocalStack(tmp_path / "data", tmp_path / "logs", {"AIMEM_INGRESS__WORKERS": "1"}) as stack:
            time.sleep(1.0)
            procs = stack_processes(stack.data_dir)
            url = stack.url("ingress")
            headers = {"Authorization": f"Bearer {stack.token}", "Content-Type": "application/json"}
            others = [pid for name, pid in procs.items() if name in ("query", "mcp-gateway", "maintainer")]
            with httpx.Client(timeout=30) as client:
                for _ in range(50):  # warm the connection and the route
                    client.post(f"{url}/hook?agent=claude-code", content=payload(0), headers=headers)
                rows.append(one_run(client, url, headers, "every service running", args.hooks, gap))
                paused: list[int] = []
                try:
                    for pid in others:
                        os.kill(pid, signal.SIGSTOP)
                        paused.append(pid)
                    rows.append(one_run(client, url, headers, "ingress + nats-server + writer", args.hooks, gap))
                    os.kill(procs["writer"], signal.SIGSTOP)
                    paused.append(procs["writer"])
                    rows.append(one_run(client, url, headers, "ingress + nats-server (writer stopped)",
                                        min(args.hooks, 100), gap))
                finally:
                    for pid in paused:
                        os.kill(pid, signal.SIGCONT)
                time.sleep(2.0)  # the writer catches up
                rows.append(one_run(client, url, headers, "every service running, again", args.hooks, gap))
                rows.append(one_run(client, url, headers, "every service running, back to back", args.hooks, 0.0))
                health = []
                for _ in range(200):
                    t = time.perf_counter()
                    client.get(f"{url}/healthz")
                    health.append(time.perf_counter() - t)
    result = {"rows": rows, "healthz_p50_ms": pct(health, 50) * 1000, "healthz_p99_ms": pct(health, 99) * 1000}
    m = machine_info()
    print(f"{m['cpu']} x{m['cores']}, load average {m['loadavg']}, commit {m['commit']}")
    print(table(rows))
    print(f"/healthz through the same client: p50 {result['healthz_p50_ms']:.2f} ms, p99 {result['healthz_p99_ms']:.2f} ms")
    print(f"results: {write_result('hook_wait', result)}")
    return result


if __name__ == "__main__":
    main()
