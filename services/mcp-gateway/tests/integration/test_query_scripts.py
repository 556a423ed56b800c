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
