"""Embedding backfill through the real stack: a page is embedded in chunks (a long page has
several, a session page's turns too), and switching embedder (another dim) re-embeds."""

from __future__ import annotations


import pytest

from aimem_common import maint_rpc
from aimem_common.embed import decode_vector
from aimem_common.commands import make_envelope
from aimem_testing.probe import dict_rows, wait_for_async

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]


def rows(settings, sql, *args):
    return dict_rows(settings.db_path, sql, args)


def wait_for(fn, timeout_s: float = 20.0, what: str = "condition"):
    """``aimem_testing.probe.wait_for_async`` (await it) with this module's 20 s default."""
    return wait_for_async(fn, timeout_s, what)


def embed_env(url: str, model: str, dim: int) -> dict[str, str]:
    return {"AIMEM_EMBEDDING__PROVIDER": "openai-compat", "AIMEM_EMBEDDING__BASE_URL": url,
            "AIMEM_EMBEDDING__MODEL": model, "AIMEM_EMBEDDING__DIM": str(dim),
            "AIMEM_MAINTENANCE__EMBED_INTERVAL_S": "1"}


def current(settings, model, dim):
    return rows(settings, "SELECT e.page_id, e.dim, e.vector FROM page_embeddings e JOIN pages p ON p.id = e.page_id "
                          "AND p.is_latest = 1 AND p.content_hash = e.content_hash WHERE e.model = ? AND e.dim = ?",
                model, dim)


async def test_switching_embedder_starts_clean_keeps_fts_and_backfills(settings, services, bus, fake_llm):
    services("writer")
    for i, text in enumerate(["sqlite wal mode checkpoints", "fts5 bm25 ranking", "nats jetstream work queue"]):
        await bus.request(make_envelope("page.write", {"path": f"concepts/p{i}.md", "body": text}, project="alpha"))
    long_body = "\n".join(f"Step {i}: check the replica lag and the disk budget of node {i}." for i in range(80))
    await bus.request(make_envelope("page.write", {"path": "procedures/long.md", "body": long_body + "\nFinal: ring the bell."},
                                    project="alpha"))
    live = lambda: rows(settings, "SELECT id FROM pages WHERE is_latest = 1")  # noqa: E731

    fake_llm.embed_dim = 8
    m1 = services("maintainer", extra_env=embed_env(fake_llm.url, "embed-a", 8))["maintainer"]
    await wait_for(lambda: len(current(settings, "embed-a", 8)) == len(live()), what="first backfill")
    vec = current(settings, "embed-a", 8)[0]["vector"]
    assert len(decode_vector(vec)) == 8
    chunk_rows = rows(settings, "SELECT p.path, c.chunk, c.dim, c.vector, c.content_hash = p.content_hash AS cur"
                                " FROM page_chunk_embeddings c JOIN pages p ON p.id = c.page_id ORDER BY p.path, c.chunk")
    per_page = {}
    for r in chunk_rows:
        per_page.setdefault(r["path"], []).append(r["chunk"])
        assert r["dim"] == 8 and r["cur"] == 1 and len(decode_vector(r["vector"])) == 8
    assert len(per_page) == len(live()) and per_page["procedures/long.md"] == list(range(len(per_page["procedures/long.md"])))
    assert len(per_page["procedures/long.md"]) >= 5 and per_page["concepts/p0.md"] == [0]
    # The page row keeps the first chunk's vector.
    first = rows(settings, "SELECT e.vector = c.vector AS same FROM page_embeddings e JOIN page_chunk_embeddings c"
                           " ON c.page_id = e.page_id AND c.chunk = 0")
    assert first and all(r["same"] for r in first)

    # Per-page backfill: a new page gets its vector on the next tick, the table is not empty.
    await bus.request(make_envelope("page.write", {"path": "gotchas/new.md", "body": "late page"}, project="alpha"))
    await wait_for(lambda: len(current(settings, "embed-a", 8)) == len(live()), what="incremental backfill")
    m1.stop()

    # Another embedder with another dimension: the service starts, FTS still answers, vectors are redone.
    fake_llm.embed_dim = 16
    services("maintainer", extra_env=embed_env(fake_llm.url, "embed-b", 16))
    hits = rows(settings, "SELECT rowid FROM pages_fts WHERE pages_fts MATCH '\"jetstream\"'")
    assert len(hits) == 1
    await wait_for(lambda: len(current(settings, "embed-b", 16)) == len(live()), what="re-embedding")
    assert rows(settings, "SELECT count(*) AS n FROM page_embeddings WHERE dim = 8") == [{"n": 0}]
    assert rows(settings, "SELECT count(*) AS n FROM page_chunk_embeddings WHERE dim = 8") == [{"n": 0}]
    status = await maint_rpc.call(bus.nc, "status", workspace="default", project=None, actor="t", args={})
    assert status["embedding"]["dim"] == 16 and status["embedding"]["current"] == len(live())
    assert status["embedding"]["stale"] == 0
