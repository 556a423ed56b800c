"""LoCoMo dev with and without ``reranker = "llm"``, the fake LLM as the only model.

Two full stacks ingest LoCoMo dev through the real hook path (as ``bench.locomo``): one
without a reranker (the baseline), one with ``[rerank] provider = "llm"`` whose ``[llm]`` is
``aimem_testing.fake_llm`` over real HTTP. The second stack is asked every question once
per fake behaviour:

* ``keep``: the fake ranks the candidates in the order given (a model that agrees);
* ``reverse``: the fake ranks them backwards (a model that disagrees: shows the answer is
  really applied);
* ``error``: the fake answers HTTP 500; ``timeout``: it answers after the query's budget.
  Both must keep the local order: their rankings are compared with the baseline's.

The fake knows nothing about the questions, so none of this measures a model's gain; the
``ceiling`` row is what a perfect reranker of the same candidates could reach (an evidence
session anywhere in the top ``top_n`` fused hits counts as found first). Scored per half:
conversations 0–2 (where ranking is tuned) and 3–4 (the check). Usage::

    python -m bench.locomo_rerank [--data ../shared/data/locomo/locomo-dev.json]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import table, write_result
from bench.locomo import DEFAULT_DATA, Loaded, halves, ingest_conversation, load, score_halves, wait_visible

TOP_N = 30  # the LLM reranker's bound (aimem_common.rerank.LLM_MAX_CANDIDATES)
COLUMNS = ["run", "half", "n", "hit@1", "hit@5", "hit@10", "mrr", "p50_ms", "p95_ms"]


async def ask(client: httpx.AsyncClient, query: str, data: Loaded, limit: int) -> tuple[list[list[int]], list[float]]:
    from bench.locomo import ranked_sessions

    projects = {c.sample_id: c.project for c in data.conversations}
    rankings, lat = [], []
    for q in data.questions:  # one at a time, as one agent asks
        t0 = time.perf_counter()
        r = await client.post(f"{query}/api/v1/search", json={
            "query": q.text, "workspace": "default", "project": projects[q.sample_id], "limit": limit})
        lat.append((time.perf_counter() - t0) * 1000)
        r.raise_for_status()
        rankings.append(ranked_sessions(r.json(), q.sample_id))
    return rankings, lat


def rows_for(run: str, data: Loaded, rankings: list[list[int]], lat: list[float]) -> list[dict[str, Any]]:
    out = []
    for row in score_halves(data, rankings):
        ls = sorted(lat[i] for i in row["indices"])
        out.append({"run": run, **{k: row[k] for k in ("half", "n", "hit@1", "hit@5", "hit@10", "mrr")},
                    "p50_ms": ls[len(ls) // 2], "p95_ms": ls[int(len(ls) * 0.95) - 1]})
    return out


def ceiling(data: Loaded, wide: list[list[int]]) -> list[dict[str, Any]]:
    """A perfect reranker of the top ``TOP_N`` candidates: found = evidence among them."""
    out = []
    for half, ids in halves(data).items():
        pick = [(q, r) for q, r in zip(data.questions, wide) if q.sample_id in ids]
        found = sum(bool(set(r) & q.sessions) for q, r in pick) / len(pick)
        out.append({"run": f"ceiling (evidence in top {TOP_N})", "half": half, "n": len(pick), "hit@1": found,
                    "hit@5": found, "hit@10": found, "mrr": found, "p50_ms": None, "p95_ms": None})
    return out


async def run_stack(data: Loaded, env: dict[str, str], body) -> Any:
    from aimem_testing.stack import LocalStack

    with tempfile.TemporaryDirectory(prefix="aimem-locomo-rerank-") as tmp:
        with LocalStack(Path(tmp) / "data", Path(tmp) / "logs", extra_env=env) as stack:
            async with httpx.AsyncClient(timeout=60, headers=stack.headers) as client:
                ingress, query = stack.url("ingress"), stack.url("query")
                await asyncio.gather(*(ingest_conversation(client, ingress, c) for c in data.conversations))
                await wait_visible(client, query, data.conversations, timeout_s=300)
                return await body(client, query)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from aimem_testing.fake_llm import FakeLLM

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args(argv)
    data = load(args.data)
    rows: list[dict[str, Any]] = []
    base_rank: list[list[int]] = []

    async def baseline(client, query):
        rank, lat = await ask(client, query, data, 10)
        wide, _ = await ask(client, query, data, TOP_N)
        return rank, lat, wide

    rank, lat, wide = asyncio.run(run_stack(data, {}, baseline))
    base_rank = rank
    rows += rows_for("no reranker", data, rank, lat) + ceiling(data, wide)

    checks: dict[str, Any] = {}
    with FakeLLM() as fake:
        env = {"AIMEM_LLM__PROVIDER": "openai-compat", "AIMEM_LLM__MODEL": "fake", "AIMEM_LLM__BASE_URL": fake.url,
               "AIMEM_LLM__API_KEY": "x", "AIMEM_RERANK__PROVIDER": "llm", "AIMEM_RERANK__TOP_N": str(TOP_N),
               "AIMEM_CONSOLIDATION__ENABLED": "false", "AIMEM_AUTO_IMPROVE__SCHEDULER__ENABLED": "false"}

        def keep(req):
            return {"ranking": list(range(TOP_N))}

        def reverse(req):
            import json as _json

            user = req["messages"][-1]["content"]
            docs = _json.loads(user.split('label="documents">\n', 1)[1].split("\n</untrusted-data>", 1)[0])
            return {"ranking": list(range(len(docs)))[::-1]}

        async def policies(client, query):
            out = {}
            for name in ("keep", "reverse", "error", "timeout"):
                fake.reset()
                fake.mode = {"error": "500", "timeout": "hang"}.get(name, "good")
                fake.hang_s = 5.0
                fake.answers["rerank"] = reverse if name == "reverse" else keep
                r, lt = await ask(client, query, data, 10)
                calls = fake.chat_requests()
                docs = []
                for c in calls:
                    user = c["body"]["messages"][-1]["content"]
                    docs.append(user.count('"text"'))
                out[name] = (r, lt, len(calls), max(docs) if docs else 0)
            return out

        got = asyncio.run(run_stack(data, env, policies))
    for name, (r, lt, calls, max_docs) in got.items():
        rows += rows_for(f"llm reranker, fake '{name}'", data, r, lt)
        same = sum(a == b for a, b in zip(r, base_rank))
        checks[name] = {"llm_calls": calls, "questions": len(r), "max_docs_per_call": max_docs,
                        "rankings_equal_to_baseline": same}
    print(f"\nLoCoMo dev, {len(data.questions)} questions; reranker bound: top {TOP_N}")
    print(table(rows, COLUMNS))
    for name, c in checks.items():
        print(f"fake '{name}': {c['llm_calls']} LLM calls for {c['questions']} questions, "
              f"≤ {c['max_docs_per_call']} documents per call, {c['rankings_equal_to_baseline']} rankings "
              "equal to the baseline's")
    result = {"rows": rows, "checks": checks, "top_n": TOP_N, "questions": len(data.questions)}
    print(f"results: {write_result('locomo-rerank', result)}")
    return result


if __name__ == "__main__":
    main()
