"""memory_query over MCP (the official client, real gateway process, real SQLite) finds pages
written in Chinese, Japanese and Korean by a word inside their sentences."""

from __future__ import annotations

import pytest
from mcp import Client

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

APP = {"workspace": "default", "project": "app"}


async def test_cjk_words_inside_sentences_over_mcp(seed, services, h):
    app = seed.project("app")
    zh = seed.page(app, "decisions/cache.md", title="架构决定",
                   body="我们决定使用读写分离的缓存策略来降低数据库压力。")
    ja = seed.page(app, "procedures/deploy.md", title="本番リリース手順",
                   body="本番環境へのデプロイはブルーグリーン方式で行います。")
    ko = seed.page(app, "concepts/pool.md", title="커넥션", body="데이터베이스를 연결할 때 커넥션 풀을 사용합니다.")
    seed.page(app, "notes/en.md", title="Cache", body="We cache reads to lower database load.")
    url = h.mcp_url(services("mcp-gateway")["mcp-gateway"])
    async with Client(url) as c:
        for q, want in [("缓存", zh), ("数据库", zh), ("デプロイ", ja), ("ブルーグリーン方式", ja),
                        ("데이터베이스", ko), ("커넥션 풀", ko)]:
            res = await h.call(c, "memory_query", {**APP, "query": q, "explain": True})
            assert res["hits"], q
            top = res["hits"][0]
            assert top["page_id"] == want, (q, [x["path"] for x in res["hits"]])
            assert top["score_details"]["streams"]["trigram"]["rank"] == 1
        en = await h.call(c, "memory_query", {**APP, "query": "database load"})
        assert en["hits"][0]["path"] == "notes/en.md"


async def test_short_and_glued_latin_words_over_mcp(seed, services, h):
    """A 1-character word at the end of a page, a 2-character word beside another project's
    pages that share it, and a Latin word glued to CJK text are found over MCP."""
    app = seed.project("app")
    other = seed.project("other")
    cat = seed.page(app, "notes/cat.md", title="ペット", body="これは猫")
    cache = seed.page(app, "notes/cache.md", title="笔记", body="我们使用缓存")
    k8s = seed.page(app, "notes/k8s.md", title="更新", body="東京リージョンのKubernetesクラスタを更新した。")
    for i in range(70):
        seed.page(other, f"notes/t{i}.md", title=f"工具{i}", body=f"请使用{chr(0x4E00 + i)}工具。")
    url = h.mcp_url(services("mcp-gateway")["mcp-gateway"])
    async with Client(url) as c:
        for q, want in [("猫", cat), ("使用", cache), ("缓存", cache), ("Kubernetes", k8s)]:
            res = await h.call(c, "memory_query", {**APP, "query": q, "explain": True})
            assert [x["page_id"] for x in res["hits"]] == [want], (q, [x["path"] for x in res["hits"]])
            assert res["hits"][0]["score_details"]["streams"]["trigram"]["rank"] == 1


async def test_running_sessions_cjk_observation_is_a_raw_hit_over_mcp(seed, services, h):
    """A running session (no page yet) is found by a word inside its Chinese/Japanese turns,
    only in the searched project."""
    app = seed.project("app")
    other = seed.project("other")
    zh = seed.observation(app, "run1", "user-prompt", "我们决定使用读写分离的缓存策略来降低数据库压力。")
    ja = seed.observation(app, "run1", "tool-output", "本番環境へのデプロイは完了 — ok ✓", title="Bash")
    seed.observation(other, "run9", "user-prompt", "另一个项目也用缓存。")
    url = h.mcp_url(services("mcp-gateway")["mcp-gateway"])
    async with Client(url) as c:
        for q, want in [("缓存", zh), ("数据库", zh), ("デプロイ", ja)]:
            res = await h.call(c, "memory_query", {**APP, "query": q})
            assert res["hits"] == [], q
            assert [(x["observation_id"], x["session_id"], x["project"]) for x in res["raw_hits"]] == \
                [(want, "run1", "app")], q
