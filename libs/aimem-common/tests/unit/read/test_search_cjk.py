"""Short and mixed-script words inside CJK text are found whatever else the vault holds:
a 1–2 character word among many pages sharing its prefix, beside another project's pages,
at the very end of a page; a Latin word glued to CJK characters."""

from __future__ import annotations

import pytest

from aimem_common.search.question import QueryOptions
from aimem_common.search.query import memory_query


def _hits(pool, q, scope, **kw) -> list[int]:
    with pool.connection() as conn:
        res = memory_query(conn, q, [scope], options=QueryOptions(explain=True, **kw)).to_json()
    return [h["page_id"] for h in res["hits"]]


def test_short_word_is_found_among_many_pages_sharing_its_prefix(pool, seeder):
    """80 pages hold 数据<X> (80 trigrams starting with 数据, more than any fixed expansion):
    the page holding 数据库 is still found by 数据 and by 数."""
    app = seeder.scope("default", "cjk")
    others = [seeder.page(app, f"notes/n{i}.md", f"这里是数据{chr(0x4E00 + i * 7)}相关的记录", title=f"记录{i}")
              for i in range(80)]
    target = seeder.page(app, "decisions/db.md", "我们的数据库迁移计划已经确定。", title="迁移")
    for q in ("数据", "数"):
        hits = _hits(pool, q, app, limit=100)
        assert target in hits, q
        assert set(others) <= set(hits), q
    assert _hits(pool, "数据库", app)[0] == target


def test_short_word_ignores_other_projects(pool, seeder):
    """70 pages of another project hold 使用<X>: the scope's own page holding 使用 is found."""
    mine = seeder.scope("default", "cjk2")
    other = seeder.scope("default", "cjk3")
    target = seeder.page(mine, "notes/cache.md", "我们使用缓存", title="缓存")
    assert _hits(pool, "使用", mine) == [target]
    for i in range(70):
        seeder.page(other, f"notes/t{i}.md", f"请使用{chr(0x4E00 + i)}工具。", title=f"工具{i}")
    assert _hits(pool, "使用", mine) == [target]
    assert len(_hits(pool, "使用", other, limit=100)) == 70


@pytest.mark.parametrize(("body", "q"), [
    ("これは猫", "猫"),          # 1 character, the last of the page
    ("我们使用缓存", "缓存"),     # 2 characters, the last two
    ("缓存", "缓存"),             # the whole body is the word
    ("猫", "猫"),
])
def test_short_word_at_the_end_of_a_page_is_found(pool, seeder, body, q):
    app = seeder.scope("default", "tail")
    pid = seeder.page(app, "notes/tail.md", body, title="note")
    assert _hits(pool, q, app) == [pid]


def test_short_word_in_the_title_is_found(pool, seeder):
    app = seeder.scope("default", "title")
    pid = seeder.page(app, "notes/cat.md", "nothing here", title="我的猫")
    assert _hits(pool, "猫", app) == [pid]


@pytest.mark.parametrize(("q", "key"), [
    ("Kubernetes", "ja"), ("kubernetes", "ja"), ("TTL", "zh"), ("300", "zh"), ("redis", "zh"),
    ("Redis 缓存", "zh"),
])
def test_latin_word_glued_to_cjk_text_is_found(pool, seeder, q, key):
    app = seeder.scope("default", "mixed")
    ids = {
        "ja": seeder.page(app, "notes/k8s.md", "東京リージョンのKubernetesクラスタを更新した。", title="更新"),
        "zh": seeder.page(app, "notes/redis.md", "我们使用Redis缓存热点数据，TTL为300秒。", title="缓存"),
        "en": seeder.page(app, "notes/en.md", "Nothing about clusters here.", title="English"),
    }
    with pool.connection() as conn:
        res = memory_query(conn, q, [app], options=QueryOptions(explain=True)).to_json()
    assert [h["page_id"] for h in res["hits"]][:1] == [ids[key]], (q, res.get("trigram_query"))
    assert "trigram" in res["streams_active"]


def test_latin_words_do_not_count_twice_for_a_cjk_page(pool, seeder):
    """A CJK page whose Latin word stands apart (unicode61 finds it) gets no trigram share for
    it: it does not outrank an English page with the same word."""
    app = seeder.scope("default", "fair")
    en = seeder.page(app, "notes/en.md", "We deploy with helm charts.", title="helm")
    zh = seeder.page(app, "notes/zh.md", "我们用 helm 部署。", title="部署")
    with pool.connection() as conn:
        res = memory_query(conn, "helm", [app], options=QueryOptions(explain=True)).to_json()
    assert [h["page_id"] for h in res["hits"]][0] == en
    assert all("trigram" not in h["score_details"]["streams"] for h in res["hits"]), res["hits"]
    assert zh in [h["page_id"] for h in res["hits"]]


@pytest.mark.parametrize(("body", "queries"), [
    ("Ame\u0301lie signed the contract.", ["Amélie", "amelie", "AME\u0301LIE"]),  # NFD on the page
    ("The team met in İstanbul last week.", ["İstanbul", "İSTANBUL", "istanbul"]),
])
def test_unicode_forms_of_a_word_find_each_other(pool, seeder, body, queries):
    app = seeder.scope("default", "fold")
    pid = seeder.page(app, "notes/fold.md", body, title="meeting")
    seeder.page(app, "notes/other.md", "Nothing to see.", title="other")
    for q in queries:
        assert _hits(pool, q, app) == [pid], q
