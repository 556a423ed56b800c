"""Hook auth: what a credential costs on ``POST /hook`` — the root token vs a user API key.

Starts the whole stack with ``aimem up`` (its generated root token), creates a user with a
write grant on the bench project and an API key, then posts the same Claude Code
``PostToolUse`` payload with ``hey`` at a fixed rate, once per credential. A user key is
looked up on the ingress's read pool (its hash, its grants) and the event's project is
resolved there too; the root token is a constant-time compare. Reported per credential:
accepted (202/s), p50/p99 wall, the ingress's CPU µs per request (``/proc``: load-independent)
and the machine's load average.

    .venv/bin/python -m bench hook_auth      # or: python -m bench.hook_auth [--rate 300] [--seconds 10]

Needs ``hey`` (``apt-get install hey``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

try:
    from bench.common import cpu_seconds, pct, table, write_result
    from bench.footprint import stack_processes
    from bench.hook_ingest import _parse, payload
except ImportError:  # run as a plain script
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.common import cpu_seconds, pct, table, write_result
    from bench.footprint import stack_processes
    from bench.hook_ingest import _parse, payload


def _user_key(stack) -> str:
    """A user with a write grant on every project named ``acme-api``; its new API key."""
    with httpx.Client(base_url=stack.url("query"), headers=stack.headers, timeout=30) as c:
        c.post("/admin/users", json={"name": "bench"}).raise_for_status()
        c.put("/admin/grants", json={"user": "bench", "workspace": "*", "project": "acme-api",
                                     "can_read": True, "can_write": True}).raise_for_status()
        return c.post("/admin/api-keys", json={"user": "bench"}).json()["key"]


def _hey_with(url: str, header: str, *, rate: int, seconds: float, body: Path) -> tuple[bytes, bytes, int]:
    """``hey`` posting ``body`` with one extra header at ``rate``/s (8 connections); its CSV."""
    cmd = ["hey", "-z", f"{seconds}s", "-c", "8", "-q", f"{rate / 8:.3f}", "-o", "csv", "-disable-compression",
           "-m", "POST", "-T", "application/json", "-D", str(body), "-H", header, url]
    proc = subprocess.run(cmd, capture_output=True)
    return proc.stdout, proc.stderr, proc.returncode


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args(argv)
    if shutil.which("hey") is None:
        raise SystemExit("hook_auth needs hey (apt-get install hey)")
    from aimem_testing.stack import LocalStack

    rows = []
    with tempfile.TemporaryDirectory(prefix="aimem-hook-auth-") as tmp:
        body = Path(tmp) / "body.json"
        body.write_bytes(payload(1))
        with LocalStack(Path(tmp) / "data", Path(tmp) / "logs") as stack:
            pid = stack_processes(stack.data_dir)["ingress"]
            key = _user_key(stack)
            url = stack.url("ingress") + "/hook?agent=claude-code"
            for label, credential in (("root token", stack.token), ("user API key", key)):
                cpu0 = cpu_seconds(pid)
                out, err, rc = _hey_with(url, f"Authorization: Bearer {credential}", rate=args.rate,
                                         seconds=args.seconds, body=body)
                if rc != 0:
                    raise RuntimeError(f"hey failed: {err.decode()[-500:]}")
                cpu = cpu_seconds(pid) - cpu0
                lat, statuses = _parse(out)
                n = sum(statuses.values())
                rows.append({"credential": label, "accepted_per_s": round(statuses.get(202, 0) / args.seconds, 1),
                             "other": {k: v for k, v in statuses.items() if k != 202} or "-",
                             "p50_ms": round(pct(lat, 50) * 1000, 2), "p99_ms": round(pct(lat, 99) * 1000, 2),
                             "cpu_us_per_req": round(cpu / max(n, 1) * 1e6, 1),
                             "load_1m": round(os.getloadavg()[0], 2)})
    print(f"\nPOST /hook at {args.rate}/s for {args.seconds:g} s, by credential (ingress CPU per request)")
    print(table(rows, ["credential", "accepted_per_s", "other", "p50_ms", "p99_ms", "cpu_us_per_req", "load_1m"]))
    result = {"rate": args.rate, "seconds": args.seconds, "rows": rows}
    print(f"results: {write_result('hook_auth', result)}")
    return result


if __name__ == "__main__":
    main()
