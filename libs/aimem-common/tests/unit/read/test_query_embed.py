"""``QueryEmbedder``: bounded time, never raises, cooldown after a failure (no network)."""

from __future__ import annotations

import asyncio

import pytest

from aimem_common.embed import EmbedIdentity
from aimem_common.errors import UnavailableError
from aimem_common.search.query_embed import QueryEmbedder, QueryEmbedding, annotate
from aimem_common.search.result import SearchResult

pytestmark = pytest.mark.timeout(10)


class StubEmbedder:
    identity = EmbedIdentity("stub", "m", 2)

    def __init__(self) -> None:
        self.behaviour = "good"
        self.calls = 0

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if self.behaviour == "hang":
            await asyncio.sleep(5)
        if self.behaviour == "down":
            raise UnavailableError("down", code="embedder_unavailable")
        if self.behaviour == "crash":
            raise RuntimeError("model exploded")
        return [[0.6, 0.8] for _ in texts]

    async def aclose(self) -> None:
        return None


def test_timeout_error_and_cooldown():
    now = [100.0]
    stub = StubEmbedder()
    qe = QueryEmbedder(stub, timeout_ms=50, cooldown_s=10, clock=lambda: now[0])

    async def go():
        ok = await qe.embed("question")
        assert ok.vector is not None and ok.skipped is None
        assert (ok.vector.provider, ok.vector.model, ok.vector.dim) == ("stub", "m", 2)

        stub.behaviour = "hang"
        t = await qe.embed("question")
        assert t.vector is None and t.skipped == "embedder_timeout" and t.ms < 1000
        stub.behaviour = "good"
        calls = stub.calls
        assert (await qe.embed("question")).skipped == "embedder_cooldown" and stub.calls == calls
        now[0] += 10.5
        assert (await qe.embed("question")).vector is not None

        for bad in ("down", "crash"):  # typed or not, a failure only drops the stream
            stub.behaviour = bad
            assert (await qe.embed("question")).skipped == "embedder_error"
            now[0] += 11
        assert (await qe.embed("   ")).skipped == "empty_query"

    asyncio.run(go())


def test_unconfigured_and_annotate():
    qe = QueryEmbedder(None, timeout_ms=50, cooldown_s=1)
    none = asyncio.run(qe.embed("q"))
    assert none == QueryEmbedding(None) and not qe.configured
    assert annotate(SearchResult(), none, explain=False).to_json() == {"hits": [], "raw_hits": []}
    assert annotate(SearchResult(explain={}), none, explain=True).explain == {"streams_skipped": {}}
    assert annotate(SearchResult(explain={}), QueryEmbedding(None, "embedder_timeout", 2000.0), explain=True).explain == {
        "streams_skipped": {"vector": "embedder_timeout"}}
