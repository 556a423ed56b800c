"""Writer throughput: observations/s applied end to end by a real writer process.

Starts a tmp ``nats-server -js``, publishes N sanitized ``observation.append`` commands
(several sessions and two projects, ~300-byte bodies) into ``AIMEM_MUT``, then starts
``python -m aimem_writer`` and measures how fast it drains the backlog: fetch, one SQLite
transaction per batch (sessions upsert, observation + FTS, ingest key, ledger outbox),
commit, ledger append, ack. The rate is rows applied / seconds from the first applied row
to the last. Target: ≥ 6,000/s on the 2-core box. The writer starts behind (the whole
backlog is pending), so after its first fetch it applies ``--behind`` commands per transaction. The writer's own CPU time is
printed too (observations per CPU-second): on a shared, oversubscribed machine the
wall-clock rate measures the neighbours, the CPU-normalised one measures the writer.

    .venv/bin/python -m bench.writer_throughput [-n 20000] [--batch 512] [--in-process] [--profile DIR]

``--profile DIR`` records the writer with py-spy during the drain (``DIR/writer.folded``,
folded stacks, every thread) and prints the heaviest frames as shares of the samples.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from aimem_common import bus as busmod
from aimem_common import config
from aimem_common.models import ObservationKind
from aimem_common.natsserver import NatsServer, free_port
from aimem_common.commands import make_envelope
from aimem_common.sanitize import RawObservation, sanitize

try:
    from bench.common import cpu_seconds, machine_info, write_result
except ImportError:  # run as a plain script
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.common import cpu_seconds, machine_info, write_result

KINDS = [ObservationKind.USER_PROMPT, ObservationKind.PRE_TOOL_USE, ObservationKind.POST_TOOL_USE]


def envelopes(n: int) -> list:
    out = []
    for i in range(n):
        kind = KINDS[i % 3]
        raw = RawObservation(
            session_id=f"bench-{i % 50}", kind=kind, agent="claude-code", cwd="/w/app",
            title=f"Bash: pytest tests/test_{i % 97}.py", tool_name=None if kind is KINDS[0] else "Bash",
            body=f"tool: Bash\ninput: {{\"command\": \"pytest tests/test_{i}.py -x\"}}\n"
                 f"output: collected {i % 40} items, all passed in {i % 9}.{i % 7}s " + "ok " * 60,
        )
        out.append(make_envelope("observation.append", sanitize(raw).to_payload(),
                                 project="app" if i % 2 else "lib", idempotency_key=f"bench-{i}"))
    return out


async def publish(settings: config.Settings, envs: list) -> float:
    nc = await busmod.connect(settings.bus, name="bench", reconnect=False)
    try:
        js = nc.jetstream()
        await busmod.ensure_streams(js, settings.bus)
        t0 = time.perf_counter()
        for start in range(0, len(envs), 2000):
            futs = [await js.publish_async(busmod.mut_subject(e.op), e.model_dump_json().encode(),
                                           headers={busmod.MSG_ID_HEADER: e.dedupe_id})
                    for e in envs[start:start + 2000]]
            await asyncio.gather(*futs)
        return time.perf_counter() - t0
    finally:
        await nc.close()


def start_profiler(pid: int, out: Path) -> subprocess.Popen:
    """Attach py-spy (from this interpreter's venv) to ``pid``, folded stacks into ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "-p", str(pid), "-r", "250",
                            "-f", "raw", "--threads", "--nonblocking", "-o", str(out)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)  # py-spy attaches before the first row lands (the writer is still starting)
    return spy


def stop_profiler(spy: subprocess.Popen) -> None:
    """Stop py-spy with SIGINT (it writes its file then) and wait for it."""
    spy.send_signal(signal.SIGINT)
    try:
        spy.wait(60)
    except subprocess.TimeoutExpired:
        spy.kill()


def folded_summary(path: Path, top: int = 25) -> list[tuple[str, float, float]]:
    """Return the ``top`` frames of a py-spy folded file as ``(frame, inclusive %, self %)``.

    Percentages are of all samples (every thread) but those taken while the writer was still
    importing its modules (it starts with the backlog pending). A frame counts once per sample even
    when it recurses. Frames are ``function (file:line)`` with the line number dropped.
    """
    incl: dict[str, int] = {}
    selfc: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit() or "_find_and_load" in stack:
            continue  # not a sample, or the writer still importing its modules (startup)
        n = int(count)
        total += n
        frames = [f.rsplit(":", 1)[0] + ")" if f.endswith(")") and ":" in f else f for f in stack.split(";")]
        for f in set(frames[1:]):  # frames[0] is the thread
            incl[f] = incl.get(f, 0) + n
        if len(frames) > 1:
            selfc[frames[-1]] = selfc.get(frames[-1], 0) + n
    total = max(total, 1)
    rows = sorted(incl.items(), key=lambda kv: -kv[1])[:top]
    return [(f, round(100 * c / total, 1), round(100 * selfc.get(f, 0) / total, 1)) for f, c in rows]


def run(n: int, batch: int, behind: int = 4096, profile: Path | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="aimem-bench-") as tmp:
        tmp_path = Path(tmp)
        with NatsServer(tmp_path / "nats") as nats_srv:
            port_base = free_port()
            settings = config.load(tmp_path / "data", environ={}, bus={"nats_url": nats_srv.url},
                                   port_base=port_base)
            envs = envelopes(n)
            pub_s = asyncio.run(publish(settings, envs))
            env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
            env.update(AIMEM_DATA_DIR=str(settings.data_dir), AIMEM_PORT_BASE=str(port_base),
                       AIMEM_BUS__NATS_URL=nats_srv.url, AIMEM_WRITER__BATCH_MAX_MSGS=str(batch),
                       AIMEM_WRITER__BATCH_MAX_MSGS_BEHIND=str(behind),
                       AIMEM_LOG_LEVEL="warning", AIMEM_WRITER__WATCH_WIKI="false")
            log = open(tmp_path / "writer.log", "wb")
            proc = subprocess.Popen([sys.executable, "-m", "aimem_writer"], env=env, stdout=log, stderr=log)
            spy = None
            try:
                if profile is not None:
                    spy = start_profiler(proc.pid, profile / "writer.folded")
                db = settings.db_path
                while not db.exists():
                    time.sleep(0.005)
                    if proc.poll() is not None:
                        raise RuntimeError((tmp_path / "writer.log").read_text())
                conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
                first_t = None
                nats_cpu0 = load0 = 0.0
                first_n = 0
                cpu0 = 0.0
                deadline = time.monotonic() + 600
                count = 0
                while time.monotonic() < deadline:
                    try:
                        count = conn.execute("SELECT count(*) FROM observations").fetchone()[0]
                    except sqlite3.OperationalError:
                        count = 0
                    if count and first_t is None:
                        first_t, first_n, cpu0 = time.perf_counter(), count, cpu_seconds(proc.pid)
                        nats_cpu0, load0 = cpu_seconds(nats_srv.proc.pid), os.getloadavg()[0]
                    if count >= n:
                        break
                    time.sleep(0.01)
                last_t = time.perf_counter()
                cpu1 = cpu_seconds(proc.pid)
                nats_cpu = cpu_seconds(nats_srv.proc.pid) - nats_cpu0
                load1 = os.getloadavg()[0]
                if spy is not None:
                    stop_profiler(spy)
                metrics = httpx.get(f"http://127.0.0.1:{settings.port('writer')}/metrics", timeout=5).text
            finally:
                proc.terminate()
                proc.wait(20)
            applied = count - first_n
            secs = max(last_t - (first_t or last_t), 1e-9)
            batches = next((float(line.split()[-1]) for line in metrics.splitlines()
                            if line.startswith("aimem_writer_batch_size_count")), 0.0)
            apply_sum = next((float(line.split()[-1]) for line in metrics.splitlines()
                              if line.startswith("aimem_writer_apply_seconds_sum")), 0.0)
            cpu = max(cpu1 - cpu0, 1e-9)
            return {"writer_cpu_s": round(cpu, 3), "obs_per_cpu_s": round(applied / cpu),
                    "nats_cpu_s": round(nats_cpu, 3),
                    "loadavg_1m_start": load0, "loadavg_1m": load1, "apply_s": round(apply_sum, 3), "observations": n, "applied": count, "publish_s": round(pub_s, 3),
                    "drain_s": round(secs, 3), "obs_per_s": round(applied / secs),
                    "batches": int(batches), "mean_batch": round(count / batches, 1) if batches else None,
                    "batch_max_msgs": batch, "batch_max_msgs_behind": behind}


def run_in_process(n: int, behind: int) -> dict:
    """Apply the same ``n`` envelopes with the writer's ``Applier`` in this process, ``behind``
    per batch, without NATS: the writer thread's CPU per observation alone (``process_time``),
    to tell it from the event loop's share (fetch, acks) in the full run."""
    from aimem_common.db.connect import open_writer
    from aimem_common.telemetry import Telemetry
    import aimem_writer.ops  # noqa: F401  (registers every handler)
    from aimem_writer.batch import Applier
    from aimem_writer.commands import Incoming
    from aimem_writer.metrics import WriterMetrics
    from aimem_writer.wiki import WikiRepo

    datas = [e.model_dump_json().encode() for e in envelopes(n)]
    with tempfile.TemporaryDirectory(prefix="aimem-bench-") as tmp:
        settings = config.load(Path(tmp) / "data", environ={})
        conn = open_writer(settings.db_path)
        applier = Applier(conn, WikiRepo(settings.wiki_dir), settings, WriterMetrics.create(Telemetry("writer")))
        cpu0, t0 = time.process_time(), time.perf_counter()
        for start in range(0, n, behind):
            result = applier.apply([Incoming(d) for d in datas[start:start + behind]])
            assert all(o.reply and o.reply["ok"] for o in result.outcomes)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
        conn.close()
    return {"in_process_cpu_s": round(cpu, 3), "in_process_us_per_obs": round(cpu / n * 1e6, 1),
            "in_process_obs_per_cpu_s": round(n / cpu), "in_process_wall_s": round(wall, 3)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=20_000, help="observations to apply")
    ap.add_argument("--batch", type=int, default=512, help="writer.batch_max_msgs (idle fetch size)")
    ap.add_argument("--behind", type=int, default=4096, help="writer.batch_max_msgs_behind (backlog fetch size)")
    ap.add_argument("--tag", default="", help="label stored in the result (and its file name), e.g. the A/B side")
    ap.add_argument("--in-process", action="store_true",
                    help="also apply the same envelopes in this process without NATS (the apply's CPU alone)")
    ap.add_argument("--profile", type=Path, default=None, help="py-spy the writer during the drain into DIR")
    args = ap.parse_args(argv)
    res = run(args.n, args.batch, args.behind, args.profile)
    info = machine_info()
    print(f"writer throughput: {res['obs_per_s']:,} observations/s applied "
          f"({res['applied']:,} in {res['drain_s']} s, {res['batches']} batches, mean {res['mean_batch']}/batch; "
          f"publish {res['publish_s']} s; {res['apply_s']} s of it inside the batch transactions)")
    print(f"writer CPU: {res['writer_cpu_s']} s for the drain = {res['obs_per_cpu_s']:,} observations per CPU-second; "
          f"nats-server CPU {res['nats_cpu_s']} s (load average {res['loadavg_1m_start']:.1f} -> {res['loadavg_1m']:.1f} "
          f"on {os.cpu_count()} cores during the run)")
    if info:
        print(f"machine: {info.get('cpu')} x{info.get('cores')}, python {info.get('python')}, commit {info.get('commit')}")
    if args.in_process:
        res.update(run_in_process(args.n, args.behind))
        print(f"apply alone (in process, no NATS): {res['in_process_us_per_obs']} us CPU per observation = "
              f"{res['in_process_obs_per_cpu_s']:,} per CPU-second")
    if args.profile is not None:
        folded = args.profile / "writer.folded"
        res["profile"] = {"file": str(folded), "top": folded_summary(folded) if folded.exists() else []}
        print(f"profile ({folded}; inclusive % / self % of all samples):")
        for frame, inc, own in res["profile"]["top"]:
            print(f"  {inc:5.1f} {own:5.1f}  {frame}")
    if args.tag:
        res["tag"] = args.tag
    print(f"written to {write_result('writer_throughput' + (f'-{args.tag}' if args.tag else ''), res)}")


if __name__ == "__main__":
    main()
