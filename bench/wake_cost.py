"""What waking from idle costs this machine: the floor under a hook that arrives alone.

At 500 ev/s spread over many clients, each hook finds the ingress idle: the request wakes the
event loop, and so does its PubAck. This measures, in one process on uvloop, with nothing
else of aimem running:

* ``sleep``: an ``asyncio.sleep(gap)`` loop doing nothing else: CPU per wake-up (the
  kernel's timer, the scheduler and the VM's idle exit are charged to the process);
* ``sleep + work``: the same loop running a fixed pure-Python loop after each wake-up,
  against the same work back to back (gap 0): how much more the same Python costs when it
  runs right after an idle wake-up (cold caches);
* ``puback``: one JetStream publish and its PubAck on a real ``nats-server`` through the
  services' own ``PubAcks`` (``aimem_common.bus``), one every ``gap``, against back to back.

The ingress's CPU per hook at 500 ev/s (``hook_ingest``) is read against these figures.

    .venv/bin/python -m bench wake_cost        # or: python -m bench.wake_cost [--gap-ms 2] [-n 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nats
import uvloop

from aimem_common.bus import PubAcks
from aimem_common.natsserver import NatsServer

try:
    from bench.common import machine_info, table, write_result
except ImportError:  # run as a plain script
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.common import machine_info, table, write_result

WORK = 3000  # iterations of the pure-Python loop after each wake-up (~80 µs warm on a 2.6 GHz Xeon)
BODY = b"x" * 600  # about one hook envelope


def _work(n: int) -> int:
    x = 0
    for j in range(n):
        x += j
    return x


async def _sleep_loop(n: int, gap_s: float, work: int) -> float:
    """CPU µs per iteration of: sleep ``gap_s``, then ``work`` loop iterations."""
    c0 = time.process_time()
    for _ in range(n):
        await asyncio.sleep(gap_s)
        _work(work)
    return (time.process_time() - c0) / n * 1e6


async def _puback_loop(n: int, gap_s: float) -> dict[str, float]:
    """CPU µs per publish and the round trip's p50/p99 (µs), one publish every ``gap_s``."""
    with tempfile.TemporaryDirectory(prefix="aimem-wake-") as tmp, NatsServer(Path(tmp) / "store") as srv:
        nc = await nats.connect(srv.url, allow_reconnect=False)
        try:
            await nc.jetstream().add_stream(name="WAKE", subjects=["wake.>"])
            acks = PubAcks(nc)
            for i in range(50):  # warm: the reply subscription, the stream's first block
                await acks.publish("wake.x", BODY, headers={"Nats-Msg-Id": f"w{i}"}, timeout_s=5)
            lat = []
            c0 = time.process_time()
            for i in range(n):
                t0 = time.perf_counter()
                await acks.publish("wake.x", BODY, headers={"Nats-Msg-Id": f"m{i}"}, timeout_s=5)
                lat.append(time.perf_counter() - t0)
                if gap_s:
                    await asyncio.sleep(gap_s)
            cpu = (time.process_time() - c0) / n * 1e6
        finally:
            await nc.close()
    lat.sort()
    return {"cpu_us": cpu, "p50_us": lat[len(lat) // 2] * 1e6, "p99_us": lat[int(len(lat) * 0.99)] * 1e6}


def run(n: int, gap_ms: float) -> dict[str, Any]:
    gap = gap_ms / 1000
    rows = []
    for work in (0, WORK):
        idle = uvloop.run(_sleep_loop(n, gap, work))
        busy = uvloop.run(_sleep_loop(n, 0, work))
        rows.append({"case": "sleep" if not work else f"sleep + {work:,} loop iterations",
                     "after_idle_cpu_us": round(idle, 1), "back_to_back_cpu_us": round(busy, 1),
                     "extra_us": round(idle - busy, 1)})
    idle_ack, busy_ack = uvloop.run(_puback_loop(n, gap)), uvloop.run(_puback_loop(n, 0))
    rows.append({"case": "puback (publish + its PubAck)", "after_idle_cpu_us": round(idle_ack["cpu_us"], 1),
                 "back_to_back_cpu_us": round(busy_ack["cpu_us"], 1),
                 "extra_us": round(idle_ack["cpu_us"] - busy_ack["cpu_us"], 1),
                 "p50_us": round(idle_ack["p50_us"]), "p99_us": round(idle_ack["p99_us"]),
                 "back_to_back_p50_us": round(busy_ack["p50_us"])})
    return {"gap_ms": gap_ms, "n": n, "rows": rows}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=3000, help="iterations per case")
    ap.add_argument("--gap-ms", type=float, default=2.0, help="idle time before each wake-up (500 ev/s: 2 ms)")
    args = ap.parse_args(argv)
    info = machine_info()
    print(f"{info['cpu']}, {info['cores']} cores, Python {info['python']}, commit {info['commit']}")
    res = run(args.n, args.gap_ms)
    print(f"\n### CPU per iteration, after {args.gap_ms:g} ms idle against back to back (µs)\n"
          + table(res["rows"], ["case", "after_idle_cpu_us", "back_to_back_cpu_us", "extra_us", "p50_us", "p99_us",
                                "back_to_back_p50_us"]))
    print(f"written to {write_result('wake_cost', res)}")
    return res


if __name__ == "__main__":
    main()
