"""Server time of each ``/web`` picture at 10,000 pages (target: p95 ≤ 50 ms a picture).

The store is made with ``aimem_testing.Seeder``: ``--pages`` pages in one project, each
linking to three others (a few hubs get many backlinks) and naming one of 200 entities;
400 sessions of four agents over the last four weeks with 25 observations each (prompts,
tools, failures, compactions; 10,000 in all); 300 handoffs in chains (claimed, open,
stale, superseded). Each picture is timed as the route does its work: the read function
on a reader-pool connection, the server-side layout and the Jinja2 render of the screen
(autoescaped SVG); the HTTP, session and grant checks every screen shares are left out
(``web_screens`` measures those). As in a service process, what is alive once every picture
has been drawn once is frozen out of the garbage collector's walks (``freeze_heap``); without
it a full collection over the bench's own heap lands in one run in twenty, ~50 ms. Figures: ``p50_ms``/``p95_ms`` (wall) and
``cpu_p50_ms``/``cpu_p95_ms`` (this process's CPU time over the same span: what a shared,
loaded machine inflates least) over ``--n`` runs of each, with the page's size and the load
average beside them.

Usage::

    python -m bench pictures            # or: python -m bench.pictures [--pages N] [--n 100]
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from aimem_common.read import pictures
from aimem_common.readpool import ReaderPool
from aimem_common.service import freeze_heap
from aimem_testing.seed import Seeder
from bench.common import pct, table, write_result

TARGET_P95_MS = 50.0
AGENTS = ("claude-code", "codex", "gemini", "opencode")
KINDS = ("user-prompt", "pre-tool-use", "post-tool-use", "post-tool-use", "post-tool-use", "pre-compact")


def seed(db: Path, pages: int) -> tuple[object, list[str], list[str]]:
    """Fill ``db``; return the scope, some page paths and some session ids."""
    rng = random.Random(7)
    s = Seeder(db)
    scope = s.scope("default", "app")
    c = s.conn
    c.execute("BEGIN")
    paths = [f"notes/n{i:05d}.md" for i in range(pages)]
    for i, path in enumerate(paths):
        targets = {rng.randrange(pages) for _ in range(2)} | {rng.randrange(min(pages, 50))}  # hubs: the first 50
        body = f"# Note {i} <b>&amp;</b>\n" + " ".join(f"[[notes/n{t:05d}]]" for t in targets if t != i)
        s.page(scope, path, body, entities=[f"entity {rng.randrange(200)}"])
    now = datetime.now(UTC)
    sids = []
    for n in range(400):
        sid, agent = f"sess-{n:04d}", AGENTS[n % len(AGENTS)]
        sids.append(sid)
        start = now - timedelta(days=rng.uniform(0, 27), hours=1)
        c.execute("INSERT INTO sessions(workspace_id, project_id, session_id, agent, started_at, last_event_at,"
                  " observation_count) VALUES (?,?,?,?,?,?,25)",
                  (scope.workspace_id, scope.project_id, sid, agent, start.isoformat(),
                   (start + timedelta(minutes=50)).isoformat()))
        for k in range(25):
            kind = KINDS[rng.randrange(len(KINDS))]
            failed = kind == "post-tool-use" and rng.random() < 0.2
            at = (start + timedelta(minutes=2 * k)).isoformat()
            c.execute("INSERT INTO observations(workspace_id, project_id, session_id, kind, agent, title, body,"
                      " occurred_at, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                      (scope.workspace_id, scope.project_id, sid, kind, agent,
                       "Bash failed: pytest" if failed else f"{kind} {k}",
                       ("error: exit 1\n" if failed else "") + "ran the tests " * 20, at, at))
    for h in range(300):
        frm, nxt = sids[h % 400], sids[(h + 1) % 400]
        status = ("accepted", "accepted", "open", "superseded", "expired")[h % 5]
        at = (now - timedelta(days=rng.uniform(0, 20))).isoformat()
        c.execute("INSERT INTO handoffs(workspace_id, project_id, automatic, from_agent, from_session_id, title, body,"
                  " status, created_at, event_at, accepted_by, accepted_session_id, superseded_by)"
                  " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                  (scope.workspace_id, scope.project_id, 1, AGENTS[h % 4], frm, f"next step {h}", "continue",
                   status, at, at, AGENTS[(h + 1) % 4] if status == "accepted" else None,
                   nxt if status == "accepted" else None, h if status == "superseded" and h else None))
    c.execute("COMMIT")
    s.close()
    return scope, paths, sids


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=10_000)
    ap.add_argument("--n", type=int, default=100, help="runs of each picture")
    args = ap.parse_args(argv)

    from aimem_query.web import layout
    from aimem_query.web.activity import TIMELINE_PAGE
    from aimem_query.web.pictures import activity_view, graph_view
    from aimem_query.web.render import Renderer

    tmp = Path(tempfile.mkdtemp(prefix="bench-pictures-"))
    db = tmp / "db" / "memory.sqlite"
    t0 = time.perf_counter()
    scope, paths, sids = seed(db, args.pages)
    seed_s = time.perf_counter() - t0
    print(f"seeded {args.pages} pages, 400 sessions × 25 observations, 300 handoffs in {seed_s:.1f} s")
    pool = ReaderPool(db, size=1, wait_s=5)
    env = Renderer().env
    user = None
    base = {"user": user, "csrf": "x", "here": "/", "query": "", "scope": scope}
    rng = random.Random(11)

    def activity(conn):
        data = pictures.activity(conn, scope, days=28)
        return env.get_template("activity.html").render(**base, data=data, chart=activity_view(data), days=28)

    def strip(conn):
        from aimem_common.read import sessions
        sid = rng.choice(sids)
        data = sessions.session_observations(conn, scope, sid, limit=TIMELINE_PAGE, body_max_chars=4000)
        marks = pictures.session_strip(conn, scope, sid)
        st = {**layout.strip(marks["marks"], page_size=TIMELINE_PAGE), "total": marks["total"],
              "left_out": marks["left_out"]}
        return env.get_template("timeline.html").render(**base, data=data, strip=st)

    def chains(conn):
        data = pictures.handoff_chains(conn, scope)
        return env.get_template("chains.html").render(**base, data=data, pic=layout.chains(data["chains"]))

    def graph_page(conn, hops):
        path = paths[rng.randrange(50)] if rng.random() < 0.3 else rng.choice(paths)  # hubs too
        data = pictures.page_graph(conn, scope, path, hops=hops)
        return env.get_template("graph.html").render(**base, data=data, pic=graph_view(data), center=path, hops=hops)

    def graph_project(conn):
        data = pictures.project_graph(conn, scope, max_nodes=150)
        return env.get_template("graph.html").render(**base, data=data, pic=graph_view(data), center=None, hops=None)

    cached = {}

    def graph_project_cached(conn):  # the route keeps the drawing until a page of the project changes
        key = pictures.graph_version(conn, scope)
        if key not in cached:
            data = pictures.project_graph(conn, scope, max_nodes=150)
            cached[key] = (data, graph_view(data))
        data, pic = cached[key]
        return env.get_template("graph.html").render(**base, data=data, pic=pic, center=None, hops=None)

    def status(_conn):
        from aimem_query.web.health import Sample, rates
        now = time.time()
        ring = [Sample(now - 3600 + 10 * i, 5.0 * i, 20.0 * i, 0.0, float(i % 7), None) for i in range(361)]
        series = rates(ring)
        lines = [{"id": f"hl-{k}", "label": k, "unit": "", "s": layout.sparkline(series[k])} for k in series]
        return env.get_template("status.html").render(**base, services=[], lag=0, store=None, health_lines=lines,
                                                      health_source="sampled", bus=SimpleNamespace(connected=True))

    cases = {"activity (28 days)": activity, "session strip": strip, "handoff chains": chains,
             "graph around a page (1 hop)": lambda c: graph_page(c, 1),
             "graph around a page (2 hops)": lambda c: graph_page(c, 2),
             "graph of the project (150 nodes), drawn anew": graph_project,
             "graph of the project, kept drawing": graph_project_cached, "status sparklines (1 h ring)": status}
    rows = []
    with pool.connection() as conn:
        for fn in cases.values():
            fn(conn)  # warm: templates compiled, pages cached
        freeze_heap()  # as a service process does once started: its long-lived objects leave the collector's walks
        for name, fn in cases.items():
            times, cpu, size = [], [], 0
            for _ in range(args.n):
                t, c = time.perf_counter(), time.process_time()
                html = fn(conn)
                times.append((time.perf_counter() - t) * 1000)
                cpu.append((time.process_time() - c) * 1000)
                size = max(size, len(html))
            rows.append({"picture": name, "p50_ms": pct(times, 50), "p95_ms": pct(times, 95),
                         "cpu_p50_ms": pct(cpu, 50), "cpu_p95_ms": pct(cpu, 95),
                         "max_html_kib": size / 1024, "load_1m": os.getloadavg()[0],
                         "ok": pct(times, 95) <= TARGET_P95_MS})
    pool.close()
    print(table(rows))
    write_result("pictures", {"pages": args.pages, "n": args.n, "seed_s": seed_s, "target_p95_ms": TARGET_P95_MS,
                              "rows": rows})


if __name__ == "__main__":
    main()
