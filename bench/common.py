"""Shared helpers of the benchmarks: machine info, percentiles, tables, result files."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def reset_peak_rss() -> bool:
    """Start this process's peak resident set afresh (Linux: ``5`` into ``/proc/self/clear_refs``
    resets ``VmHWM``), so that ``peak_rss_mb`` covers only what runs after it, not a seeding
    phase before it. False where the kernel does not offer it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    """This process's peak resident set in MiB since it started or since ``reset_peak_rss``
    (``VmHWM`` of ``/proc/self/status``; ``ru_maxrss`` where that is missing)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_mhz() -> float | None:
    """The first core's clock as ``/proc/cpuinfo`` reports it (MHz), or None."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                return round(float(line.split(":", 1)[1]), 0)
    except (OSError, ValueError):
        pass
    return None


def python_speed_mit_s(iterations: int = 2_000_000) -> float:
    """Million iterations per CPU second of a fixed pure-Python loop (best of 3): the same code
    on two VMs of one name can differ by more than the change being measured, and this says
    by how much (~0.2 s)."""
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        total = 0
        for i in range(iterations):
            total += i & 7
        best = min(best, time.process_time() - t0)
    return round(iterations / best / 1e6, 2) if best > 0 else 0.0


def machine_info() -> dict[str, Any]:
    """CPU model/count, memory, OS, Python, the commit, the load average — printed beside every figure."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        kb = int(next(l for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal")).split()[1])
        mem_gib = round(kb / 1024 / 1024, 1)
    except (OSError, StopIteration, ValueError):
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "unknown"
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu_mhz": cpu_mhz(),
        "python_speed_mit_s": python_speed_mit_s(),
        "loadavg": [round(v, 2) for v in os.getloadavg()],  # 1, 5, 15 min at the time of writing
        "commit": commit,
        "cpu": cpu,
        "cores": os.cpu_count(),
        "mem_gib": mem_gib,
        "os": platform.platform(),
        "python": platform.python_version(),
        "loadavg_1m": round(os.getloadavg()[0], 2),  # 4 engineers share this box: wall figures need it
    }


def cpu_seconds(pid: int) -> float:
    """user+system CPU seconds of process ``pid`` (Linux ``/proc``), load-independent."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds_of(pids: list[int]) -> float:
    """Summed user+system CPU seconds of ``pids``; a process that has exited counts 0."""
    total = 0.0
    for p in pids:
        try:
            total += cpu_seconds(p)
        except OSError:
            pass
    return total


def pct(values: list[float], q: float) -> float:
    """Return the ``q``-th percentile (0–100, nearest-rank) of ``values`` (0.0 if empty)."""
    if not values:
        return 0.0
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(q / 100 * len(s) + 0.5)) - 1))
    return s[k]


def table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    """Render ``rows`` as a GitHub markdown table (floats with 3 significant decimals)."""
    if not rows:
        return "(no rows)"
    cols = columns or list(rows[0])

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
        return str(v)

    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    out += ["| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(out)


def write_result(name: str, data: dict[str, Any]) -> Path:
    """Write ``bench/results/<name>-<timestamp>.json`` and ``<name>-latest.json``; return the path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"bench": name, "machine": machine_info(), **data}
    stamp = time.strftime("%Y%m%dT%H%M%S")
    path = RESULTS / f"{name}-{stamp}.json"
    text = json.dumps(payload, indent=2, ensure_ascii=False)
    path.write_text(text)
    (RESULTS / f"{name}-latest.json").write_text(text)
    return path
