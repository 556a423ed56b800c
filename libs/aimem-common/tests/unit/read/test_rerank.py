"""The optional rerank stage through ``aimem_common.search.service.search``: off unless configured, reorders
the top hits by the model (a Cohere-shaped ``/rerank`` over real HTTP, the fake model server),
keeps the exact stream's page first, and a failing or slow model leaves the fused order."""

from __future__ import annotations

import asyncio

import pytest

from aimem_common.auth import Principal
from aimem_common.config import RerankSettings, Settings
from aimem_common.search.params import SearchParams
from aimem_common.search.service import Searcher
from aimem_common.rerank import RerankStage

pytestmark = pytest.mark.timeout(20)

ROOT = Principal(kind="root", name="root")


def seed(seeder):
    app = seeder.scope("default", "app")
    ids = {
        "ranked-first": seeder.page(app, "notes/a.md", "# Deploy checklist\nDeploy deploy deploy: the deploy steps, deploy."),
        "canary": seeder.page(app, "notes/b.md", "# Rollout\nDeploy with a canary and watch the error budget."),
        "ident": seeder.page(app, "notes/c.md", "# Error ERR_DEPLOY_4711\nThe deploy failed with ERR_DEPLOY_4711 once."),
    }
    return app, ids


def run(pool, tmp_path, query, stage, explain=True):
    settings = Settings(data_dir=tmp_path)
    params = SearchParams(query=query, workspace="default", project="app", explain=explain)
    return asyncio.run(Searcher(pool=pool, settings=settings, reranker=stage).search(ROOT, params)).to_json()


def stage_for(url, **kw):
    return RerankStage.from_settings(RerankSettings(provider="http", base_url=url, model="fake-rerank", **kw))


def paths(res):
    return [h["path"] for h in res["hits"]]


def test_rerank_only_when_configured(pool, seeder, tmp_path, fake_llm):
    seed(seeder)
    plain = run(pool, tmp_path, "deploy steps", None)
    assert plain["hits"][0]["path"] == "notes/a.md"  # bm25 likes the page that repeats "deploy"
    off = run(pool, tmp_path, "deploy steps", RerankStage.from_settings(RerankSettings()))
    assert paths(off) == paths(plain) and "rerank" not in off["streams_active"]
    assert all("rerank" not in h["score_details"] for h in off["hits"])
    assert not any(r["path"].endswith("/rerank") for r in fake_llm.requests)

    fake_llm.rerank_boost = {"canary": 1.0}
    on = run(pool, tmp_path, "deploy steps", stage_for(fake_llm.url))
    assert on["hits"][0]["path"] == "notes/b.md" and "rerank" in on["streams_active"]
    d = on["hits"][0]["score_details"]["rerank"]
    assert d["rank"] == 1 and d["fused_rank"] == paths(plain).index("notes/b.md") + 1 and d["score"] > 1.0
    sent = [r for r in fake_llm.requests if r["path"].endswith("/rerank")][-1]["body"]
    assert sent["query"] == "deploy steps" and len(sent["documents"]) == len(plain["hits"])
    assert "canary" in sent["documents"][paths(plain).index("notes/b.md")]
    assert "rerank" not in on  # the reranker's input never reaches the caller


def test_exact_page_stays_first_and_failures_keep_the_fused_order(pool, seeder, tmp_path, fake_llm):
    seed(seeder)
    q = "deploy canary ERR_DEPLOY_4711"
    plain = run(pool, tmp_path, q, None)
    assert plain["hits"][0]["path"] == "notes/c.md"  # the exact stream: the identifier's only page
    fake_llm.rerank_boost = {"canary": 5.0}
    on = run(pool, tmp_path, q, stage_for(fake_llm.url))
    assert paths(on)[:2] == ["notes/c.md", "notes/b.md"]

    fake_llm.rerank_mode = "500"
    stage = stage_for(fake_llm.url, cooldown_s=60)
    down = run(pool, tmp_path, "deploy steps", stage)
    assert paths(down) == paths(run(pool, tmp_path, "deploy steps", None))
    assert down["streams_skipped"]["rerank"] == "reranker_error" and "rerank" not in down["streams_active"]
    assert run(pool, tmp_path, "deploy steps", stage)["streams_skipped"]["rerank"] == "reranker_cooldown"

    fake_llm.rerank_mode, fake_llm.hang_s = "hang", 5
    slow = run(pool, tmp_path, "deploy steps", stage_for(fake_llm.url, timeout_ms=200))
    assert slow["streams_skipped"]["rerank"] in {"reranker_timeout", "reranker_error"}
    assert paths(slow) == paths(down)


def test_a_candidate_below_the_limit_can_be_reranked_into_the_answer(pool, seeder, tmp_path, fake_llm):
    """The reranker sees the fused top ``top_n`` before the cut to ``limit`` (as the original
    does), so the page it prefers comes up even from below the limit."""
    app = seeder.scope("default", "app")
    for i in range(8):
        seeder.page(app, f"notes/deploy-{i}.md", f"# Deploy {i}\n" + "deploy steps " * (12 - i))
    seeder.page(app, "notes/canary.md", "# Rollout\nDeploy with a canary.")
    settings = Settings(data_dir=tmp_path)
    params = SearchParams(query="deploy steps", workspace="default", project="app", limit=3)
    plain = asyncio.run(Searcher(pool=pool, settings=settings, reranker=None).search(ROOT, params)).to_json()
    assert "notes/canary.md" not in paths(plain) and len(plain["hits"]) == 3
    fake_llm.rerank_boost = {"canary": 5.0}
    on = asyncio.run(Searcher(pool=pool, settings=settings, reranker=stage_for(fake_llm.url, top_n=10))
                     .search(ROOT, params)).to_json()
    assert paths(on)[0] == "notes/canary.md" and len(on["hits"]) == 3
    sent = [r for r in fake_llm.requests if r["path"].endswith("/rerank")][-1]["body"]
    assert len(sent["documents"]) == 9  # every candidate up to top_n, not only the 3 asked for
