"""LoCoMo retrieval through the real hook path, scored at session level.

Each LoCoMo conversation becomes one aimem project (``locomo-<sample_id>``); each of its
sessions one agent session posted to ``POST /hook`` as Claude Code would (SessionStart,
one UserPromptSubmit per turn — ``[<date>] <speaker>: <text>`` — then SessionEnd), so the
writer's rule-based summary page ``sessions/<id>.md`` is what gets searched. Every question
(category 5, adversarial, skipped; questions whose evidence ids are malformed or point at a
missing session skipped and counted) is asked with ``memory_query`` scoped to its
conversation, over HTTP (``POST /api/v1/search``) and, with the stack's mcp-gateway, through
MCP (the official ``mcp`` client), the two taking turns; they must rank alike. A hit counts
when its session is one of the evidence sessions. Latency: each interface's wall p50/p95 and
its serving process's CPU per question.

Metrics per category id: hit@1/5/10 (an evidence session in the top k distinct sessions),
recall@5/10 (share of the evidence sessions in the top k), MRR (first evidence session,
top 10). With ``--embedder local`` the questions wait until the maintainer has embedded
every live page (read-only DB poll: a current ``local`` vector per page), and a sample of
questions is asked with ``explain`` to check the query side really fuses the vector stream.
Usage::

    python -m bench.locomo [--data ../shared/data/locomo/locomo-dev.json] [--embedder local]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.common import SHARED, table, write_result

DEFAULT_DATA = SHARED / "data" / "locomo" / "locomo-dev.json"
EVIDENCE_RE = re.compile(r"^D(\d+):(\d+)$")
KS = (1, 5, 10)


@dataclass
class Question:
    sample_id: str
    category: int
    text: str
    sessions: set[int]


@dataclass
class Conversation:
    sample_id: str
    project: str
    sessions: dict[int, tuple[str, list[str]]]  # number -> (date, turn lines)


@dataclass
class Loaded:
    conversations: list[Conversation]
    questions: list[Question]
    skipped: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def project_name(sample_id: str) -> str:
    return "locomo-" + re.sub(r"[^A-Za-z0-9._-]+", "-", sample_id)


def session_id(sample_id: str, n: int) -> str:
    return f"{sample_id}-s{n}"


def load(path: Path) -> Loaded:
    """Parse the LoCoMo JSON into conversations (turn lines per session) and questions."""
    import json

    raw = json.loads(path.read_text())
    convs, questions = [], []
    skipped: dict[str, int] = defaultdict(int)
    for item in raw:
        sid = str(item["sample_id"])
        conv = item["conversation"]
        sessions: dict[int, tuple[str, list[str]]] = {}
        for key, turns in conv.items():
            m = re.fullmatch(r"session_(\d+)", key)
            if not m or not isinstance(turns, list):
                continue
            n = int(m.group(1))
            date = str(conv.get(f"session_{n}_date_time", ""))
            lines = []
            for t in turns:
                text = str(t.get("text", "")).strip()
                if t.get("blip_caption"):
                    text += f" (shares a photo: {t['blip_caption']})"
                lines.append(f"[{date}] {t.get('speaker', '?')}: {text}")
            sessions[n] = (date, lines)
        convs.append(Conversation(sid, project_name(sid), dict(sorted(sessions.items()))))
        for qa in item["qa"]:
            cat = int(qa.get("category", 0))
            if cat == 5:
                skipped["category_5_adversarial"] += 1
                continue
            ev = qa.get("evidence") or []
            nums = set()
            bad = not ev
            for e in ev:
                m = EVIDENCE_RE.match(str(e).strip())
                if not m or int(m.group(1)) not in sessions:
                    bad = True
                    break
                nums.add(int(m.group(1)))
            if bad:
                skipped["malformed_evidence"] += 1
                continue
            questions.append(Question(sid, cat, str(qa["question"]), nums))
    return Loaded(convs, questions, skipped)


async def post_hook(client: httpx.AsyncClient, ingress: str, conv: Conversation, payload: dict, key: str) -> None:
    params = {"agent": "claude-code", "project": conv.project}
    for _ in range(50):
        r = await client.post(f"{ingress}/hook", params=params, json=payload, headers={"Idempotency-Key": key})
        if r.status_code == 202:
            return
        if r.status_code in (429, 503):
            await asyncio.sleep(float(r.headers.get("Retry-After", "0.5")))
            continue
        raise RuntimeError(f"POST /hook {r.status_code}: {r.text[:300]}")
    raise RuntimeError("POST /hook kept answering 429/503")


async def ingest_conversation(client: httpx.AsyncClient, ingress: str, conv: Conversation) -> int:
    """Post every session of ``conv`` in order; return the number of hook events."""
    cwd = f"/bench/locomo/{conv.sample_id}"
    n_events = 0
    for n, (_date, lines) in conv.sessions.items():
        sid = session_id(conv.sample_id, n)
        base = {"session_id": sid, "cwd": cwd, "transcript_path": f"/bench/{sid}.jsonl"}
        await post_hook(client, ingress, conv, {**base, "hook_event_name": "SessionStart", "source": "startup"}, f"{sid}:start")
        for i, line in enumerate(lines):
            await post_hook(client, ingress, conv, {**base, "hook_event_name": "UserPromptSubmit", "prompt": line}, f"{sid}:{i}")
        await post_hook(client, ingress, conv, {**base, "hook_event_name": "SessionEnd", "reason": "exit"}, f"{sid}:end")
        n_events += len(lines) + 2
    return n_events


async def wait_visible(client: httpx.AsyncClient, query: str, convs: list[Conversation], timeout_s: float) -> None:
    """Wait until every session page is readable through the query API."""
    pending = [(c, n) for c in convs for n in c.sessions]
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        still = []
        for c, n in pending:
            r = await client.get(f"{query}/api/v1/workspaces/default/projects/{c.project}/page",
                                 params={"path": f"sessions/{session_id(c.sample_id, n)}.md"})
            if r.status_code != 200:
                still.append((c, n))
        pending = still
        if pending:
            await asyncio.sleep(0.5)
    if pending:
        raise RuntimeError(f"{len(pending)} session pages not visible after {timeout_s} s")


def ranked_sessions(result: dict[str, Any], sample_id: str) -> list[int]:
    """Distinct session numbers in rank order from page hits (raw hits when no page hit)."""
    out: list[int] = []
    prefix = f"{sample_id}-s"
    for hit in result.get("hits", []) or result.get("raw_hits", []):
        sid = hit.get("session_id") or ""
        if sid.startswith(prefix):
            try:
                n = int(sid[len(prefix):])
            except ValueError:
                continue
            if n not in out:
                out.append(n)
    return out


def score(questions: list[Question], rankings: list[list[int]]) -> list[dict[str, Any]]:
    """Aggregate hit@k, recall@k and MRR per category id (+ an ``all`` row)."""
    by_cat: dict[str, list[tuple[Question, list[int]]]] = defaultdict(list)
    for q, r in zip(questions, rankings):
        by_cat[str(q.category)].append((q, r))
        by_cat["all"].append((q, r))
    rows = []
    for cat in sorted(by_cat, key=lambda c: (c == "all", c)):
        items = by_cat[cat]
        row: dict[str, Any] = {"category": cat, "n": len(items)}
        for k in KS:
            row[f"hit@{k}"] = sum(bool(set(r[:k]) & q.sessions) for q, r in items) / len(items)
        for k in (5, 10):
            row[f"recall@{k}"] = sum(len(set(r[:k]) & q.sessions) / len(q.sessions) for q, r in items) / len(items)
        mrr = 0.0
        for q, r in items:
            for i, n in enumerate(r[:10]):
                if n in q.sessions:
                    mrr += 1 / (i + 1)
                    break
        row["mrr"] = mrr / len(items)
        rows.append(row)
    return rows


HALF_COLUMNS = ["half", "n", "hit@1", "hit@5", "hit@10", "mrr"]


def halves(data: Loaded) -> dict[str, set[str]]:
    """Sample ids of conversations 0–2 (``tuned 0-2``: ranking is tuned on these) and 3–4
    (``check 3-4``: nobody tunes on them; a ranking change must hold there too), in file order."""
    ids = [c.sample_id for c in data.conversations]
    return {"tuned 0-2": set(ids[:3]), "check 3-4": set(ids[3:5])}


def score_halves(data: Loaded, rankings: list[list[int]]) -> list[dict[str, Any]]:
    """The ``all`` row of ``score`` for each half of ``halves`` (``half``, ``n``, hit@k,
    recall@k, ``mrr``), plus ``indices``: the questions of that half (positions in
    ``data.questions``), for callers that add per-half figures of their own."""
    out = []
    for half, ids in halves(data).items():
        pick = [i for i, q in enumerate(data.questions) if q.sample_id in ids]
        if not pick:
            continue
        row = score([data.questions[i] for i in pick], [rankings[i] for i in pick])[-1]
        out.append({"half": half, **{k: v for k, v in row.items() if k != "category"}, "indices": pick})
    return out


def half_table(rows: list[dict[str, Any]]) -> str:
    """``score_halves`` rows as a markdown table (without their ``indices``)."""
    return table(rows, HALF_COLUMNS)


def strip_indices(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``score_halves`` rows as stored in a result file: figures only."""
    return [{k: v for k, v in r.items() if k != "indices"} for r in rows]


async def ask_all(client: httpx.AsyncClient, query: str, data: Loaded, limit: int = 10,
                  concurrency: int = 1) -> tuple[list[list[int]], list[float]]:
    """Every question over HTTP (``POST /api/v1/search``); returns the rankings and each
    answer's wall ms. One at a time by default, as one agent asks: the latency is then a
    question's own, not the queue of ``concurrency`` questions sharing the box's cores."""
    projects = {c.sample_id: c.project for c in data.conversations}
    sem = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one(q: Question) -> list[int]:
        async with sem:
            t0 = time.perf_counter()
            r = await client.post(f"{query}/api/v1/search", json={
                "query": q.text, "workspace": "default", "project": projects[q.sample_id], "limit": limit})
            latencies.append((time.perf_counter() - t0) * 1000)
            r.raise_for_status()
            return ranked_sessions(r.json(), q.sample_id)

    return list(await asyncio.gather(*(one(q) for q in data.questions))), latencies


@dataclass
class Asked:
    """One interface's answers to every question: rankings, wall ms each, and the serving
    process's CPU seconds over all of them (None when its pid is not known)."""

    rankings: list[list[int]] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    server_cpu_s: float | None = None


async def ask_http_and_mcp(client: httpx.AsyncClient, query: str, gateway: str, data: Loaded, *,
                           token: str | None = None, pids: dict[str, int] | None = None,
                           limit: int = 10) -> dict[str, Asked]:
    """Every question over HTTP (``POST /api/v1/search``) and through MCP (``memory_query``
    with the official ``mcp`` client, one session over the gateway), the two taking turns
    question by question (an A/B in the same seconds: a shared machine's load moves both
    alike). One at a time, as one agent asks. With ``pids`` (service name → pid) each side
    also gets its serving process's CPU seconds (``query``, ``mcp-gateway``: /proc, 10 ms
    ticks, so only the sum over all questions means something)."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from bench.common import cpu_seconds_of

    projects = {c.sample_id: c.project for c in data.conversations}
    out = {"http": Asked(), "mcp": Asked()}
    server = {side: (pids or {}).get(name) for side, name in (("http", "query"), ("mcp", "mcp-gateway"))}
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(gateway + "/mcp", http_client=http)) as mcp:
            cpu0 = {side: cpu_seconds_of([pid]) for side, pid in server.items() if pid}
            for q in data.questions:
                args = {"query": q.text, "workspace": "default", "project": projects[q.sample_id], "limit": limit}
                t0 = time.perf_counter()
                r = await client.post(f"{query}/api/v1/search", json=args)
                out["http"].wall_ms.append((time.perf_counter() - t0) * 1000)
                r.raise_for_status()
                out["http"].rankings.append(ranked_sessions(r.json(), q.sample_id))
                t0 = time.perf_counter()
                res = await mcp.call_tool("memory_query", args)
                out["mcp"].wall_ms.append((time.perf_counter() - t0) * 1000)
                if res.is_error:
                    raise RuntimeError(f"memory_query failed: {res.content}")
                out["mcp"].rankings.append(ranked_sessions(res.structured_content or {}, q.sample_id))
            for side, c0 in cpu0.items():  # each process serves only its own side
                out[side].server_cpu_s = cpu_seconds_of([server[side]]) - c0
    return out


def embedding_backlog(db_path: Path, provider: str) -> tuple[int, int]:
    """``(live pages, live pages without a current vector of provider)`` (read-only DB)."""
    from aimem_common.db.connect import open_reader

    conn = open_reader(db_path)
    try:
        live = conn.execute("SELECT count(*) FROM pages WHERE is_latest = 1").fetchone()[0]
        missing = conn.execute(
            "SELECT count(*) FROM pages p WHERE p.is_latest = 1 AND NOT EXISTS (SELECT 1 FROM page_embeddings e"
            " WHERE e.page_id = p.id AND e.provider = ? AND e.content_hash = p.content_hash)", (provider,),
        ).fetchone()[0]
        return int(live), int(missing)
    finally:
        conn.close()


async def wait_embedded(db_path: Path, provider: str, timeout_s: float) -> int:
    """Wait until every live page has a current vector; return the number of live pages.

    Raises:
        RuntimeError: pages still without a vector after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        live, missing = await asyncio.to_thread(embedding_backlog, db_path, provider)
        if live and not missing:
            return live
        if time.monotonic() > deadline:
            raise RuntimeError(f"{missing} of {live} pages still without a {provider} vector after {timeout_s} s")
        await asyncio.sleep(1.0)


async def check_vector_stream(client: httpx.AsyncClient, query: str, data: Loaded, sample: int = 20) -> float:
    """Ask ``sample`` questions with ``explain``; return the share that fused the vector stream."""
    projects = {c.sample_id: c.project for c in data.conversations}
    used = 0
    qs = data.questions[:sample]
    for q in qs:
        r = await client.post(f"{query}/api/v1/search", json={
            "query": q.text, "workspace": "default", "project": projects[q.sample_id], "limit": 10, "explain": True})
        r.raise_for_status()
        body = r.json()
        if "vector" in body.get("streams_active", []):
            used += 1
        elif body.get("streams_skipped"):
            print(f"vector stream skipped: {body['streams_skipped']} for {q.text!r}")
    return used / len(qs) if qs else 0.0


def _p50_p95(ms: list[float]) -> tuple[float | None, float | None]:
    """Median and 95th percentile (nearest rank below) of ``ms``; None for an empty list."""
    if not ms:
        return None, None
    xs = sorted(ms)
    return xs[len(xs) // 2], xs[int(len(xs) * 0.95) - 1]


async def run(data_path: Path, ingress: str, query: str, label: str, *, db_path: Path | None = None,
              embedder: str = "none", token: str | None = None, gateway: str | None = None) -> dict[str, Any]:
    data = load(data_path)
    extra: dict[str, Any] = {}
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with httpx.AsyncClient(timeout=30, headers=headers) as client:
        t0 = time.perf_counter()
        events = sum(await asyncio.gather(*(ingest_conversation(client, ingress, c) for c in data.conversations)))
        await wait_visible(client, query, data.conversations, timeout_s=300)
        ingest_s = time.perf_counter() - t0
        if embedder != "none":
            if db_path is None:
                raise SystemExit("--embedder with a running stack needs --db (its memory.sqlite, read-only)")
            t1 = time.perf_counter()
            extra["embedded_pages"] = await wait_embedded(db_path, embedder, timeout_s=1800)
            extra["embed_wait_s"] = time.perf_counter() - t1
            extra["vector_stream_share"] = await check_vector_stream(client, query, data)
            if extra["vector_stream_share"] == 0:
                raise RuntimeError("the query side fused no vector stream: is embedding.provider set for query?")
        if gateway:
            from bench.footprint import stack_processes

            pids = stack_processes(db_path.parent.parent) if db_path is not None else None
            asked = await ask_http_and_mcp(client, query, gateway, data, token=token, pids=pids)
            rankings, lat = asked["http"].rankings, asked["http"].wall_ms
            if asked["mcp"].rankings != rankings:
                raise RuntimeError("memory_query over MCP ranked the sessions differently from /api/v1/search")
            p50, p95 = _p50_p95(asked["mcp"].wall_ms)
            extra.update(mcp_query_ms_p50=p50, mcp_query_ms_p95=p95)
            for side, a in asked.items():
                if a.server_cpu_s is not None:
                    extra[f"{side}_server_cpu_ms_per_query"] = a.server_cpu_s * 1000 / len(data.questions)
        else:
            rankings, lat = await ask_all(client, query, data)
    rows = score(data.questions, rankings)
    half_rows = score_halves(data, rankings)
    print(f"\nLoCoMo retrieval ({label}): {len(data.conversations)} conversations, "
          f"{sum(len(c.sessions) for c in data.conversations)} sessions, {events} hook events "
          f"ingested + visible in {ingest_s:.1f} s; {len(data.questions)} questions; skipped: {dict(data.skipped)}")
    if "embedded_pages" in extra:
        print(f"embeddings: {extra['embedded_pages']} pages embedded {extra['embed_wait_s']:.1f} s after visible; "
              f"vector stream fused in {extra['vector_stream_share']:.0%} of sampled questions")
    print(table(rows, ["category", "n", "hit@1", "hit@5", "hit@10", "recall@5", "recall@10", "mrr"]))
    print(half_table(half_rows))
    p50, p95 = _p50_p95(lat)
    print(f"query wall ms p50/p95: HTTP {p50:.1f} / {p95:.1f}" + (
        f", MCP {extra['mcp_query_ms_p50']:.1f} / {extra['mcp_query_ms_p95']:.1f}" if "mcp_query_ms_p95" in extra else "")
        + "".join(f"; {k} {v:.2f}" for k, v in extra.items() if k.endswith("_cpu_ms_per_query"))
        + f"; load {os.getloadavg()[0]:.2f}")
    return {"label": label, "rows": rows, "halves": strip_indices(half_rows), "skipped": dict(data.skipped),
            "questions": len(data.questions), "events": events, "ingest_visible_s": ingest_s,
            "query_ms_p50": p50, "query_ms_p95": p95, **extra}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--ingress", help="use a running stack (ingress base URL) instead of starting one")
    ap.add_argument("--query", help="query service base URL of that running stack")
    ap.add_argument("--mcp", help="mcp-gateway base URL of that running stack (also ask every question through MCP)")
    ap.add_argument("--db", type=Path, help="that stack's memory.sqlite (read-only; to wait for embeddings)")
    ap.add_argument("--token", help="that stack's root token (its <data dir>/auth/token)")
    ap.add_argument("--embedder", choices=["none", "local"], default="none",
                    help="also configure the local embedder (vector stream in RRF)")
    ap.add_argument("--keep-db", type=Path, help="copy the stack's memory.sqlite here after the run (for --offline)")
    ap.add_argument("--offline", type=Path, metavar="DB",
                    help="no stack: ask the questions in-process against a DB kept by --keep-db (ranking work)")
    ap.add_argument("--vectors", action="store_true",
                    help="with --offline: embed the kept DB's pages (local embedder, once) and use the vector stream")
    args = ap.parse_args(argv)
    if args.offline:
        from bench.locomo_offline import offline

        result = offline(args.data, args.offline, vectors=args.vectors)
        print(f"results: {write_result('locomo-offline', result)}")
        return result
    if not args.data.exists():
        raise SystemExit(f"LoCoMo data not found at {args.data} (expected ../shared/data/locomo)")
    label = "fts+entities+links" if args.embedder == "none" else "with local embedder"
    if args.ingress and args.query:
        result = asyncio.run(run(args.data, args.ingress, args.query, label, db_path=args.db, embedder=args.embedder,
                                 token=args.token, gateway=args.mcp))
    else:
        from aimem_testing.stack import LocalStack

        # The maintainer's backfill runs every embed_interval_s (600 s by default): tick often here.
        env = ({"AIMEM_EMBEDDING__PROVIDER": "local", "HF_HUB_OFFLINE": "1", "AIMEM_MAINTENANCE__EMBED_INTERVAL_S": "5"}
               if args.embedder == "local" else {})
        with tempfile.TemporaryDirectory(prefix="aimem-locomo-") as tmp:
            with LocalStack(Path(tmp) / "data", Path(tmp) / "logs", extra_env=env) as stack:
                db = Path(tmp) / "data" / "db" / "memory.sqlite"
                result = asyncio.run(run(args.data, stack.url("ingress"), stack.url("query"), label,
                                         db_path=db, embedder=args.embedder, token=stack.token,
                                         gateway=stack.url("mcp-gateway")))
                if args.keep_db:
                    from bench.locomo_offline import keep_db

                    keep_db(db, args.keep_db)
    path = write_result(f"locomo-{args.embedder}", result)
    print(f"results: {path}")
    return result


if __name__ == "__main__":
    main()
