"""202 → visible to readers: how long after ingress accepts a hook can a reader see it?

Runs the whole stack (``aimem up``), posts Claude Code ``UserPromptSubmit`` hooks at a fixed
open-loop rate, and for every accepted event polls a read-only SQLite connection (what the
query and MCP services read) for its ``cmd_id`` every 2 ms. Reports p50/p95/p99/max of the
visibility latency per rate, plus the writer's throughput under that load. Usage::

    python -m bench.visibility [--rates 500,1000] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import pct, table, write_result


async def run_rate(ingress: str, db_path: Path, rate: int, seconds: float,
                   headers: dict[str, str] | None = None) -> dict[str, Any]:
    from aimem_common.db.connect import open_reader

    reader = open_reader(db_path, wait_s=30)
    accepted: dict[str, float] = {}  # cmd_id -> time of the 202
    seen: dict[str, float] = {}
    n = int(rate * seconds)
    limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)
    async with httpx.AsyncClient(timeout=5, limits=limits, headers=headers) as client:

        async def one(i: int, due: float) -> None:
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            payload = {"session_id": f"vis-{rate}", "cwd": "/bench/vis", "transcript_path": "/bench/vis.jsonl",
                       "hook_event_name": "UserPromptSubmit", "prompt": f"visibility probe {rate} {i}"}
            r = await client.post(f"{ingress}/hook", params={"agent": "claude-code"}, json=payload)
            if r.status_code == 202:
                accepted[r.json()["accepted"]] = time.perf_counter()

        async def poll() -> None:
            while len(seen) < n:
                pending = [c for c in list(accepted) if c not in seen]
                if pending:
                    now = time.perf_counter()
                    for i in range(0, len(pending), 500):
                        chunk = pending[i:i + 500]
                        q = f"SELECT cmd_id FROM observations WHERE cmd_id IN ({','.join('?' * len(chunk))})"
                        for (cmd,) in reader.execute(q, chunk):
                            seen[cmd] = now
                await asyncio.sleep(0.002)

        t0 = time.perf_counter() + 0.05
        poller = asyncio.create_task(poll())
        await asyncio.gather(*(one(i, t0 + i / rate) for i in range(n)))
        try:
            await asyncio.wait_for(poller, 60)
        except asyncio.TimeoutError:
            poller.cancel()
    reader.close()
    lat = [(seen[c] - accepted[c]) * 1000 for c in accepted if c in seen]
    return {"rate": rate, "accepted": len(accepted), "visible": len(lat), "p50_ms": pct(lat, 50),
            "p95_ms": pct(lat, 95), "p99_ms": pct(lat, 99), "max_ms": max(lat) if lat else 0.0}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="500,1000")
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args(argv)
    from aimem_testing.stack import LocalStack

    rows = []
    with tempfile.TemporaryDirectory(prefix="aimem-vis-") as tmp:
        with LocalStack(Path(tmp) / "data", Path(tmp) / "logs") as stack:
            db = Path(tmp) / "data" / "db" / "memory.sqlite"
            for rate in (int(r) for r in args.rates.split(",")):
                rows.append(asyncio.run(run_rate(stack.url("ingress"), db, rate, args.seconds, stack.headers)))
    print("\n202 → visible to readers (read-only SQLite, what query/MCP read)")
    print(table(rows, ["rate", "accepted", "visible", "p50_ms", "p95_ms", "p99_ms", "max_ms"]))
    result = {"rows": rows, "seconds_per_rate": args.seconds}
    print(f"results: {write_result('visibility', result)}")
    return result


if __name__ == "__main__":
    main()
