"""Live first: live hooks and a session's handoff while ``aimem import`` brings in a large corpus.

On one local stack (``aimem up`` on free ports), with live hooks posted by ``hey`` at a steady
rate (``--rate`` hooks/s: a few agents at work) through the real ``/hook``:

1. quiet: the live hooks alone — their p50/p95/p99 and 429s, and the handoff delay of a
   session that ends (its ``session-end`` 202 → the handoff stored and claimed by the next
   session start in that folder);
2. import alone: ``aimem import`` of a generated corpus (``aimem_testing.transcripts``,
   ``--sessions`` Claude Code + Codex sessions, 8–20 turns: ~130 transcript lines a session),
   transcript lines per second until the writer has stored the last imported event;
3. import with live load: a second corpus of the same size imported while the live hooks
   go on; their p95 and 429s during the import, the handoff delay of a session that ends
   while the import's backlog is being applied, and the import's lines/s.

Targets (issue 27): during-import p95 ≤ 3× quiet p95 or ≤ 25 ms; zero 429 for live hooks;
the handoff delay during the import in its usual (quiet) time.

On this shared 2-core box other engineers' work loads the CPU too: the load average is
printed beside every phase, and the CPU seconds of ingress, the writer and nats-server.

    .venv/bin/python -m bench.import_live [--sessions 1150] [--rate 50] [--quiet-s 10]

``--sessions 1150`` is about 150k transcript lines per corpus; a smaller figure measures the
same at a reduced size (say so beside the figures).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx

try:
    from bench.common import cpu_seconds_of, machine_info, pct, table, write_result
except ImportError:  # run as a plain script
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.common import cpu_seconds_of, machine_info, pct, table, write_result

from aimem_testing.stack import LocalStack
from aimem_testing.transcripts import make_corpus

from bench.import_throughput import _label, descendants

TARGET_RATIO = 3.0
TARGET_P95_MS = 25.0
HEY_CHUNK_S = 5  # live load during the import runs in chunks of this many seconds until it ends
HANDOFF_DEADLINE_S = 120.0


def _db(stack: LocalStack) -> Path:
    return stack.data_dir / "db" / "memory.sqlite"


def _one(db: Path, sql: str, args: tuple = ()) -> object:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        row = conn.execute(sql, args).fetchone()
        return row[0] if row else None
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()


def imported_stored(stack: LocalStack) -> int:
    """Imported observations stored so far (all corpora)."""
    return int(_one(_db(stack), "SELECT coalesce(sum(imported_count), 0) FROM sessions") or 0)


class LiveLoad:
    """``hey`` posting one generic hook at ``rate``/s (5 connections) in ``HEY_CHUNK_S`` chunks
    until ``stop()``; every request's latency (ms) and status read from hey's CSV."""

    def __init__(self, stack: LocalStack, work: Path, rate: int):
        self.url = f"{stack.url('ingress')}/hook?agent=generic"
        self.token = stack.token
        self.rate = rate
        self.body = work / "live-hook.json"
        self.body.write_text(json.dumps({"hook_event_name": "post-tool-use", "session_id": "bench-live-load",
                                         "cwd": str(work / "live-load"), "tool_name": "Bash",
                                         "tool_input": {"command": "make test"}, "tool_response": "ok"}))
        self.latencies_ms: list[float] = []
        self.statuses: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_for(self, seconds: int) -> None:
        """Post for ``seconds`` (blocking)."""
        self._chunk(seconds)

    def start(self) -> None:
        """Post in chunks on a thread until ``stop()``."""
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End after the current chunk and wait for it."""
        self._stop.set()
        if self._thread:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._chunk(HEY_CHUNK_S)

    def _chunk(self, seconds: int) -> None:
        conns = 5
        out = subprocess.run(
            ["hey", "-z", f"{seconds}s", "-c", str(conns), "-q", str(max(1, self.rate // conns)), "-m", "POST",
             "-T", "application/json", "-H", f"Authorization: Bearer {self.token}", "-D", str(self.body),
             "-o", "csv", self.url], capture_output=True, text=True, check=True).stdout
        for row in csv.DictReader(io.StringIO(out)):
            self.latencies_ms.append(float(row["response-time"]) * 1000)
            code = int(row["status-code"])
            self.statuses[code] = self.statuses.get(code, 0) + 1

    def figures(self) -> dict:
        """p50/p95/p99 (ms), requests, and counts of 202 and 429."""
        lat = self.latencies_ms
        return {"requests": len(lat), "p50_ms": round(pct(lat, 50), 2), "p95_ms": round(pct(lat, 95), 2),
                "p99_ms": round(pct(lat, 99), 2), "status_202": self.statuses.get(202, 0),
                "status_429": self.statuses.get(429, 0),
                "other_status": sum(n for c, n in self.statuses.items() if c not in (202, 429))}


def handoff_delay(stack: LocalStack, work: Path, tag: str) -> dict:
    """A live session starts, works and ends in its own folder; return the seconds from its
    ``session-end`` 202 to its handoff stored, and whether (and how fast) the next session start
    there claims it."""
    repo = work / f"repo-{tag}"
    repo.mkdir(exist_ok=True)
    sid = f"{tag}-{uuid.uuid4().hex[:12]}"
    url = f"{stack.url('ingress')}/hook?agent=generic"
    events = [("session-start", {"source": "startup"}), ("user-prompt", {"prompt": f"fix the {tag} build"}),
              ("post-tool-use", {"tool_name": "Bash", "tool_input": {"command": "make"}, "tool_response": "ok"}),
              ("session-end", {"reason": "exit"})]
    with httpx.Client(headers=stack.headers, timeout=10) as http:
        for kind, fields in events:
            r = http.post(url, json={"hook_event_name": kind, "session_id": sid, "cwd": str(repo), **fields})
            if r.status_code != 202:
                return {"ended": False, "status": r.status_code}
        t0 = time.monotonic()
        while _one(_db(stack), "SELECT 1 FROM handoffs WHERE from_session_id = ?", (sid,)) is None:
            if time.monotonic() - t0 > HANDOFF_DEADLINE_S:
                return {"ended": True, "handoff_s": None}
            time.sleep(0.01)
        visible_s = time.monotonic() - t0
        nxt = {"hook_event_name": "session-start", "session_id": f"next-{sid}", "cwd": str(repo), "source": "startup"}
        http.post(url, json=nxt)
        t1 = time.monotonic()
        claim = http.post(f"{stack.url('ingress')}/hook/session-start-context?agent=generic", json=nxt)
        claim_s = time.monotonic() - t1
    return {"ended": True, "handoff_s": round(visible_s, 3), "claim_s": round(claim_s, 3),
            "claimed": claim.status_code == 200 and claim.json().get("handoff_id") is not None}


def run_import(stack: LocalStack, corpus_home: Path, client: Path, expected_total: int,
               live: LiveLoad | None, handoff_tag: str | None, work: Path) -> dict:
    """``aimem import`` of one corpus; returns lines/s until stored (and the handoff measured
    once the import's backlog is there, when ``handoff_tag``)."""
    env = stack.client_env(AIMEM_DATA_DIR=str(client))
    procs = descendants(stack.proc.pid)
    cpu0 = {k: cpu_seconds_of([p for p, c in procs.items() if _label(c) == k]) for k in ("ingress", "import-worker", "writer", "nats-server")}
    if live:
        live.start()
    t0 = time.monotonic()
    proc = subprocess.Popen([str(Path(sys.executable).with_name("aimem")), "import", "--json",
                             "--home", str(corpus_home)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    handoff = None
    if handoff_tag:
        while imported_stored(stack) < expected_total * 0.02 and proc.poll() is None:
            time.sleep(0.05)  # the import is under way and the writer applying it
        handoff = handoff_delay(stack, work, handoff_tag)
        handoff["import_stored_share_at_end"] = round(imported_stored(stack) / expected_total, 3)
    out, err = proc.communicate()
    cli_s = time.monotonic() - t0
    if proc.returncode not in (0, 2):  # 2: the generated corpus has malformed lines on purpose
        raise SystemExit(f"aimem import failed ({proc.returncode}): {err.decode()[-2000:]}")
    while imported_stored(stack) < expected_total and time.monotonic() - t0 < 3600:
        time.sleep(0.05)
    stored_s = time.monotonic() - t0
    if live:
        live.stop()
    stats = json.loads(out)
    procs = descendants(stack.proc.pid)  # again: ingress starts its import worker with the first batch
    cpu = {k: round(cpu_seconds_of([p for p, c in procs.items() if _label(c) == k]) - cpu0[k], 1) for k in cpu0}
    return {"lines": stats["lines"], "events": stats["events"], "new": stats.get("new"),  # absent before issue 27
            "cli_s": round(cli_s, 1), "stored_s": round(stored_s, 1),
            "lines_per_s": round(stats["lines"] / stored_s), "cpu_s": cpu, "handoff": handoff,
            "loadavg_1m": round(os.getloadavg()[0], 2)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1150, help="sessions per corpus (1150 ≈ 150k lines)")
    ap.add_argument("--rate", type=int, default=50, help="live hooks per second")
    ap.add_argument("--quiet-s", type=int, default=10, help="seconds of live hooks alone")
    args = ap.parse_args(argv)
    info = machine_info()
    with tempfile.TemporaryDirectory(prefix="aimem-bench-import-live-") as tmp:
        work = Path(tmp)
        t = time.monotonic()
        alone = make_corpus(work / "corpus-alone", claude=args.sessions // 2, codex=args.sessions - args.sessions // 2,
                            seed=11, turns=(8, 20))
        during = make_corpus(work / "corpus-during", claude=args.sessions // 2,
                             codex=args.sessions - args.sessions // 2, seed=12, turns=(8, 20))
        print(f"corpora generated in {time.monotonic() - t:.0f} s", flush=True)

        def total(c) -> int:
            return sum(n for sid, n in c.expected.items() if sid not in c.capture_off)

        with LocalStack(work / "data", work / "logs") as stack:
            quiet = LiveLoad(stack, work, args.rate)
            quiet.run_for(args.quiet_s)
            quiet_handoff = handoff_delay(stack, work, "quiet")
            quiet_fig = quiet.figures() | {"loadavg_1m": round(os.getloadavg()[0], 2)}
            print(f"quiet: {quiet_fig} handoff {quiet_handoff}", flush=True)
            imp_alone = run_import(stack, alone.home, work / "client-alone", total(alone), None, None, work)
            print(f"import alone: {imp_alone}", flush=True)
            live = LiveLoad(stack, work, args.rate)
            imp_live = run_import(stack, during.home, work / "client-during", total(alone) + total(during),
                                  live, "during", work)
            live_fig = live.figures() | {"loadavg_1m": imp_live["loadavg_1m"]}
            print(f"import with live load: {imp_live}\nlive hooks during it: {live_fig}", flush=True)
    ratio = live_fig["p95_ms"] / quiet_fig["p95_ms"] if quiet_fig["p95_ms"] else float("inf")
    p95_met = ratio <= TARGET_RATIO or live_fig["p95_ms"] <= TARGET_P95_MS
    during_handoff = imp_live["handoff"] or {}
    handoff_met = bool(during_handoff.get("claimed")) and during_handoff.get("handoff_s") is not None and (
        during_handoff["handoff_s"] <= max(1.0, 3 * (quiet_handoff.get("handoff_s") or 0)))
    rows = [
        {"phase": "quiet", "requests": quiet_fig["requests"], "p50_ms": quiet_fig["p50_ms"],
         "p95_ms": quiet_fig["p95_ms"], "p99_ms": quiet_fig["p99_ms"], "429": quiet_fig["status_429"],
         "handoff_s": quiet_handoff.get("handoff_s"), "claim_s": quiet_handoff.get("claim_s"),
         "import_lines_per_s": "", "load_1m": quiet_fig["loadavg_1m"]},
        {"phase": "import alone", "requests": "", "p50_ms": "", "p95_ms": "", "p99_ms": "", "429": "",
         "handoff_s": "", "claim_s": "", "import_lines_per_s": imp_alone["lines_per_s"],
         "load_1m": imp_alone["loadavg_1m"]},
        {"phase": "import + live", "requests": live_fig["requests"], "p50_ms": live_fig["p50_ms"],
         "p95_ms": live_fig["p95_ms"], "p99_ms": live_fig["p99_ms"], "429": live_fig["status_429"],
         "handoff_s": during_handoff.get("handoff_s"), "claim_s": during_handoff.get("claim_s"),
         "import_lines_per_s": imp_live["lines_per_s"], "load_1m": imp_live["loadavg_1m"]},
    ]
    print(table(rows))
    print(f"\nlines per corpus: {imp_alone['lines']:,} (--sessions {args.sessions}); live hooks at {args.rate}/s")
    print(f"live p95 during the import: {live_fig['p95_ms']} ms = {ratio:.2f}× quiet {quiet_fig['p95_ms']} ms "
          f"(target ≤ {TARGET_RATIO}× or ≤ {TARGET_P95_MS} ms): {'met' if p95_met else 'NOT met'}")
    print(f"live 429s during the import: {live_fig['status_429']} (target 0): "
          f"{'met' if live_fig['status_429'] == 0 else 'NOT met'}")
    print(f"handoff during the import: {during_handoff} vs quiet {quiet_handoff}: "
          f"{'met' if handoff_met else 'NOT met'} (share of the import stored when it ended: "
          f"{during_handoff.get('import_stored_share_at_end')})")
    print(f"import: {imp_alone['lines_per_s']} lines/s alone, {imp_live['lines_per_s']} with live load; "
          f"CPU s alone {imp_alone['cpu_s']}, with live {imp_live['cpu_s']}")
    write_result("import_live", {"machine": info, "args": vars(args), "quiet": quiet_fig,
                                 "quiet_handoff": quiet_handoff, "import_alone": imp_alone,
                                 "import_live": imp_live, "live_during_import": live_fig,
                                 "p95_ratio": round(ratio, 2), "p95_met": p95_met,
                                 "no_429_met": live_fig["status_429"] == 0, "handoff_met": handoff_met})


if __name__ == "__main__":
    main(sys.argv[1:])
