"""Hook ingest: POST /hook on the whole stack under a Go load generator, beside /healthz.

Starts the stack with ``aimem up`` (its generated root token, every service, the ingress
with ``--ingress-workers N`` uvicorn workers) for each worker count asked, then runs, per
offered rate, two ``hey`` processes at once (a Go client: it does not eat the CPU the
server needs like a Python loop would): one posting Claude Code ``PostToolUse`` payloads to
``/hook`` with the root token at the rate, one reading ``/healthz`` at 50 req/s on the same
server — the reference: what the same server answers, under the same load, for a request
that does no work. Then ``max``: no rate limit, 64 connections, the sustained accepted rate,
once driven by ``wrk`` (a C client, ``wrk_post.lua``: a fraction of hey's CPU per request, which
the two cores share with the stack) and once by ``hey`` (the client of the earlier rounds).
After the runs it waits until the writer caught up and counts what reached SQLite: every
202 must be there (zero loss). Finally ``aimem hook`` (the real console script, a fresh
process each time): p50/p95 wall time.

Reported per rate: accepted (202/s), ``/hook`` and ``/healthz`` p50/p99 and their p99 ratio,
the 429/other shares, the ingress's CPU µs per accepted hook (``/proc``, every worker
process: load-independent; ``net``: less what the ingress spends per second serving only the
``/healthz`` reference and its own background work, measured first), the CPU of the other
parts per hook (nats-server, writer, the load generator: hey or wrk, less the ``/healthz`` hey's
own CPU measured with the reference), their sum (``pipeline``: what one hook costs this machine
end to end) and ``cores_bound``: the rate the machine's cores would
carry at that cost with nothing else running (cores / pipeline CPU per hook), the machine's
load average.

Targets on a 2-core machine: at 500 ev/s ``/hook`` p99 ≤ 2× ``/healthz`` p99, ≤ 250 µs ingress
CPU per hook; ≥ 3,000 ev/s accepted with zero loss.

``hey`` paces each connection with a ticker (``-q`` per connection), so a slow answer delays
that connection's next request: latencies under saturation are closed-loop figures.

    .venv/bin/python -m bench hook_ingest            # or: python -m bench.hook_ingest
        [--rates 500,1000,2000] [--seconds 10] [--ingress-workers 1,2] [--profile DIR]
    .venv/bin/python -m bench.hook_ingest --in-process   # where the ingress CPU goes (hook_inproc.py)

``--profile DIR`` records the ingress with py-spy (every worker) during the 500 ev/s run
(``DIR/ingress-w<N>-500.folded``, folded stacks). Needs ``hey`` (``apt-get install hey``); the
unthrottled step also runs with ``wrk`` when it is installed (``apt-get install wrk``).
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter
import io
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from aimem_common import config

try:
    from bench.common import cpu_seconds_of, machine_info, pct, table, write_result
    from bench.footprint import stack_processes
except ImportError:  # run as a plain script
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.common import cpu_seconds_of, machine_info, pct, table, write_result
    from bench.footprint import stack_processes

CWD = "/home/dev/projects/acme-api"
HEALTHZ_RATE = 50
REFERENCE_S = 5.0  # the /healthz-only run that measures the ingress's cost outside hooks
SPREAD = 8  # hey processes per paced rate, their tickers out of phase (_hey_spread)
MAX_CLIENTS = ("wrk", "hey")  # the unthrottled step, once with each client found on PATH


def payload(i: int) -> bytes:
    return json.dumps({
        "session_id": f"bench-{i % 64}", "cwd": CWD, "hook_event_name": "PostToolUse",
        "transcript_path": f"/home/dev/.claude/projects/x/bench-{i % 64}.jsonl", "tool_name": "Bash",
        "tool_input": {"command": f"pytest tests/test_{i % 97}.py -x"},
        "tool_response": {"stdout": f"collected {i % 40} items ... passed " + "ok " * 40, "stderr": ""},
    }).encode()


def _hey(url: str, *, rate: float | None, seconds: float, conns: int, body: Path | None = None,
         token: str | None = None) -> subprocess.Popen:
    cmd = ["hey", "-z", f"{seconds}s", "-c", str(conns), "-o", "csv", "-disable-compression"]
    if rate:
        cmd += ["-q", f"{rate / conns:.3f}"]
    if body is not None:
        cmd += ["-m", "POST", "-T", "application/json", "-D", str(body)]
    if token:
        cmd += ["-H", f"Authorization: Bearer {token}"]
    return subprocess.Popen(cmd + [url], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


WRK_SCRIPT = Path(__file__).with_name("wrk_post.lua")


def _wrk(url: str, *, seconds: float, conns: int, body: Path, token: str | None, ids: Path) -> subprocess.Popen:
    """The unthrottled step's C client (``wrk_post.lua``): one thread, ``conns`` connections; the
    cmd id of every 202 it read is written to ``ids``."""
    cmd = ["wrk", "-t1", "-c", str(conns), "-d", f"{seconds:g}s", "-s", str(WRK_SCRIPT), url, "--",
           str(body), token or "-", str(ids)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _parse_wrk(out: bytes) -> dict[str, Any]:
    """wrk's last line (``wrk_post.lua``'s ``done``) → statuses and p50/p99 in ms (every answer)."""
    res = json.loads(out.decode().strip().splitlines()[-1])
    return {"statuses": {int(k): v for k, v in res["statuses"].items()},
            "p50_ms": res["p50_us"] / 1000, "p99_ms": res["p99_us"] / 1000,
            "socket_errors": res["socket_errors"] + res["timeouts"]}


def _hey_spread(url: str, *, rate: int, seconds: float, conns: int, procs: int, body: Path | None = None,
                token: str | None = None) -> list[subprocess.Popen]:
    """``rate`` over ``conns`` connections as ``procs`` hey processes whose tickers are out of phase.

    One hey process starts every connection's ticker at the same instant, so ``-q`` per
    connection offers the rate as ``rate / conns`` bursts a second of ``conns`` requests at
    once (41 hooks together, 12 times a second at 500 ev/s). Agents do not fire in lockstep:
    here process ``i`` starts ``i / procs`` of a tick later, which spreads the same rate over
    ``procs`` times as many, smaller bursts.
    """
    procs = max(1, min(procs, conns))
    tick_s = conns / rate  # one connection's period
    out = []
    for i in range(procs):
        c = conns // procs + (1 if i < conns % procs else 0)
        if i:
            time.sleep(tick_s / procs)
        out.append(_hey(url, rate=rate * c / conns, seconds=seconds, conns=c, body=body, token=token))
    return out


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
    """``pid`` and its descendants (uvicorn's workers)."""
    out = [pid]
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        kids = []
    for k in kids:
        out += _tree_pids(int(k))
    return out


def _children_cpu() -> float:
    """CPU seconds of this process's reaped children (the ``hey`` runs)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _sys_cpu(pids: list[int]) -> float:
    """System (kernel) CPU seconds of ``pids``: the socket and scheduler work of a request."""
    total = 0.0
    for p in pids:
        try:
            total += int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[12])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


class Parts:
    """The pids of the stack's parts whose CPU a step reports (ingress: all its workers)."""

    def __init__(self, data_dir: Path):
        procs = stack_processes(data_dir)
        self.ingress = _tree_pids(procs["ingress"])
        self.others = {name: [procs[name]] for name in ("nats-server", "writer") if name in procs}

    def cpu(self) -> dict[str, float]:
        return {"ingress": cpu_seconds_of(self.ingress), "ingress_sys": _sys_cpu(self.ingress),
                **{k: cpu_seconds_of(v) for k, v in self.others.items()}, "hey": _children_cpu()}


def _spy(pids: list[int], seconds: float, out: Path) -> subprocess.Popen:
    """py-spy on the ingress (its uvicorn master and workers: ``--subprocesses``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "-p", str(pids[0]),
                             "--subprocesses", "-d", str(int(seconds)), "-r", "250", "-f", "raw",
                             "--nonblocking", "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def histogram_totals(url: str, token: str | None, name: str) -> tuple[float, float]:
    """``(sum, count)`` of the histogram ``name`` on ``url``'s ``/metrics`` (every label set);
    ``(0, 0)`` when it cannot be read."""
    try:
        text = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"} if token else {},
                         timeout=5).text
    except httpx.HTTPError:
        return 0.0, 0.0
    total = count = 0.0
    for line in text.splitlines():
        if line.startswith(f"{name}_sum"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith(f"{name}_count"):
            count += float(line.rsplit(" ", 1)[1])
    return total, count


def writer_batches(url: str, token: str | None) -> tuple[float, float]:
    """``(commands, batches)`` the writer applied so far (its ``aimem_writer_batch_size``)."""
    return histogram_totals(url, token, "aimem_writer_batch_size")


def ingress_messages(url: str, token: str | None) -> tuple[float, float]:
    """``(commands, messages)`` the ingress (the worker that answers) published so far
    (``aimem_bus_message_commands``: a bundle of gathered hooks is one message)."""
    return histogram_totals(url, token, "aimem_bus_message_commands")


@dataclass(frozen=True)
class Reference:
    """CPU seconds per second while the stack serves only the ``/healthz`` reference: the
    ingress's (its background work included), and the ``/healthz`` hey's own."""

    ingress_per_s: float
    client_per_s: float


def reference_cpu_per_s(port: int, parts: Parts, seconds: float = REFERENCE_S) -> Reference:
    """Measure ``Reference`` over ``seconds`` of the ``/healthz`` reference alone."""
    cpu0, t0 = parts.cpu(), time.perf_counter()
    health = _hey(f"http://127.0.0.1:{port}/healthz", rate=HEALTHZ_RATE, seconds=seconds, conns=2)
    health.communicate()
    cpu1, elapsed = parts.cpu(), time.perf_counter() - t0
    return Reference((cpu1["ingress"] - cpu0["ingress"]) / elapsed, (cpu1["hey"] - cpu0["hey"]) / elapsed)


def load_step(port: int, token: str | None, rate: int | None, seconds: float, conns: int, body: Path,
              parts: Parts, reference: Reference, profile: Path | None = None,
              writer_url: str | None = None, spread: int = 1, client: str = "hey") -> dict[str, Any]:
    """One run: ``/hook`` at ``rate`` (None = as fast as ``conns`` connections go) beside ``/healthz``;
    a paced run's connections in ``spread`` hey processes out of phase (``_hey_spread``). An
    unthrottled run may use ``client="wrk"`` instead of hey (``_wrk``: the same body and
    connections, a fraction of hey's CPU per request, latencies over every answer)."""
    spy = _spy(parts.ingress, seconds, profile) if profile is not None else None
    applied0 = writer_batches(writer_url, token) if writer_url else (0.0, 0.0)
    base = f"http://127.0.0.1:{port}"
    published0 = ingress_messages(base, token)
    load0, cpu0, t0 = os.getloadavg()[0], parts.cpu(), time.perf_counter()
    health = _hey(f"{base}/healthz", rate=HEALTHZ_RATE, seconds=seconds, conns=2)
    url = f"{base}/hook?agent=claude-code"
    if rate:
        hooks = _hey_spread(url, rate=rate, seconds=seconds, conns=conns, procs=spread, body=body, token=token)
    elif client == "wrk":
        hooks = [_wrk(url, seconds=seconds, conns=conns, body=body, token=token, ids=body.with_name("wrk-ids.txt"))]
    else:
        hooks = [_hey(url, rate=None, seconds=seconds, conns=conns, body=body, token=token)]
    outs = [h.communicate() for h in hooks]
    health_out, _ = health.communicate()
    elapsed = time.perf_counter() - t0
    cpu = {k: v - cpu0[k] for k, v in parts.cpu().items()}
    applied = writer_batches(writer_url, token) if writer_url else (0.0, 0.0)
    batches = applied[1] - applied0[1]
    published = ingress_messages(base, token)
    messages = published[1] - published0[1]
    if spy is not None:
        spy.wait(60)
    for h, (_, err) in zip(hooks, outs):
        if h.returncode:
            raise RuntimeError(f"{client if not rate else 'hey'} failed: {err.decode()[-500:]}")
    socket_errors = 0
    accepted_ids: list[str] = []
    if client == "wrk" and not rate:
        got = _parse_wrk(outs[0][0])
        statuses, socket_errors = got["statuses"], got["socket_errors"]
        hook_p50, hook_p99 = got["p50_ms"], got["p99_ms"]
        accepted_ids = body.with_name("wrk-ids.txt").read_text().split()
    else:
        lat, counts = [], Counter()
        for out, _ in outs:
            part_lat, part_statuses = _parse(out)
            lat += part_lat
            counts.update(part_statuses)
        statuses = dict(counts)
        hook_p50, hook_p99 = pct(lat, 50) * 1000, pct(lat, 99) * 1000
    hlat, _ = _parse(health_out)
    sent = sum(statuses.values())
    accepted = statuses.get(202, 0)
    per_hook = 1e6 / max(1, accepted)
    # the load generator's own CPU: the children's, less what the /healthz hey takes meanwhile
    loadgen = max(0.0, cpu["hey"] - reference.client_per_s * elapsed)
    pipeline = cpu["ingress"] + cpu.get("nats-server", 0.0) + cpu.get("writer", 0.0) + loadgen
    health_p99 = pct(hlat, 99) * 1000
    return {
        "rate": rate or "max", "arrivals": "closed loop" if not rate else ("in phase" if spread == 1 else
                                                                            f"{spread} phases"),
        "client": "hey" if rate else client,
        "connections": conns, "sent": sent, "accepted": accepted, "socket_errors": socket_errors,
        "accepted_per_s": accepted / elapsed,
        "hook_p50_ms": hook_p50, "hook_p99_ms": hook_p99,
        "healthz_p50_ms": pct(hlat, 50) * 1000, "healthz_p99_ms": health_p99,
        "p99_ratio": hook_p99 / health_p99 if health_p99 else 0.0,
        "share_429": statuses.get(429, 0) / max(1, sent),
        "other_errors": sent - accepted - statuses.get(429, 0),
        "statuses": statuses,
        "ingress_cpu_us_per_hook": cpu["ingress"] * per_hook,
        "ingress_cpu_us_per_hook_net": max(0.0, cpu["ingress"] - reference.ingress_per_s * elapsed) * per_hook,
        "ingress_cpu_share": cpu["ingress"] / elapsed,
        "ingress_sys_share_of_cpu": cpu["ingress_sys"] / max(1e-9, cpu["ingress"]),
        "nats_cpu_us_per_hook": cpu.get("nats-server", 0.0) * per_hook,
        "writer_cpu_us_per_hook": cpu.get("writer", 0.0) * per_hook,
        "writer_mean_batch": (applied[0] - applied0[0]) / batches if batches else 0.0,  # what it applied meanwhile
        # hooks per JetStream message the ingress published (gathered into bundles; one worker's view)
        "ingress_mean_bundle": (published[0] - published0[0]) / messages if messages else 0.0,
        "loadgen_cpu_us_per_hook": loadgen * per_hook,  # hey or wrk, without the /healthz hey
        # everything a hook costs on this machine, and the rate its cores could carry at that cost
        "pipeline_cpu_us_per_hook": pipeline * per_hook,
        "cores_bound_ev_s": os.cpu_count() / pipeline * accepted if pipeline else 0.0,
        "cpu_share": {k: round(v / elapsed, 3) for k, v in cpu.items()},
        "accepted_ids": accepted_ids,  # the cmd ids of the 202s wrk read (run_stack checks them, then drops them)
        "seconds": round(elapsed, 2),
        "loadavg_1m": round((load0 + os.getloadavg()[0]) / 2, 2),
    }


def hook_walls(url: str, token: str | None, client_dir: Path, runs: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_DATA_DIR=str(client_dir), AIMEM_INGRESS_URL=url)
    if token:
        env["AIMEM_AUTH__TOKEN"] = token
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
    """Start one service (``writer`` or ``ingress``) alone on ``nats_url`` and wait for its
    ``/healthz`` (benches that need only those two, without a token)."""
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


def _stored(db_path: Path, expected: int, writer_alive, timeout_s: float = 300) -> int:
    """Observations in SQLite once the writer caught up to ``expected`` (or ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    got = 0
    while time.monotonic() < deadline:
        try:
            conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
            got = conn.execute("SELECT count(*) FROM observations").fetchone()[0]
            conn.close()
        except sqlite3.Error:
            got = 0
        if got >= expected:
            break
        if not writer_alive():
            raise RuntimeError(f"the stack stopped with {got}/{expected} stored")
        time.sleep(0.2)
    time.sleep(0.5)  # nothing more may arrive: a count above `expected` (and the unread) is a duplicate
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
    got = conn.execute("SELECT count(*) FROM observations").fetchone()[0]
    conn.close()
    return got


def _check_ids(db_path: Path, ids: list[str]) -> tuple[int, int]:
    """``(cmd ids of ``ids`` not stored, observations stored more than once)`` in SQLite."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
    try:
        stored = {r[0] for r in conn.execute("SELECT cmd_id FROM observations")}
        dupes = conn.execute("SELECT count(cmd_id) - count(DISTINCT cmd_id) FROM observations").fetchone()[0]
    finally:
        conn.close()
    return sum(1 for i in ids if i not in stored), dupes


def run_stack(workers: int, rates: list[int], seconds: float, conns: int, hook_runs: int,
              profile: Path | None = None, max_run: bool = True,
              env: dict[str, str] | None = None, spread: int = SPREAD) -> dict[str, Any]:
    """Every step on one fresh ``aimem up`` stack with ``workers`` ingress workers (``env``:
    more settings for the stack, e.g. ``AIMEM_WRITER__BATCH_LINGER_MS`` for an A/B)."""
    from aimem_testing.stack import LocalStack

    with tempfile.TemporaryDirectory(prefix="aimem-bench-hook-") as tmp:
        tmp_path = Path(tmp)
        body = tmp_path / "body.json"
        body.write_bytes(payload(1))
        with LocalStack(tmp_path / "data", tmp_path / "logs", {**(env or {}), "AIMEM_INGRESS__WORKERS": str(workers)}) as stack:
            time.sleep(0.5 * workers)  # every worker up
            parts = Parts(stack.data_dir)
            port = int(stack.url("ingress").rsplit(":", 1)[1])
            token = stack.token
            warm = load_step(port, token, 200, 2.0, 4, body, parts, Reference(0.0, 0.0))
            reference = reference_cpu_per_s(port, parts)
            rows, accepted, unread = [], warm["accepted"], 0
            # (rate, hey processes, client): each paced rate with its connections out of phase;
            # 500 ev/s also in phase (one hey process: bursts of every connection at once) beside
            # it; unthrottled with wrk (the lighter client) and with hey (as in earlier rounds)
            steps: list[tuple[int | None, int, str]] = [(r, spread, "hey") for r in rates]
            if 500 in rates and spread > 1:
                steps.insert(rates.index(500) + 1, (500, 1, "hey"))
            if max_run:
                steps += [(None, 1, c) for c in MAX_CLIENTS if shutil.which(c)]
            for rate, procs, client in steps:
                spy_to = (profile / f"ingress-w{workers}-{rate}.folded"
                          if profile is not None and rate == 500 and procs == spread else None)
                row = load_step(port, token, rate, seconds, conns if rate is None else max(8, min(conns, rate // 12)),
                                body, parts, reference, spy_to, stack.url("writer"), procs, client)
                accepted += row["accepted"]
                # wrk stops reading when its time is up: each connection may hold a request the
                # ingress still stores (and answers 202 to nobody)
                unread += conns if client == "wrk" and rate is None else 0
                rows.append(row)
                time.sleep(1.0)
            db_path = config.load(stack.data_dir, environ={}, check_writable=False).db_path
            got = _stored(db_path, accepted, lambda: stack.proc is not None and stack.proc.poll() is None)
            ids = [i for row in rows for i in row.pop("accepted_ids")]
            missing, duplicates = _check_ids(db_path, ids)
            hook = hook_walls(stack.url("ingress"), token, tmp_path / "client", hook_runs) if hook_runs else None
    return {"ingress_workers": workers, "rates": rows, "accepted_total": accepted, "stored_total": got,
            "lost": accepted - got if got < accepted else 0, "unread_max": unread,
            "wrk_ids_checked": len(ids), "wrk_ids_missing": missing, "duplicate_cmd_ids": duplicates,
            # every counted 202 stored (each one wrk read, by its cmd id), none stored twice, and
            # nothing beyond what was sent but not read
            "zero_loss": accepted <= got <= accepted + unread and missing == 0 and duplicates == 0,
            "reference_ingress_cpu_per_s": reference.ingress_per_s,
            "reference_client_cpu_per_s": reference.client_per_s, "hook_client": hook, "auth": bool(token)}


def in_process() -> dict[str, Any]:
    """``--in-process``: CPU per hook of the route, without its publish, and of the bare PubAck."""
    try:
        from bench import hook_inproc
    except ImportError:
        import hook_inproc  # run as a plain script
    info = machine_info()
    print(f"{info['cpu']}, {info['cores']} cores, Python {info['python']}, commit {info['commit']}; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    res = hook_inproc.run(payload)
    print("\n### the ingress app in process (no HTTP server), min CPU per hook over the rounds\n"
          + table(res["summary"], ["variant", "concurrency", "cpu_us_per_hook_min", "sys_us_per_hook",
                                   "cpu_us_per_hook_all", "hooks_per_s_median", "accepted", "hooks"]))
    g = res["gc"]
    print(f"a full collection of the started app: {g['full_collection_ms']} ms; with its "
          f"{g['frozen_objects']:,} start-up objects frozen: {g['full_collection_ms_frozen']} ms")
    res["loadavg_end"] = os.getloadavg()
    print(f"written to {write_result('hook_inproc', res)}")
    return res


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="500,1000,2000")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--conns", type=int, default=64, help="connections of the unthrottled (max) run")
    ap.add_argument("--hook-runs", type=int, default=30)
    ap.add_argument("--ingress-workers", default="1,2", help="comma-separated: one fresh stack per count")
    ap.add_argument("--no-max", action="store_true", help="skip the unthrottled run")
    ap.add_argument("--profile", type=Path, default=None, help="py-spy the ingress at 500 ev/s into DIR")
    ap.add_argument("--in-process", action="store_true",
                    help="instead of the stack: the ingress app in this process, one stage taken away at a time "
                         "(bench/hook_inproc.py)")
    ap.add_argument("--spread", type=int, default=SPREAD,
                    help="hey processes out of phase per paced rate (1: every connection's ticker in phase)")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting for the stack under test (repeatable), e.g. AIMEM_WRITER__BATCH_LINGER_MS=0")
    args = ap.parse_args(argv)
    env = dict(kv.split("=", 1) for kv in args.env)
    if args.in_process:
        return in_process()
    if shutil.which("hey") is None:
        raise SystemExit("hook_ingest needs the hey load generator: apt-get install -y hey")
    rates = [int(r) for r in args.rates.split(",") if r]
    info = machine_info()
    print(f"{info['cpu']}, {info['cores']} cores, {info['mem_gib']} GiB, Python {info['python']}, "
          f"commit {info['commit']}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    stacks = []
    for i, workers in enumerate(int(w) for w in args.ingress_workers.split(",") if w):
        res = run_stack(workers, rates, args.seconds, args.conns, args.hook_runs if i == 0 else 0,
                        args.profile, not args.no_max, env, args.spread)
        stacks.append(res)
        print(f"\n### ingress workers {workers} (aimem up, root token {'on' if res['auth'] else 'off'}; "
              f"ingress alone on /healthz + background: {res['reference_ingress_cpu_per_s'] * 1000:.1f} ms CPU/s)")
        print(table(res["rates"], ["rate", "arrivals", "client", "connections", "sent", "accepted_per_s", "hook_p50_ms", "hook_p99_ms",
                                   "healthz_p50_ms", "healthz_p99_ms", "p99_ratio", "share_429", "other_errors",
                                   "ingress_cpu_us_per_hook", "ingress_cpu_us_per_hook_net", "ingress_cpu_share",
                                   "ingress_sys_share_of_cpu", "nats_cpu_us_per_hook", "writer_cpu_us_per_hook", "writer_mean_batch",
                                   "ingress_mean_bundle",
                                   "loadgen_cpu_us_per_hook", "pipeline_cpu_us_per_hook", "cores_bound_ev_s", "loadavg_1m"]))
        print(f"stored {res['stored_total']} / accepted {res['accepted_total']} (lost {res['lost']}, "
              f"zero loss: {res['zero_loss']}; up to {res['unread_max']} more may be stored: requests in "
              f"flight when wrk stopped reading); of the {res['wrk_ids_checked']} cmd ids wrk read, "
              f"{res['wrk_ids_missing']} not stored; {res['duplicate_cmd_ids']} stored twice")
        if h := res["hook_client"]:
            print(f"aimem hook wall time over {h['runs']} runs: p50 {h['p50_ms']:.1f} ms, p95 {h['p95_ms']:.1f} ms, "
                  f"max {h['max_ms']:.1f} ms")
    scaling = [{"ingress_workers": s["ingress_workers"], "client": r["client"],
                **{k: r[k]
                   for k in ("accepted_per_s", "ingress_cpu_us_per_hook", "ingress_cpu_share", "nats_cpu_us_per_hook",
                             "writer_cpu_us_per_hook", "writer_mean_batch", "ingress_mean_bundle", "loadgen_cpu_us_per_hook",
                             "pipeline_cpu_us_per_hook",
                             "cores_bound_ev_s", "share_429", "loadavg_1m")},
                "zero_loss": s["zero_loss"]} for s in stacks for r in s["rates"] if r["rate"] == "max"]
    if not args.no_max:
        print("\n### unthrottled, by ingress workers\n" + table(scaling))
    res = {"stacks": stacks, "scaling": scaling, "seconds_per_rate": args.seconds, "max_connections": args.conns,
           "healthz_rate": HEALTHZ_RATE, "env": env, "loadavg_end": os.getloadavg()}
    print(f"written to {write_result('hook_ingest', res)}")
    return res


if __name__ == "__main__":
    main()
