"""The query side embeds the question: the vector stream in /api/v1/search and MCP memory_query.

Real processes (writer, maintainer, query, mcp-gateway, NATS) and the fake OpenAI-compatible
server (``fake_llm``) as the embedder. Its vectors are hashed bags of words; ``embed_synonyms``
makes "automobile upkeep" hash like "car maintenance", so a question that shares no word with
a page is found through its vector alone.

1. Words miss, vector hits: found with ``streams_active == ["vector"]`` over HTTP and MCP.
2. Embedder down (503, then hanging past ``query_timeout_ms``): FTS still answers, within
   the bound, and ``streams_skipped`` says why; the cooldown skips the embedder meanwhile.
3. A dim switch: query vectors of another ``{model, dim}`` ignore the stale page vectors
   until the maintainer re-embeds.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
from mcp import Client

from aimem_common.db.connect import open_reader
from aimem_common.commands import make_envelope
from aimem_testing.probe import wait_for_async

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.asyncio]

SYNONYMS = {"automobile": "car", "upkeep": "maintenance"}
PAGES = {
    "concepts/car.md": "# Car maintenance\nThe car needs winter tyres; car maintenance every spring.",
    "concepts/wal.md": "# SQLite WAL\nCheckpoints run when the write-ahead log grows.",
    "concepts/nats.md": "# NATS\nJetStream keeps the work queue durable.",
}
PARAPHRASE = "automobile upkeep"  # no word of any page; its vector is the car page's


def embed_env(url: str, model: str, dim: int, **extra: str) -> dict[str, str]:
    return {"AIMEM_EMBEDDING__PROVIDER": "openai-compat", "AIMEM_EMBEDDING__BASE_URL": url,
            "AIMEM_EMBEDDING__MODEL": model, "AIMEM_EMBEDDING__DIM": str(dim),
            "AIMEM_MAINTENANCE__EMBED_INTERVAL_S": "1", **extra}


def current_vectors(settings, model: str, dim: int) -> int:
    conn = open_reader(settings.db_path)
    try:
        return conn.execute(
            "SELECT count(*) FROM page_embeddings e JOIN pages p ON p.id = e.page_id AND p.is_latest = 1"
            " AND p.content_hash = e.content_hash WHERE e.model = ? AND e.dim = ?", (model, dim)).fetchone()[0]
    finally:
        conn.close()


def wait_for(fn, timeout_s: float = 30.0, what: str = "condition"):
    """``aimem_testing.probe.wait_for_async`` (await it) with this module's 30 s default."""
    return wait_for_async(fn, timeout_s, what)


async def write_pages(bus) -> None:
    for path, body in PAGES.items():
        await bus.request(make_envelope("page.write", {"path": path, "body": body}, project="alpha"))


def search(url: str, q: str) -> tuple[dict[str, Any], float]:
    t0 = time.monotonic()
    r = httpx.post(url + "/api/v1/search", json={"query": q, "project": "alpha", "explain": True}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json(), time.monotonic() - t0


async def mcp_query(url: str, q: str) -> dict[str, Any]:
    async with Client(url + "/mcp") as c:
        res = await c.call_tool("memory_query", {"project": "alpha", "query": q, "explain": True})
    assert not res.is_error, res.content
    return json.loads(res.content[0].text)


def assert_found_by_vector(res: dict[str, Any]) -> None:
    assert res["hits"], res
    top = res["hits"][0]
    assert top["path"] == "concepts/car.md", res["hits"]
    assert "vector" in top["score_details"]["streams"] and "fts" not in top["score_details"]["streams"]
    assert "vector" in res["streams_active"] and "fts" not in res["streams_active"]
    assert res["streams_skipped"] == {}


# Long enough that the MCP call and the next search fit inside it on a loaded 2-core machine
# (at 1 s a CI run saw the cooldown lapse between them).
COOLDOWN_S = 4


async def test_vector_stream_finds_paraphrase_and_degrades_to_fts(settings, services, bus, fake_llm):
    fake_llm.embed_dim, fake_llm.embed_synonyms = 64, SYNONYMS
    services("writer")
    await write_pages(bus)
    env = embed_env(fake_llm.url, "embed-a", 64, AIMEM_EMBEDDING__QUERY_TIMEOUT_MS="3000",
                    AIMEM_EMBEDDING__QUERY_COOLDOWN_S=str(COOLDOWN_S))
    services("maintainer", extra_env=env)
    await wait_for(lambda: current_vectors(settings, "embed-a", 64) == len(PAGES), what="backfill")
    procs = services("query", "mcp-gateway", extra_env=env)
    query, gateway = procs["query"].url, procs["mcp-gateway"].url

    # 1. No word matches, the vector does: over HTTP and through MCP.
    res, _ = search(query, PARAPHRASE)
    assert res["fts_query"] and res["raw_hits"] == []
    assert_found_by_vector(res)
    assert res["query_embed_ms"] >= 0
    assert_found_by_vector(await mcp_query(gateway, PARAPHRASE))

    # 2a. Embedder answers 503: FTS answers, the vector stream is reported skipped, then the
    # cooldown skips the embedder without asking it.
    fake_llm.embed_mode = "503"
    res, _ = search(query, "winter tyres")
    assert res["hits"][0]["path"] == "concepts/car.md" and res["streams_active"][:1] == ["fts"]
    assert res["streams_skipped"] == {"vector": "embedder_error"}
    mres = await mcp_query(gateway, "winter tyres")
    assert mres["hits"][0]["path"] == "concepts/car.md" and mres["streams_skipped"] == {"vector": "embedder_error"}
    asked = len([r for r in fake_llm.requests if r["path"].endswith("/embeddings")])
    res, _ = search(query, "winter tyres")
    assert res["streams_skipped"] == {"vector": "embedder_cooldown"} and res["hits"]
    assert len([r for r in fake_llm.requests if r["path"].endswith("/embeddings")]) == asked

    # 2b. Embedder hangs: the search returns after the 3 s bound, from FTS.
    await asyncio.sleep(COOLDOWN_S + 0.2)
    fake_llm.embed_mode, fake_llm.hang_s = "hang", 30.0
    res, elapsed = search(query, "winter tyres")
    assert res["streams_skipped"] == {"vector": "embedder_timeout"} and res["hits"][0]["path"] == "concepts/car.md"
    assert 2.5 < elapsed < 8.0, elapsed

    # Back up: after the cooldown the vector stream returns.
    fake_llm.embed_mode = "good"
    await asyncio.sleep(COOLDOWN_S + 0.2)
    assert_found_by_vector(search(query, PARAPHRASE)[0])


async def test_dim_switch_ignores_stale_vectors_until_reembedded(settings, services, bus, fake_llm):
    fake_llm.embed_dim, fake_llm.embed_synonyms = 64, SYNONYMS
    services("writer")
    await write_pages(bus)
    old = services("maintainer", extra_env=embed_env(fake_llm.url, "embed-a", 64))["maintainer"]
    await wait_for(lambda: current_vectors(settings, "embed-a", 64) == len(PAGES), what="first backfill")
    old.stop()

    # The read side moves to another model and dimension before the maintainer does.
    fake_llm.embed_dim = 32
    env_b = embed_env(fake_llm.url, "embed-b", 32)
    query = services("query", extra_env=env_b)["query"].url
    res, _ = search(query, PARAPHRASE)
    assert "vector" not in res["streams_active"] and res["streams_skipped"] == {}
    assert all(h["path"] != "concepts/car.md" for h in res["hits"])  # the 64-d vectors are stale
    res, _ = search(query, "write-ahead log")
    assert res["hits"][0]["path"] == "concepts/wal.md"  # FTS unaffected

    services("maintainer", extra_env=env_b)
    await wait_for(lambda: current_vectors(settings, "embed-b", 32) == len(PAGES), what="re-embedding")
    assert_found_by_vector(search(query, PARAPHRASE)[0])
