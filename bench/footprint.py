"""Stack cold start and idle memory: ``aimem up`` → every /healthz 200, then RSS per process.

Cold start is measured from spawning ``aimem up`` (fresh data dir: the writer also creates
the DB and the wiki repo) to the last ``/healthz`` answering 200. RSS is read from
``/proc/<pid>/status`` (VmRSS) after ``--settle`` seconds idle, for the supervisor, NATS and
each service. Usage::

    python -m bench.footprint [--runs 3] [--settle 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from aimem_common.config import SERVICE_MODULES
from bench.common import table, write_result


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def stack_processes(data_dir: Path) -> dict[str, int]:
    """Map process label → pid for everything whose cmdline/environment names ``data_dir``."""
    out: dict[str, int] = {}
    needle = str(data_dir).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        text = b" ".join(cmd).decode(errors="replace")
        if needle not in env and needle not in b" ".join(cmd):
            continue
        if "nats-server" in text:
            out["nats-server"] = int(entry.name)
        elif " up " in f" {text} " and "aimem_cli" in text:
            out["aimem up (supervisor)"] = int(entry.name)
        else:
            for label, mod in SERVICE_MODULES.items():
                if mod in text:
                    out[label] = int(entry.name)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--settle", type=float, default=5.0)
    args = ap.parse_args(argv)
    from aimem_testing.stack import LocalStack

    starts, rss_rows = [], []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="aimem-footprint-") as tmp:
            stack = LocalStack(Path(tmp) / "data", Path(tmp) / "logs")
            t0 = time.perf_counter()
            stack.start(timeout_s=120)
            starts.append(time.perf_counter() - t0)
            try:
                if i == args.runs - 1:
                    time.sleep(args.settle)
                    procs = stack_processes(stack.data_dir)
                    rss_rows = [{"process": k, "rss_mib": rss_kib(pid) / 1024} for k, pid in sorted(procs.items())]
                    rss_rows.append({"process": "total", "rss_mib": sum(r["rss_mib"] for r in rss_rows)})
            finally:
                stack.stop()
    print(f"\nStack cold start (aimem up → all /healthz 200), {args.runs} runs: "
          f"median {statistics.median(starts):.2f} s, max {max(starts):.2f} s")
    print(table(rss_rows, ["process", "rss_mib"]))
    result = {"cold_start_s": starts, "cold_start_median_s": statistics.median(starts), "idle_rss": rss_rows}
    print(f"results: {write_result('footprint', result)}")
    return result


if __name__ == "__main__":
    main()
