"""Read replicas on other nodes through Litestream: how far behind is a follow-mode restore?

Setup on loopback: a moto S3 server, a WAL SQLite DB written like the writer does (one small
transaction every ``--write-interval-ms``, each row stamped with its commit time), Litestream
replicating it (``sync-interval`` 1 s) and ``litestream restore -f`` (follow mode, polling
every ``--follow-interval-s``) keeping a local copy up to date — what a query/mcp replica on
another node would read. A reader opens that copy read-only every 100 ms and measures the
lag (now − newest commit it sees) and whether the open/read fails while follow mode applies
changes. Prints a table and writes ``bench/results/read_replica.json``.

    python -m bench read_replica [--seconds 30] [--write-interval-ms 100] [--follow-interval-s 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sysconfig
import tempfile
import threading
import time
from pathlib import Path

from aimem_common.natsserver import free_port, wait_port
from aimem_common.replication import litestream_binary, litestream_env

from bench.common import machine_info, pct, table, write_result

BUCKET = "aimem-bench"


def _moto(port: int, log: Path) -> subprocess.Popen:
    exe = Path(sysconfig.get_path("scripts")) / "moto_server"
    proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)], stdout=open(log, "wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    if not wait_port("127.0.0.1", port, 30):
        proc.kill()
        raise RuntimeError("moto_server did not start")
    import boto3

    boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id="bench",
                 aws_secret_access_key="bench", region_name="us-east-1").create_bucket(Bucket=BUCKET)
    return proc


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(prog="bench.read_replica")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--write-interval-ms", type=float, default=100.0)
    ap.add_argument("--follow-interval-s", type=float, default=1.0)
    ap.add_argument("--persistent", action="store_true",
                    help="read through one long-lived connection (as a service's pool does) instead of a fresh one per read")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="aimem-bench-rr-"))
    port = free_port()
    env = litestream_env(dict(os.environ)) | {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}
    db, replica = tmp / "primary.sqlite", tmp / "replica" / "copy.sqlite"
    replica.parent.mkdir()
    conf = tmp / "litestream.yml"
    conf.write_text(json.dumps({"dbs": [{"path": str(db), "replica": {
        "type": "s3", "bucket": BUCKET, "path": "db", "endpoint": f"http://127.0.0.1:{port}",
        "region": "us-east-1", "force-path-style": True, "sync-interval": "1s"}}]}))
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, at REAL NOT NULL, pad TEXT)")
    conn.execute("INSERT INTO t(at, pad) VALUES (?, ?)", (time.time(), "x" * 200))
    procs: list[subprocess.Popen] = []
    stop = threading.Event()
    try:
        procs.append(_moto(port, tmp / "moto.log"))
        procs.append(subprocess.Popen([litestream_binary(), "replicate", "-config", str(conf)], env=env,
                                      stdout=open(tmp / "replicate.log", "wb"), stderr=subprocess.STDOUT))
        time.sleep(3)  # first snapshot
        procs.append(subprocess.Popen(
            [litestream_binary(), "restore", "-config", str(conf), "-f", "-follow-interval",
             f"{args.follow_interval_s:g}s", "-o", str(replica), str(db)],
            env=env, stdout=open(tmp / "follow.log", "wb"), stderr=subprocess.STDOUT))

        def writer() -> None:
            while not stop.is_set():
                conn.execute("INSERT INTO t(at, pad) VALUES (?, ?)", (time.time(), "x" * 200))
                time.sleep(args.write_interval_ms / 1000)

        threading.Thread(target=writer, daemon=True).start()
        lags: list[float] = []
        errors: dict[str, int] = {}
        deadline = time.time() + args.seconds
        first_seen = None
        held: sqlite3.Connection | None = None
        while time.time() < deadline:
            try:
                if args.persistent and held is None and replica.exists():
                    held = sqlite3.connect(f"file:{replica}?mode=ro", uri=True, timeout=0.5, check_same_thread=False)
                r = held or sqlite3.connect(f"file:{replica}?mode=ro", uri=True, timeout=0.5)
                try:
                    newest = r.execute("SELECT max(at) FROM t").fetchone()[0]
                finally:
                    if r is not held:
                        r.close()
                if newest:
                    first_seen = first_seen or time.time()
                    lags.append(time.time() - newest)
            except sqlite3.Error as exc:
                when = "before the first restore" if first_seen is None else "while following"
                key = f"{when}: {type(exc).__name__}: {str(exc)[:60]}"
                errors[key] = errors.get(key, 0) + 1
            time.sleep(0.1)
        stop.set()
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        conn.close()
    steady = lags[len(lags) // 5:]  # skip the first fifth (catching up after the snapshot)
    result = {
        "machine": machine_info(),
        "params": vars(args),
        "samples": len(lags),
        "lag_s": {"p50": round(pct(steady, 50), 2), "p95": round(pct(steady, 95), 2),
                  "max": round(max(steady), 2)} if steady else None,
        "read_errors": errors,
        "logs": str(tmp),
    }
    print(table([{"mode": "litestream restore -f" + (", one long-lived reader" if args.persistent else ""), **(result["lag_s"] or {}), "samples": len(lags),
                  "read errors while following": sum(n for k, n in errors.items() if k.startswith("while"))}]))
    if errors:
        print("read errors:", json.dumps(errors))
    write_result("read_replica", result)
    return result


if __name__ == "__main__":
    main()
