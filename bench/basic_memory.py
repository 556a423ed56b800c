"""Side by side with basic-memory (PyPI ``basic-memory``, keyword search): LoCoMo + indexing.

1. LoCoMo: the same sessions written as basic-memory notes (one note per session, the same
   ``[<date>] <speaker>: <text>`` lines aimem's session pages carry, one bm project per
   conversation), the same questions through its MCP ``search_notes`` tool (streamable
   HTTP, official ``mcp`` client), scored with the same session-level metrics as
   ``bench/locomo.py``.
2. Indexing: a generated 5,000-note vault — basic-memory's ``bm project add`` + ``index``
   wall time vs aimem's time to take the same notes through the real write path
   (``page.write_batch`` over the bus, 100 per batch, until the writer replied for all).

basic-memory 0.24 needs Python ≥ 3.12: the bench makes a venv with ``pyenv``'s 3.12 (or
``python3.12`` on PATH) under ``~/.cache/aimem-bench/bm-venv`` and isolates it with
``HOME=<tmp>``; it rewrites the notes it indexes, so it gets its own copy. Usage::

    python -m bench.basic_memory [--data ../shared/data/locomo/locomo-dev.json] [--notes 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import table, write_result
from bench.locomo import DEFAULT_DATA, Loaded, load, score, session_id

CACHE = Path.home() / ".cache" / "aimem-bench"


def python312() -> str | None:
    """Find a Python ≥ 3.12 interpreter (pyenv's 3.12.x first)."""
    try:
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=10).stdout.strip()
        if root:
            for cand in sorted(Path(root, "versions").glob("3.12.*"), reverse=True):
                if (cand / "bin" / "python").exists():
                    return str(cand / "bin" / "python")
    except (OSError, subprocess.TimeoutExpired):
        pass
    return shutil.which("python3.12") or shutil.which("python3.13")


def ensure_bm() -> Path:
    """Return the ``bm`` executable, creating the cached venv on first use."""
    venv = CACHE / "bm-venv"
    bm = venv / "bin" / "bm"
    if bm.exists():
        return bm
    py = python312()
    if not py:
        raise SystemExit("basic-memory needs Python >= 3.12 (pyenv 3.12.x or python3.12 on PATH)")
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run([py, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "basic-memory>=0.24,<0.25"], check=True)
    return bm


def bm_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIMEM_", "BASIC_MEMORY"))}
    env["HOME"] = str(home)
    return env


def run_bm(bm: Path, home: Path, *args: str, timeout: float = 1800) -> float:
    """Run ``bm <args>``; return its wall time in seconds (raises on failure)."""
    t0 = time.perf_counter()
    r = subprocess.run([str(bm), *args], env=bm_env(home), capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"bm {' '.join(args)} failed: {r.stderr[-800:]}")
    return time.perf_counter() - t0


def write_locomo_notes(data: Loaded, root: Path) -> None:
    for conv in data.conversations:
        d = root / conv.project
        d.mkdir(parents=True, exist_ok=True)
        for n, (_date, lines) in conv.sessions.items():
            sid = session_id(conv.sample_id, n)
            text = f"---\ntitle: {sid}\n---\n# Session {sid}\n\n" + "\n".join(f"- {ln}" for ln in lines) + "\n"
            (d / f"{sid}.md").write_text(text)


async def ask_bm(url: str, data: Loaded) -> tuple[list[list[int]], list[float]]:
    from mcp import Client

    rankings, lat = [], []
    async with Client(url) as client:
        for q in data.questions:
            project = f"locomo-{q.sample_id}"
            t0 = time.perf_counter()
            res = await client.call_tool("search_notes", {"query": q.text, "project": project, "page_size": 10})
            lat.append((time.perf_counter() - t0) * 1000)
            # The tool answers JSON or markdown depending on version/format: the note names
            # (``<sample>-s<n>``) in order of appearance are the ranking either way.
            ranked: list[int] = []
            for m in re.finditer(rf"{re.escape(q.sample_id)}-s(\d+)", _tool_text(res)):
                if int(m.group(1)) not in ranked:
                    ranked.append(int(m.group(1)))
            rankings.append(ranked)
    return rankings, lat


def _tool_text(res: Any) -> str:
    """All text a tool result carries (structured content first, then text blocks)."""
    parts = []
    structured = getattr(res, "structured_content", None) or getattr(res, "structuredContent", None)
    if structured:
        parts.append(json.dumps(structured))
    for block in getattr(res, "content", []) or []:
        text = getattr(block, "text", None)
        if text:
            parts.append(text)
    return "\n".join(parts[:1] or parts)


def start_bm_mcp(bm: Path, home: Path, port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [str(bm), "mcp", "--transport", "streamable-http", "--port", str(port)],
        env=bm_env(home), stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    from aimem_common.natsserver import wait_port

    if not wait_port("127.0.0.1", port, 120):
        proc.kill()
        raise RuntimeError(f"bm mcp did not listen: {log.read_text()[-800:]}")
    return proc


def locomo_bm(bm: Path, tmp: Path, data_path: Path) -> dict[str, Any]:
    from aimem_common.natsserver import free_port

    data = load(data_path)
    home, notes = tmp / "bm-home", tmp / "bm-locomo"
    home.mkdir()
    write_locomo_notes(data, notes)
    t0 = time.perf_counter()
    for conv in data.conversations:
        run_bm(bm, home, "project", "add", conv.project, str(notes / conv.project))
    index_s = time.perf_counter() - t0
    port = free_port()
    proc = start_bm_mcp(bm, home, port, tmp / "bm-mcp.log")
    try:
        rankings, lat = asyncio.run(ask_bm(f"http://127.0.0.1:{port}/mcp", data))
    finally:
        proc.terminate()
        proc.wait(20)
    rows = score(data.questions, rankings)
    print(f"\nLoCoMo retrieval (basic-memory {bm_version(bm)}, keyword search): {len(data.questions)} questions; "
          f"indexed in {index_s:.1f} s; skipped: {dict(data.skipped)}")
    print(table(rows, ["category", "n", "hit@1", "hit@5", "hit@10", "recall@5", "recall@10", "mrr"]))
    return {"rows": rows, "index_s": index_s, "query_ms_p50": sorted(lat)[len(lat) // 2] if lat else None}


def bm_version(bm: Path) -> str:
    r = subprocess.run([str(bm.parent / "pip"), "show", "basic-memory"], capture_output=True, text=True)
    return next((ln.split(":", 1)[1].strip() for ln in r.stdout.splitlines() if ln.startswith("Version")), "?")


WORDS = ("cache invalidation retry backoff queue worker deploy rollback migration schema index "
         "latency timeout token auth session cookie handler router middleware logging metrics "
         "tracing build docker compose helm chart ingress pod volume backup restore").split()


def vault_notes(n: int, seed: int = 7) -> list[tuple[str, str, str]]:
    """Return ``n`` generated coding notes ``(path, title, body)`` (deterministic)."""
    rng = random.Random(seed)
    dirs = ["decisions", "gotchas", "procedures", "concepts"]
    out = []
    for i in range(n):
        d = dirs[i % len(dirs)]
        title = f"{d[:-1].title()} {i}: {' '.join(rng.sample(WORDS, 3))}"
        paras = [" ".join(rng.choices(WORDS, k=40)) + "." for _ in range(4)]
        links = f"See [[{dirs[(i + 1) % 4]}/note-{(i + 1) % n:05d}.md]]."
        out.append((f"{d}/note-{i:05d}.md", title, "\n\n".join(paras + [links])))
    return out


def index_bm(bm: Path, tmp: Path, notes: list[tuple[str, str, str]], *, timeout_s: float = 1800) -> float:
    """Wall seconds of ``bm project add`` over the notes written as a vault.

    Raises:
        subprocess.TimeoutExpired: basic-memory ran past ``timeout_s`` (its process is killed).
    """
    home, root = tmp / "bm-home-vault", tmp / "bm-vault"
    home.mkdir()
    for path, title, body in notes:
        p = root / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"---\ntitle: {json.dumps(title)}\n---\n# {title}\n\n{body}\n")  # quoted: titles hold ': '
    return run_bm(bm, home, "project", "add", "vault", str(root), timeout=timeout_s)


def index_aimem(tmp: Path, notes: list[tuple[str, str, str]]) -> float:
    """Wall time to apply every note through the real write path (bus → writer → git)."""
    from aimem_common import bus as busmod
    from aimem_common.config import BusSettings
    from aimem_common.commands import make_envelope
    from aimem_testing.stack import LocalStack

    async def push(nats_url: str, token: str | None) -> float:
        settings = BusSettings(nats_url=nats_url, token=token, request_timeout_s=120)
        nc = await busmod.connect(settings, name="bench", reconnect=False)
        bus = busmod.Bus(nc, settings)
        t0 = time.perf_counter()
        batches = [notes[i:i + 100] for i in range(0, len(notes), 100)]
        sem = asyncio.Semaphore(4)

        async def one(batch) -> None:
            async with sem:
                env = make_envelope("page.write_batch", {"pages": [
                    {"path": p, "title": t, "body": b} for p, t, b in batch]}, project="vault", actor="bench")
                await bus.request(env, timeout_s=120)

        await asyncio.gather(*(one(b) for b in batches))
        took = time.perf_counter() - t0
        await nc.close()
        return took

    with LocalStack(tmp / "aimem-vault", tmp / "aimem-vault-logs") as stack:
        return asyncio.run(push(stack.nats_url, stack.token))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--notes", type=int, default=5000)
    ap.add_argument("--skip-locomo", action="store_true")
    ap.add_argument("--index-timeout", type=float, default=600.0,
                    help="seconds basic-memory may take to index the vault before it is stopped and noted")
    args = ap.parse_args(argv)
    bm = ensure_bm()
    result: dict[str, Any] = {"basic_memory_version": bm_version(bm)}
    with tempfile.TemporaryDirectory(prefix="aimem-bm-") as tmpd:
        tmp = Path(tmpd)
        if not args.skip_locomo:
            result["locomo"] = locomo_bm(bm, tmp, args.data)
        notes = vault_notes(args.notes)
        try:
            result["index_basic_memory_s"] = index_bm(bm, tmp, notes, timeout_s=args.index_timeout)
        except subprocess.TimeoutExpired:  # the LoCoMo figures above still count; say how long it ran
            result["index_basic_memory_s"] = None
            result["index_basic_memory_timed_out_s"] = args.index_timeout
        result["index_aimem_s"] = index_aimem(tmp, notes)
    bm_s = result["index_basic_memory_s"]
    ratio = bm_s / result["index_aimem_s"] if bm_s and result["index_aimem_s"] else None
    print(f"\nIndexing a {args.notes}-note vault")
    print(table([{"system": "aimem (bus → writer → SQLite + git)", "seconds": result["index_aimem_s"]},
                 {"system": f"basic-memory {result['basic_memory_version']} (project add + index)",
                  "seconds": bm_s if bm_s is not None else f"> {args.index_timeout:g} (stopped)"},
                 {"system": "ratio basic-memory / aimem",
                  # stopped: it took longer than the timeout, so the ratio is at least timeout / aimem
                  "seconds": f"{ratio:.1f}" if ratio else (
                      f"> {args.index_timeout / result['index_aimem_s']:.1f}" if result["index_aimem_s"] else "—")}]))
    result["index_ratio_bm_over_aimem"] = ratio
    path = write_result("basic-memory", result)
    print(f"results: {path}")
    return result


if __name__ == "__main__":
    main()
