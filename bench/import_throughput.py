"""Transcript import throughput and memory: ``aimem import`` of a generated corpus.

Generates Claude Code and Codex transcripts (``aimem_testing.transcripts``: huge
tool outputs, secrets, invalid lines, truncated files, resumed sessions), starts the local
stack (``aimem up`` on free ports), runs ``aimem import --json`` as a separate process and
reports, per corpus size: transcript lines/s and sessions/s of the import command (read,
normalise, POST ``/hook/import`` until every batch is answered 202), lines/s until the
writer has stored the last event (visible to readers), and the import process's peak RSS
(``VmHWM`` of that process alone, sampled every 50 ms). Two sizes show that memory is bounded by a line and a batch, not by the
corpus. Target: ≥ 2,000 lines/s on this machine.

On a shared, oversubscribed box the wall clock measures the neighbours too, so the CPU
seconds of every process involved (the import command, ingress, writer, nats-server, the
rest of the stack) are printed beside it, with the rate they allow on the 2 idle cores:
``lines / max(total CPU / cores, the busiest process's CPU)``.

Two session-length profiles: short sessions (1-4 turns, ~24 lines) stress the per-session
work (the session page, written once per imported session); longer ones (5-20 turns) are
closer to real transcripts.

    .venv/bin/python -m bench.import_throughput [--sizes 200,800] [--turns 1-4,5-20]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    from bench.common import cpu_seconds, machine_info, table, write_result
except ImportError:  # run as a plain script
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.common import cpu_seconds, machine_info, table, write_result

from aimem_testing.stack import LocalStack
from aimem_testing.transcripts import make_corpus

TARGET_LINES_PER_S = 2000


def _stored(db: Path) -> int:
    if not db.exists():
        return 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM observations").fetchone()[0]
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


def _hwm_kib(pid: int) -> int:
    """Peak resident set (``VmHWM``, KiB) of a running process; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def descendants(pid: int) -> dict[int, str]:
    """``{pid: command name}`` of every process below ``pid`` (Linux ``/proc``)."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(d.name))
            names[int(d.name)] = cmd
    out: dict[int, str] = {}
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out[child] = names.get(child, "")
            todo.append(child)
    return out


def _cpu(pids: dict[int, str]) -> dict[int, float]:
    out = {}
    for pid in pids:
        try:
            out[pid] = cpu_seconds(pid)
        except OSError:
            pass
    return out


def _label(cmd: str) -> str:
    if "multiprocessing.spawn" in cmd:
        return "import-worker"  # ingress's import worker (aimem_ingress.importwork; ingress.workers = 1)
    for name in ("aimem_ingress", "aimem_writer", "nats-server", "aimem_query", "aimem_mcp", "aimem_maintainer"):
        if name in cmd:
            return name.replace("aimem_", "")
    return "other"


def run_size(sessions: int, work: Path, turns: tuple[int, int]) -> dict:
    corpus = make_corpus(work / f"corpus-{sessions}-{turns[1]}", claude=sessions // 2,
                         codex=sessions - sessions // 2, seed=sessions, turns=turns)
    expected = sum(n for sid, n in corpus.expected.items() if sid not in corpus.capture_off)
    tag = f"{sessions}-{turns[1]}"
    with LocalStack(work / f"data-{tag}", work / f"logs-{tag}") as stack:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
        env.update(AIMEM_DATA_DIR=str(work / f"client-{tag}"), AIMEM_INGRESS_URL=stack.url("ingress"),
                   AIMEM_AUTH__TOKEN=stack.token)
        procs = descendants(stack.proc.pid)
        cpu0 = _cpu(procs)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cli_cpu0 = ru0.ru_utime + ru0.ru_stime
        t0 = time.perf_counter()
        out_path = work / f"import-{tag}.json"
        with open(out_path, "wb") as out, open(work / f"import-{tag}.err", "wb") as err:
            proc = subprocess.Popen([str(Path(sys.executable).with_name("aimem")), "import", "--json",
                                     "--home", str(corpus.home)], stdout=out, stderr=err, env=env)
            rss_kib = 0
            while proc.poll() is None:  # VmHWM of the process's own memory (ru_maxrss would
                rss_kib = max(rss_kib, _hwm_kib(proc.pid))  # count this big parent's pages at fork)
                time.sleep(0.05)
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        cli_s = time.perf_counter() - t0
        cli_cpu = usage.ru_utime + usage.ru_stime - cli_cpu0
        if proc.returncode not in (0, 2):  # 2: the corpus has malformed lines on purpose
            raise SystemExit(f"aimem import failed: {(work / f'import-{tag}.err').read_text()[-2000:]}")
        stats = json.loads(out_path.read_text())
        db = stack.data_dir / "db" / "memory.sqlite"
        deadline = time.monotonic() + 600
        while _stored(db) < expected and time.monotonic() < deadline:
            time.sleep(0.05)
        stored_s = time.perf_counter() - t0
        stored = _stored(db)
        cpu1 = _cpu(procs)
    by_service: dict[str, float] = {"import": cli_cpu}
    for pid, cmd in procs.items():
        if pid in cpu0 and pid in cpu1:
            by_service[_label(cmd)] = by_service.get(_label(cmd), 0.0) + cpu1[pid] - cpu0[pid]
    total_cpu = sum(by_service.values())
    cores = os.cpu_count() or 1
    idle_s = max(total_cpu / cores, max(by_service.values()))
    size_mb = sum(p.stat().st_size for p in corpus.files) / 1e6
    return {
        "turns": f"{turns[0]}-{turns[1]}", "transcripts": len(corpus.files), "sessions": stats["sessions"], "lines": stats["lines"],
        "corpus_mb": round(size_mb, 1), "events": stats["events"], "stored": stored,
        "cli_s": round(cli_s, 2), "lines_per_s": round(stats["lines"] / cli_s),
        "sessions_per_s": round(stats["sessions"] / cli_s, 1),
        "stored_lines_per_s": round(stats["lines"] / stored_s),
        "peak_rss_mib": round(rss_kib / 1024, 1),
        "cpu_s": {k: round(v, 2) for k, v in by_service.items()},
        "cpu_total_s": round(total_cpu, 2),
        "idle_box_lines_per_s": round(stats["lines"] / idle_s),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="200,800", help="sessions per corpus, comma-separated")
    ap.add_argument("--turns", default="1-4,5-20", help="turns per session (min-max), comma-separated profiles")
    args = ap.parse_args(argv)
    info = machine_info()
    rows = []
    with tempfile.TemporaryDirectory(prefix="aimem-bench-import-") as tmp:
        profiles = [tuple(int(x) for x in t.split("-")) for t in args.turns.split(",")]
        for turns in profiles:
            for size in (int(s) for s in args.sizes.split(",")):
                rows.append(run_size(size, Path(tmp), turns))
            print(f"{size} sessions: {rows[-1]}", flush=True)
    print(table(rows, [c for c in rows[0] if c != "cpu_s"]))
    for r in rows:
        print(f"CPU s for {r['lines']} lines ({r['turns']} turns/session): {r['cpu_s']}")
    best = min(r["lines_per_s"] for r in rows)
    idle = min(r["idle_box_lines_per_s"] for r in rows)
    load = os.getloadavg()[0]
    print(f"\nimport: ≥ {best} lines/s wall at load {load:.1f}, ≥ {idle} lines/s by CPU on idle cores "
          f"(target ≥ {TARGET_LINES_PER_S}): {'met' if idle >= TARGET_LINES_PER_S else 'NOT met'}; peak RSS "
          f"{', '.join(str(r['peak_rss_mib']) for r in rows)} MiB for {', '.join(str(r['lines']) for r in rows)} lines")
    write_result("import_throughput", {"machine": info, "target_lines_per_s": TARGET_LINES_PER_S, "rows": rows})


if __name__ == "__main__":
    main(sys.argv[1:])
