"""The HTTP server's own share of a hook: CPU per request of an ASGI app that does nothing
(reads the body, answers 202 with a small JSON) under uvicorn (uvloop + httptools, as the
services run) and under granian (ASGI, uvloop; only when ``granian`` is installed), driven
by ``hey`` with the hook bench's shape: 500 req/s on 41 connections, then unthrottled on 64.

Both servers run alternately, ``--rounds`` times, in the same minutes. Reported: requests
per second and the server's CPU µs per request (``/proc``, every process of the server:
granian's supervisor and worker). What the ingress spends per hook beyond this floor is
the app: guards, route, publish (``hook_ingest --in-process`` takes that apart).

    .venv/bin/python -m bench.server_floor [--rounds 2] [--seconds 8]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

try:
    from bench.common import cpu_seconds_of, machine_info, table, write_result
    from bench.hook_ingest import _tree_pids, payload
except ImportError:  # run as a plain script
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.common import cpu_seconds_of, machine_info, table, write_result
    from bench.hook_ingest import _tree_pids, payload

APP = '''
async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    body = b'{"accepted":"01JBENCHBENCHBENCHBENCHBENC"}'
    await send({"type": "http.response.start", "status": 202,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
'''


def _server_cmd(server: str, port: int) -> list[str]:
    if server == "uvicorn":
        return [sys.executable, "-m", "uvicorn", "floorapp:app", "--port", str(port), "--loop", "uvloop",
                "--http", "httptools", "--no-access-log", "--log-level", "warning"]
    return [sys.executable, "-m", "granian", "floorapp:app", "--interface", "asgi", "--port", str(port),
            "--loop", "uvloop", "--log-level", "warning", "--no-ws"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_run(server: str, workdir: Path, rate: int | None, seconds: float) -> dict[str, Any]:
    """Start ``server`` on the do-nothing app, drive it with ``hey``, stop it; the figures."""
    port = _free_port()
    proc = subprocess.Popen(_server_cmd(server, port), cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(1.0)  # every worker up
        conns = 41 if rate else 64
        cmd = ["hey", "-z", f"{seconds}s", "-c", str(conns), "-m", "POST", "-T", "application/json",
               "-D", str(workdir / "body.json"), "-disable-compression"]
        if rate:
            cmd += ["-q", f"{rate / conns:.3f}"]
        cpu0, t0 = cpu_seconds_of(_tree_pids(proc.pid)), time.perf_counter()
        out = subprocess.run(cmd + [f"http://127.0.0.1:{port}/hook"], capture_output=True, text=True, check=True).stdout
        cpu, wall = cpu_seconds_of(_tree_pids(proc.pid)) - cpu0, time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(20)
    found = re.search(r"\[202\]\s+(\d+) responses", out)
    done = int(found.group(1)) if found else 0
    return {"server": server, "rate": rate or "max", "connections": conns, "requests_per_s": done / wall,
            "cpu_us_per_request": cpu / max(1, done) * 1e6, "cpu_share": cpu / wall,
            "loadavg_1m": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args(argv)
    if shutil.which("hey") is None:
        raise SystemExit("server_floor needs the hey load generator: apt-get install -y hey")
    servers = ["uvicorn"] + (["granian"] if importlib.util.find_spec("granian") else [])
    info = machine_info()
    print(f"{info['cpu']}, {info['cores']} cores, Python {info['python']}, servers {', '.join(servers)}; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="aimem-bench-floor-") as tmp:
        work = Path(tmp)
        (work / "floorapp.py").write_text(APP)
        (work / "body.json").write_bytes(payload(1))
        for _ in range(args.rounds):
            for server in servers:
                for rate in (500, None):
                    rows.append(one_run(server, work, rate, args.seconds))
    print(table(rows))
    res = {"rows": rows, "servers": servers, "seconds": args.seconds, "loadavg_end": os.getloadavg()}
    print(f"written to {write_result('server_floor', res)}")
    return res


if __name__ == "__main__":
    main()
