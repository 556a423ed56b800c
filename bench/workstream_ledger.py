"""Managed-workstream ledger limits: packet size at 10k events, start-packet read, search at 100k.

Builds a ledger through the writer's real batch path (``Applier``, ``workstream.append`` in
batches of 2,000 events, JSONL segments on disk) in a temporary data dir, then measures on a
read-only connection: the start-up packet of a harness that has seen nothing (bytes, tokens
≈ chars / 4, and the read + render time), and full-text search p95 over the whole ledger
(event texts of 12-60 words drawn from a Zipf-distributed 20,000-word vocabulary; queries of
two words of middling frequency, and one absent word).
No NATS and no HTTP: the figures are the ledger's own cost, not a stack round trip.
"""

from __future__ import annotations

import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from aimem_common import config
from aimem_common.commands import Envelope, ScopeRef
from aimem_common.db.connect import open_writer
from aimem_common.read import scopes
from aimem_common.read import workstreams as wsread
from aimem_common.telemetry import Telemetry
from aimem_common.workstreams import render_packet

from bench.common import pct, table, write_result

VOCAB = [f"w{i}x" for i in range(20_000)]  # a Zipf-distributed vocabulary, like prose and code
WEIGHTS = [1 / (i + 1) for i in range(len(VOCAB))]
RUN = "a" * 32
BATCH = 2_000
# Two words of middling frequency each (ranks 20..2000), plus a word that is nowhere.
QUERIES = [f"w{20 + 37 * i}x w{300 + 53 * i}x" for i in range(30)] + ["quokka"]


def _text(rng: random.Random, i: int) -> str:
    return f"step {i}: " + " ".join(rng.choices(VOCAB, WEIGHTS, k=rng.randint(12, 60)))


def build(data_dir: Path, n: int) -> None:
    from aimem_writer.batch import Applier, Incoming
    from aimem_writer.metrics import WriterMetrics
    from aimem_writer.wiki import WikiRepo
    import aimem_writer.ops  # noqa: F401  (registers the handlers)

    settings = config.load(data_dir, environ={})
    conn = open_writer(settings.db_path)
    applier = Applier(conn, WikiRepo(settings.wiki_dir), settings, WriterMetrics.create(Telemetry("bench")))
    scope = ScopeRef(workspace="default", project="bench", root="/bench/repo")

    def apply(op: str, payload: dict) -> dict:
        env = Envelope(op=op, payload=payload, scope=scope, actor="bench")
        [out] = applier.apply([Incoming(env.model_dump_json().encode())]).outcomes
        assert out.reply["ok"], out.reply
        return out.reply["result"]

    apply("workstream.lease", {"action": "open", "run_id": RUN, "harness": "claude-code", "cwd": "/bench/repo"})
    rng = random.Random(29)
    for start in range(0, n, BATCH):
        apply("workstream.append", {"run_id": RUN, "events": [
            {"role": ("user", "assistant", "tool")[i % 3], "text": _text(rng, i)} for i in range(start, min(n, start + BATCH))]})
    conn.close()


def measure(data_dir: Path, n: int) -> dict:
    t0 = time.perf_counter()
    build(data_dir, n)
    build_s = time.perf_counter() - t0
    conn = sqlite3.connect(f"file:{data_dir / 'db' / 'memory.sqlite'}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    scope = scopes.find(conn, "default", "bench")
    wid = conn.execute("SELECT id FROM workstreams").fetchone()[0]
    starts = []
    for _ in range(30):
        t = time.perf_counter()
        events = wsread.events_after(conn, wid, 0)
        text, first, last = render_packet(wid, "repo", "codex", events, max_chars=9_000 - 2_500, unseen_from=1)
        starts.append((time.perf_counter() - t) * 1000)
    searches = []
    for i in range(120):
        t = time.perf_counter()
        wsread.search(conn, scope, QUERIES[i % len(QUERIES)], limit=20)
        searches.append((time.perf_counter() - t) * 1000)
    segs = list((data_dir / "raw" / "workstreams" / wid).glob("*.jsonl"))
    return {"events": n, "build_s": round(build_s, 2), "packet_bytes": len(text.encode()),
            "packet_tokens_est": len(text) // 4, "packet_events": last - first + 1,
            "start_read_render_p95_ms": round(pct(starts, 95), 2), "search_p50_ms": round(pct(searches, 50), 2),
            "search_p95_ms": round(pct(searches, 95), 2), "segments": len(segs),
            "segment_mb": round(sum(p.stat().st_size for p in segs) / 1e6, 1)}


def main(argv: list[str] | None = None) -> None:
    """Measure at 10k and 100k events; print the table and write ``bench/results/``."""
    sizes = [int(a) for a in (argv or [])] or [10_000, 100_000]
    rows = []
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="aimem-ws-bench-") as tmp:
            rows.append(measure(Path(tmp) / "data", n))
    print(table(rows))
    write_result("workstream_ledger", {"rows": rows})


if __name__ == "__main__":
    main(sys.argv[1:])
