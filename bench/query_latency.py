"""p50/p95 latency of ``memory_query`` at 100k and 1M generated pages (text index and FTS5).

Targets (project-scoped p95; global ≤ 2×): ≤ 25 ms at 100k pages, ≤ 100 ms at 1M pages.
Besides latency it prints each stage's time (``explain``'s ``stream_ms``), the fts stream's
query plans, the DB's size on disk and the peak RSS, and the load average of the machine
(a shared machine inflates wall times; CPU ms are printed beside them).

The pages are inserted with a direct migrated connection (``open_writer``), not through the
writer service: the rows, FTS triggers, links and entity index are the same, and 100k
pages through the bus would only measure the writer. Queries run in-process through
``ReaderPool.call`` (the read connection, time budget and pragmas the services use),
without HTTP. The page text index (tantivy) is built in bulk beside the cached DB (as the
writer's rebuild does) and measured against FTS5 (the fallback) question by question. Text is Zipf-distributed over a fixed vocabulary so common words match
many pages, as in a real wiki.

Usage::

    python -m bench query_latency            # or: python -m bench.query_latency --sizes 100000 1000000 --dir DIR
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
import uuid
from pathlib import Path

from aimem_common.db.connect import open_writer
from aimem_common.db.schema import SCHEMA_VERSION

from aimem_common.db.connect import open_reader
from aimem_common.read.textindex import disk_bytes, is_complete
from aimem_writer.textindex import build

from bench.common import machine_info, peak_rss_mb, reset_peak_rss, write_result
from aimem_common.models import Scope
from aimem_common.readpool import ReaderPool
from aimem_common.search.question import QueryOptions
from aimem_common.search.query import memory_query

KINDS = [("decisions", "decision", "semantic"), ("gotchas", "gotcha", "semantic"),
         ("procedures", "procedure", "procedural"), ("concepts", "concept", "semantic"),
         ("sessions", "session", "episodic")]
CACHE = Path(__file__).resolve().parent.parent / ".cache" / "bench"
STOP = "the a of to and in is for on with how what why do we does when".split()


def vocabulary(rng: random.Random, n: int = 6000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(words)


class Zipf:
    def __init__(self, rng: random.Random, words: list[str], s: float = 1.05):
        self.rng, self.words = rng, words
        weights = [1 / (i + 1) ** s for i in range(len(words))]
        total = sum(weights)
        acc, self.cum = 0.0, []
        for w in weights:
            acc += w / total
            self.cum.append(acc)

    def sample(self, k: int) -> list[str]:
        return self.rng.choices(self.words, cum_weights=self.cum, k=k)


def generate(db: Path, n_pages: int, n_projects: int, seed: int = 7) -> list[Scope]:
    """Seed ``n_pages`` pages into a freshly migrated DB in one transaction.

    The rows go into the schema's own tables (``pages``, ``links``, ``entities``,
    ``entity_page_links``) with ``executemany``; the ``pages_fts`` insert trigger is
    dropped for the load and ``pages_fts`` is built once (``'rebuild'``, what the trigger
    would have produced row by row), then the trigger is put back from its own SQL. The
    ``pages_tri`` trigger stays: it skips all-ASCII text.
    """
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    z = Zipf(rng, vocab)
    conn = open_writer(db)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -262144")  # 256 MiB while loading
    # Dropped for the load: the fts insert trigger (pages_fts is rebuilt once) and the search
    # outbox's (the text index is built in bulk from the pages afterwards, build_text_index).
    bulk = ("pages_fts_ins", "search_outbox_ins")
    trigger_sql = [conn.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?", (t,)).fetchone()[0]
                   for t in bulk]
    scopes = []
    conn.execute("BEGIN")
    for t in bulk:
        conn.execute(f"DROP TRIGGER {t}")
    ws = uuid.uuid4().hex
    conn.execute("INSERT INTO workspaces VALUES (?, 'default', '2026-01-01T00:00:00Z')", (ws,))
    for i in range(n_projects):
        pj = uuid.uuid4().hex
        conn.execute("INSERT INTO projects(id, workspace_id, name, created_at) VALUES (?, ?, ?, '2026-01-01T00:00:00Z')",
                     (pj, ws, f"p{i}"))
        scopes.append(Scope("default", f"p{i}", ws, pj))
    ent_names = [" ".join(z.sample(rng.choice((1, 1, 2)))) for _ in range(3000)]
    ent_ids: dict[tuple[str, str], int] = {}
    next_ent = 1
    pages, links, ents, ent_links = [], [], [], []

    def flush() -> None:
        conn.executemany(
            "INSERT INTO pages(id, workspace_id, project_id, path, title, body, kind, tier, tags, content_hash,"
            " created_at, updated_at, session_id) VALUES (?,?,?,?,?,?,?,?,'[]','h',?,?,?)", pages)
        conn.executemany("INSERT INTO links(workspace_id, project_id, from_page_id, to_path, to_page_id)"
                         " VALUES (?,?,?,?,?)", links)
        conn.executemany("INSERT INTO entities(id, workspace_id, project_id, name, display_name) VALUES (?,?,?,?,?)",
                         ents)
        conn.executemany("INSERT OR IGNORE INTO entity_page_links VALUES (?, ?)", ent_links)
        for xs in (pages, links, ents, ent_links):
            xs.clear()

    for n in range(n_pages):
        pid = n + 1
        sc = scopes[n % n_projects]
        d, kind, tier = rng.choice(KINDS)
        title = " ".join(z.sample(5)).capitalize()
        body = "# " + title + "\n" + " ".join(z.sample(rng.randint(80, 220)))
        to = [rng.randint(max(1, pid - 2000), pid - 1) for _ in range(min(2, n))]
        body += " " + " ".join(f"[[x/{t}.md]]" for t in to)
        ts = f"2026-01-01T00:00:{n % 60:02d}.{n:06d}Z"
        pages.append((pid, ws, sc.project_id, f"{d}/{n}.md", title, body, kind, tier, ts, ts,
                      f"s{n}" if kind == "session" else None))
        links.extend((ws, sc.project_id, pid, f"x/{t}.md", t) for t in to)
        for name in rng.sample(ent_names, 3):
            key = (sc.project_id, name)
            if key not in ent_ids:
                ent_ids[key] = next_ent
                ents.append((next_ent, ws, sc.project_id, name, name))
                next_ent += 1
            ent_links.append((ent_ids[key], pid))
        if len(pages) >= 20_000:
            flush()
    flush()
    conn.execute("INSERT INTO pages_fts(pages_fts) VALUES ('rebuild')")
    for sql in trigger_sql:
        conn.execute(sql)
    conn.execute("COMMIT")
    conn.execute("INSERT INTO pages_fts(pages_fts) VALUES ('optimize')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return scopes


def add_observations(db: Path, per_session: int, seed: int = 13) -> int:
    """Give every session page ``per_session`` captured prompts (observations), once.

    Their words follow the pages' distribution, so the turns stream meets a realistic
    observation count (a vault keeps every turn; its pages keep a digest). Bulk-loaded as
    ``generate`` does: ``observations_fts`` is built once. Returns the observations added.
    """
    conn = open_writer(db)
    try:
        if conn.execute("SELECT 1 FROM observations LIMIT 1").fetchone():
            return 0
        rng = random.Random(seed)
        z = Zipf(rng, vocabulary(random.Random(7)))
        trigger_sql = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'observations_fts_ins'").fetchone()[0]
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        conn.execute("DROP TRIGGER observations_fts_ins")
        rows, n = [], 0
        for ws, pj, sid in conn.execute(
                "SELECT workspace_id, project_id, session_id FROM pages WHERE session_id IS NOT NULL").fetchall():
            for i in range(per_session):
                text = " ".join(z.sample(rng.randint(8, 40)))
                rows.append((ws, pj, sid, "user-prompt", "claude-code", text[:80], text,
                             "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"))
            if len(rows) >= 50_000:
                n += len(rows)
                conn.executemany("INSERT INTO observations(workspace_id, project_id, session_id, kind, agent, title,"
                                 " body, occurred_at, created_at) VALUES (?,?,?,?,?,?,?,?,?)", rows)
                rows.clear()
        n += len(rows)
        conn.executemany("INSERT INTO observations(workspace_id, project_id, session_id, kind, agent, title,"
                         " body, occurred_at, created_at) VALUES (?,?,?,?,?,?,?,?,?)", rows)
        conn.execute("INSERT INTO observations_fts(observations_fts) VALUES ('rebuild')")
        conn.execute(trigger_sql)
        conn.execute("COMMIT")
        conn.execute("INSERT INTO observations_fts(observations_fts) VALUES ('optimize')")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return n
    finally:
        conn.close()


def questions(n: int, seed: int = 11, *, skip_top: int = 100) -> list[str]:
    """Questions of 2-6 content words plus stopwords.

    ``skip_top``: the most frequent generated words play the role of function words in
    real text (the query builder drops those as stopwords), so realistic content terms
    are drawn below them. ``skip_top=0`` is the pessimistic mix where terms match ~85% of
    all pages.
    """
    rng = random.Random(seed)
    z = Zipf(rng, vocabulary(random.Random(7))[skip_top:])
    out = []
    for _ in range(n):
        words = z.sample(rng.randint(2, 6)) + rng.sample(STOP, 3)
        rng.shuffle(words)
        out.append(" ".join(words) + "?")
    return out


def measure(pools: dict[str, ReaderPool], qs: list[str], scopes: list[Scope] | None) -> dict[str, dict[str, float]]:
    """Latency of ``memory_query`` on each pool, the pools taking turns question by question
    (an A/B in the same minutes: a shared machine's load moves both sides alike)."""
    opts = QueryOptions(limit=10)
    for pool in pools.values():
        for q in qs[:20]:  # warm the page cache
            pool.call(memory_query, q, scopes, options=opts)
    times: dict[str, list[float]] = {k: [] for k in pools}
    cpu: dict[str, list[float]] = {k: [] for k in pools}
    for q in qs:
        for name, pool in pools.items():
            t0, c0 = time.perf_counter(), time.process_time()
            pool.call(memory_query, q, scopes, options=opts)
            cpu[name].append((time.process_time() - c0) * 1000)
            times[name].append((time.perf_counter() - t0) * 1000)
    out = {}
    for name in pools:
        t, c = sorted(times[name]), sorted(cpu[name])
        out[name] = {
            "p50_ms": round(statistics.median(t), 2),
            "p95_ms": round(t[int(len(t) * 0.95) - 1], 2),
            "max_ms": round(t[-1], 2),
            # CPU time of the query (this process): on a shared machine the wall clock also
            # measures the neighbours.
            "cpu_p50_ms": round(statistics.median(c), 2),
            "cpu_p95_ms": round(c[int(len(c) * 0.95) - 1], 2),
            "n": len(t),
        }
    return out


def profile(pool: ReaderPool, qs: list[str], scopes: list[Scope] | None) -> dict[str, dict[str, float]]:
    """Per-stage wall time (``explain``'s ``stream_ms``): p50/p95 ms and how often it ran."""
    opts = QueryOptions(limit=10, explain=True)
    laps: dict[str, list[float]] = {}
    for q in qs:
        res = pool.call(memory_query, q, scopes, options=opts)
        for name, ms in res.explain["stream_ms"].items():
            laps.setdefault(name, []).append(ms)
    out = {}
    for name, xs in laps.items():
        xs.sort()
        out[name] = {"p50_ms": round(statistics.median(xs), 2), "p95_ms": round(xs[max(0, int(len(xs) * 0.95) - 1)], 2),
                     "runs": len(xs)}
    return out


def query_plans(pool: ReaderPool, scope: Scope) -> dict[str, list[str]]:
    """EXPLAIN QUERY PLAN of the fts stream's two shapes (project-scoped, global)."""
    from aimem_common.search.sql import bm25_pages

    plans: dict[str, list[str]] = {}

    def capture(conn, name: str, scopes):
        real = conn.execute

        class Spy:
            def execute(self, sql, args=()):
                if name not in plans and "pages_fts MATCH" in sql:
                    plans[name] = [r[3] for r in real("EXPLAIN QUERY PLAN " + sql, args).fetchall()]
                return real(sql, args)

        opts = QueryOptions()
        bm25_pages(Spy(), '"alpha" OR "beta"', scopes, opts.candidates, opts.include_expired)

    with pool.connection() as conn:
        capture(conn, "fts_project", [scope])
        capture(conn, "fts_global", None)
    return plans


def footprint(db: Path, search_dir: Path, size: int) -> dict[str, float]:
    """On-disk size of the DB (+WAL) and of the text index, and this process's peak RSS."""
    disk = sum(p.stat().st_size for p in db.parent.glob(db.name) if p.is_file())
    disk += sum(p.stat().st_size for p in db.parent.glob(db.name + "-*") if p.is_file())
    tidx = disk_bytes(search_dir)
    rss_mb = peak_rss_mb()  # since reset_peak_rss() in main: the readers and their searches, not the seeding
    per = 100_000 / size
    return {"sqlite_mb": round(disk / 2**20, 1), "sqlite_mb_per_100k": round(disk / 2**20 * per, 1),
            "text_index_mb": round(tidx / 2**20, 1), "text_index_mb_per_100k": round(tidx / 2**20 * per, 1),
            "peak_rss_mb": round(rss_mb, 1)}


def ensure_text_index(db: Path) -> tuple[Path, float | None]:
    """The text index beside the cached DB (``<db>.search``), built in bulk when missing, as the
    writer's rebuild does; returns ``(dir, build seconds or None when it was cached)``."""
    search_dir = db.with_name(db.name + ".search")
    if is_complete(search_dir):
        return search_dir, None
    t0 = time.perf_counter()
    conn = open_reader(db)
    try:
        n = build(conn, search_dir, heap_bytes=512_000_000, threads=2)
    finally:
        conn.close()
    dt = time.perf_counter() - t0
    print(f"text index: {n} pages in {dt:.1f} s -> {search_dir}", flush=True)
    return search_dir, round(dt, 1)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--projects", type=int, default=10)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--turns", type=int, default=20,
                    help="captured prompts (observations) per session page, for the turns stream (0: none)")
    ap.add_argument("--skip-pessimistic", action="store_true",
                    help="only the realistic mix (the pessimistic one takes seconds a query at 1M pages)")
    ap.add_argument("--skip-fts5", action="store_true",
                    help="measure the text index only, not FTS5 beside it (FTS5 takes ~1 s a global query at 1M)")
    ap.add_argument("--dir", type=Path, default=CACHE,
                    help="where the seeded DBs are kept and reused (default .cache/bench, never committed)")
    args = ap.parse_args(argv)
    base = args.dir
    base.mkdir(parents=True, exist_ok=True)
    qs = questions(args.queries)
    worst = questions(args.queries, skip_top=0)
    results = []
    for size in args.sizes:
        # The seed depends on the schema: a migration makes a new file.
        db = base / f"pages-{size}-p{args.projects}-v{SCHEMA_VERSION}.sqlite"
        t0 = time.perf_counter()
        scopes = None
        if not db.exists():
            part = db.with_name(db.name + ".part")
            for old in base.glob(part.name + "*"):
                old.unlink()
            scopes = generate(part, size, args.projects)
            part.rename(db)
        added = add_observations(db, args.turns) if args.turns else 0
        gen_s = time.perf_counter() - t0
        search_dir, index_s = ensure_text_index(db)
        reset_peak_rss()  # the footprint's peak RSS is the serving side's, whether or not this run seeded
        # "text_index": what the services run (the fts stream on tantivy); "fts5": the fallback
        # (a read replica, an index being rebuilt), measured beside it as the A/B.
        pools = {"text_index": ReaderPool(db, size=1, budget_ms=0, text_index_dir=search_dir)}
        if not args.skip_fts5:
            pools["fts5"] = ReaderPool(db, size=1, budget_ms=0)
        main_pool = pools["text_index"]
        with main_pool.connection() as conn:
            from aimem_common.read.scopes import all_scopes

            scopes = scopes or all_scopes(conn)
            n_obs = conn.execute("SELECT count(*) FROM observations").fetchone()[0]
        assert main_pool.text_index.available(), "text index not usable"
        one = measure(pools, qs, [scopes[0]])
        glob = measure(pools, qs, None)
        worst_one = worst_glob = None
        stages = {name: {"project_scoped": profile(pool, qs, [scopes[0]]), "global": profile(pool, qs, None)}
                  for name, pool in pools.items()}
        if not args.skip_pessimistic:
            worst_one = measure(pools, worst, [scopes[0]])
            worst_glob = measure(pools, worst, None)
            stages["text_index"]["pessimistic_global"] = profile(main_pool, worst, None)
        plans = query_plans(main_pool, scopes[0])
        for pool in pools.values():
            pool.close()
        row = {"pages": size, "projects": args.projects, "observations": n_obs, "observations_added": added,
               "generate_s": round(gen_s, 1), "text_index_build_s": index_s,
               "load_avg": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
               "project_scoped": one, "global": glob,
               "pessimistic_project_scoped": worst_one, "pessimistic_global": worst_glob,
               "stage_ms": stages, "plans": plans, "footprint": footprint(db, search_dir, size)}
        results.append(row)
        print(json.dumps(row))
        report(row)
    # Project-scoped p95 targets; a global search may take twice as long.
    target = {100_000: 25, 1_000_000: 100}
    for r in results:
        t = target.get(r["pages"])
        if t:
            ti = {k: r[k]["text_index"] for k in ("project_scoped", "global")}
            ok = ti["project_scoped"]["p95_ms"] <= t and ti["global"]["p95_ms"] <= 2 * t
            print(f"{r['pages']} pages: p95 target {t} ms project-scoped, {2 * t} ms global -> "
                  f"{'OK' if ok else 'MISSED'} on the wall clock (load average {r['load_avg']}); "
                  f"CPU p95 {ti['project_scoped']['cpu_p95_ms']} / {ti['global']['cpu_p95_ms']} ms")
    print("results:", write_result("query_latency", {"sizes": results}))


def report(row: dict) -> None:
    """Print one size's figures as a table (wall and CPU, each side), its stages and footprint."""
    m = machine_info()
    print(f"\n{row['pages']:,} pages, {row['projects']} projects, {row['observations']:,} observations; "
          f"{m.get('cpu')} x{row['cpus']}, load average {row['load_avg']}")
    print(f"{'':28} {'wall p50':>9} {'wall p95':>9} {'CPU p50':>9} {'CPU p95':>9}")
    for mix in ("project_scoped", "global", "pessimistic_project_scoped", "pessimistic_global"):
        for side, f in (row.get(mix) or {}).items():
            print(f"{mix + ' ' + side:28} {f['p50_ms']:9.2f} {f['p95_ms']:9.2f} {f['cpu_p50_ms']:9.2f} "
                  f"{f['cpu_p95_ms']:9.2f}")
    for side, mixes in row["stage_ms"].items():
        for mix, st in mixes.items():
            print(f"stages {side} {mix} (wall p50/p95 ms): "
                  + ", ".join(f"{k} {v['p50_ms']}/{v['p95_ms']}" for k, v in st.items()))
    print("footprint:", row["footprint"], flush=True)


if __name__ == "__main__":
    main()
