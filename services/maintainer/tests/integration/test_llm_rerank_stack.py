"""reranker = "llm": the read side's LlmReranker asks the real maintainer, which asks the fake
LLM through an official SDK. Bounded (≤ 30 short candidates, ≤ 4 in flight, one call per
query) and any failure or timeout keeps the local order."""

from __future__ import annotations

import asyncio
import json

import pytest

from aimem_common.rerank import LLM_DOC_CHARS, SKIP_BUSY, SKIP_ERROR, SKIP_TIMEOUT, LlmReranker, RerankStage
from aimem_common.search.hits import Hit

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]


def hits(n: int) -> tuple[list[Hit], dict[int, str]]:
    hs = [Hit(path=f"notes/t{i}.md", title=f"t{i}", score=1.0 / (i + 1), kind="note", tier="semantic",
              workspace="default", project="app", page_id=i + 1, updated_at="2026-01-01T00:00:00Z", pinned=False,
              tags=[]) for i in range(n)]
    return hs, {h.page_id: f"doc {h.page_id} " + "x" * 1000 for h in hs}


@pytest.fixture
def stage_for(settings, services, bus, fake_llm):
    def make(timeout_ms: int = 5000) -> RerankStage:
        (settings.data_dir / "config.toml").write_text(f"""
[llm]
provider = "anthropic"
model = "claude-fake"
base_url = "{fake_llm.root_url}"
api_key = "k"
timeout_s = 10
circuit_cooldown_s = 0.1
""")
        services("writer", "maintainer")
        r = LlmReranker(timeout_s=timeout_ms / 1000 + 1.0)
        r.attach(bus.nc)
        return RerankStage(r, top_n=30, timeout_ms=timeout_ms, cooldown_s=0.0)
    return make


async def test_llm_rerank_reorders_with_one_bounded_call(stage_for, fake_llm):
    stage = stage_for()
    fake_llm.answers["rerank"] = {"ranking": [2, 0]}
    hs, texts = hits(40)
    assert await stage.apply("which doc", hs, texts, set(), explain=False) is None
    assert [h.page_id for h in hs[:4]] == [3, 1, 2, 4]  # ranked first, then the local order
    assert [h.page_id for h in hs[30:]] == list(range(31, 41))  # past 30: untouched
    assert fake_llm.chat_count == 1
    body = fake_llm.chat_requests()[0]["body"]
    user = body["messages"][0]["content"]
    assert "<untrusted-data" in user
    docs = json.loads(user.split('label="documents">\n', 1)[1].split("\n</untrusted-data>", 1)[0])
    assert len(docs) == 30 and all(len(d["text"]) <= LLM_DOC_CHARS for d in docs)


async def test_llm_failure_timeout_and_saturation_keep_the_local_order(stage_for, fake_llm):
    stage = stage_for(timeout_ms=1500)
    hs, texts = hits(10)
    before = [h.page_id for h in hs]
    fake_llm.mode = "500"
    assert await stage.apply("q", hs, texts, set(), explain=False) == SKIP_ERROR
    assert [h.page_id for h in hs] == before
    await asyncio.sleep(0.2)  # the provider's circuit (0.1 s here) closes again
    fake_llm.mode, fake_llm.hang_s = "hang", 3.0
    assert await stage.apply("q", hs, texts, set(), explain=False) == SKIP_TIMEOUT
    assert [h.page_id for h in hs] == before
    await asyncio.sleep(1.5)  # the maintainer cancels the abandoned call at its budget (2.5 s): slot freed
    # ≤ 4 in flight: a fifth concurrent query is skipped at once, without a cooldown.
    slow = RerankStage(stage.reranker, top_n=30, timeout_ms=5000, cooldown_s=0.0)
    fake_llm.hang_s = 1.0  # each call answers after 1 s, within every bound
    copies = [hits(10) for _ in range(5)]
    tasks = [asyncio.create_task(slow.apply("q", h, t, set(), explain=False)) for h, t in copies[:4]]
    await asyncio.sleep(0.3)
    assert await slow.apply("q", *copies[4], set(), explain=False) == SKIP_BUSY
    assert await asyncio.gather(*tasks) == [None] * 4  # the maintainer had 4 free slots: the abandoned call was cancelled
