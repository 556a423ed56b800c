"""Words inside sentences of scripts written without spaces are findable (the trigram stream),
accented Latin matches with or without its accents, and English questions gain nothing from it
in a vault without such pages."""

from __future__ import annotations

import pytest

from aimem_common.search.question import QueryOptions
from aimem_common.read.text import query_terms, trigrams, unspaced_runs
from aimem_common.search.query import memory_query

ZH = "我们决定使用读写分离的缓存策略来降低数据库压力。"
JA = "本番環境へのデプロイはブルーグリーン方式で行います。"
KO = "데이터베이스를 연결할 때 커넥션 풀을 사용합니다."
TH = "เราใช้แคชเพื่อลดภาระของฐานข้อมูล"


@pytest.fixture
def scripts(seeder):
    app = seeder.scope("default", "app")
    ids = {
        "zh": seeder.page(app, "decisions/cache.md", f"# 架构决定\n{ZH}"),
        "ja": seeder.page(app, "procedures/deploy.md", f"# 本番リリース手順\n{JA}"),
        "ko": seeder.page(app, "concepts/pool.md", f"# 커넥션\n{KO}"),
        "th": seeder.page(app, "notes/thai.md", f"# บันทึก\n{TH}"),
        "fr": seeder.page(app, "notes/cafe.md", "# Réunion\nLe café de l'équipe est à Zürich, Straße 5. Naïve résumé."),
        "en": seeder.page(app, "notes/english.md", "# Cache strategy\nWe split reads and writes to lower database load."),
    }
    return app, ids


def _top(pool, q, scope, **kw):
    with pool.connection() as conn:
        res = memory_query(conn, q, [scope], options=QueryOptions(explain=True, **kw)).to_json()
    return res


@pytest.mark.parametrize(("q", "key"), [
    ("缓存", "zh"), ("数据库", "zh"), ("读写分离", "zh"), ("缓存策略是什么？", "zh"), ("压力", "zh"),
    ("デプロイ", "ja"), ("ブルーグリーン", "ja"), ("本番環境", "ja"), ("デプロイ方式は？", "ja"),
    ("데이터베이스", "ko"), ("커넥션 풀", "ko"), ("연결", "ko"), ("연결을", "ko"), ("커넥션은", "ko"),
    ("ฐานข้อมูล", "th"),
    ("cafe", "fr"), ("Café", "fr"), ("zurich", "fr"), ("Straße", "fr"), ("naive resume", "fr"),
])
def test_word_inside_a_sentence_is_found(pool, scripts, q, key):
    app, ids = scripts
    res = _top(pool, q, app)
    assert res["hits"], q
    assert res["hits"][0]["page_id"] == ids[key], (q, [h["path"] for h in res["hits"]])


def test_trigram_stream_in_explain_and_idle_for_english(pool, scripts):
    app, ids = scripts
    res = _top(pool, "数据库", app)
    top = res["hits"][0]
    assert "trigram" in res["streams_active"] and top["score_details"]["streams"]["trigram"]["rank"] == 1
    assert res["trigram_query"] == '"数据库"'
    en = _top(pool, "lower database load", app)
    # Latin words are looked up as substrings of the CJK pages too (glued to CJK text, see
    # test_search_cjk.py); none holds these, so the stream stays idle.
    assert en["trigram_query"] == '"lower" OR "database" OR "load"' and en["trigram_short"] == []
    assert "trigram" not in en["streams_active"]
    assert en["hits"][0]["page_id"] == ids["en"]
    short = _top(pool, "缓存", app)  # 2 chars: the trigrams starting with it (pages_tri_inst)
    assert short["trigram_query"] is None and short["trigram_short"] == ["缓存"]
    assert short["hits"][0]["page_id"] == ids["zh"]


def test_trigram_index_follows_page_versions(pool, seeder, scripts):
    app, ids = scripts
    new = seeder.page(app, "decisions/cache.md", "# 架构决定\n我们改用本地内存队列。")  # supersedes ids["zh"]
    assert [h["page_id"] for h in _top(pool, "数据库", app)["hits"]] == []
    assert _top(pool, "数据库", app, include_superseded=True)["hits"][0]["page_id"] == ids["zh"]
    assert _top(pool, "内存队列", app)["hits"][0]["page_id"] == new
    seeder.conn.execute("UPDATE pages SET body = '# 架构决定\n改为消息总线。' WHERE id = ?", (new,))
    assert _top(pool, "内存队列", app)["hits"] == [] and _top(pool, "消息总线", app)["hits"][0]["page_id"] == new
    seeder.conn.execute("UPDATE pages SET body = 'english only now' WHERE id = ?", (new,))
    assert _top(pool, "消息总线", app)["hits"] == []
    seeder.conn.execute("UPDATE pages SET body = '又是中文的消息' WHERE id = ?", (new,))
    seeder.conn.execute("DELETE FROM pages WHERE id = ?", (new,))
    assert _top(pool, "中文的消息", app)["hits"] == []
    with pool.connection() as conn:  # the index holds exactly the live unspaced-script pages
        n_tri = conn.execute("SELECT count(*) FROM pages_tri_docsize").fetchone()[0]
    assert n_tri == 3  # ja, ko, th


def test_unique_identifier_ranks_first_among_1000_pages(pool, seeder):
    """1,000 pages share the question's other words; five of them also carry its entities,
    name them in their title, link each other and are canonical decisions, so every other
    stream prefers them. One session page holds the identifier: it must rank first."""
    app = seeder.scope("default", "app")
    for i in range(1000):
        if i < 5:
            seeder.page(app, f"decisions/pool-{i}.md",
                        f"# Connection pool timeout in the payment worker {i}\nThe connection pool timeout hits the "
                        f"payment worker. See [[decisions/pool-{(i + 1) % 5}.md]] and [[decisions/pool-{(i + 2) % 5}.md]].",
                        entities=["connection pool", "payment worker"], tags=["canonical"], pinned=True)
        else:
            seeder.page(app, f"notes/pool-{i}.md", f"# Note {i}\nA connection pool timeout hit the payment worker.")
    target = seeder.page(app, "sessions/s-77.md", "# Session s-77\nSaw ERR_4711 from parseLedgerBatch in the "
                         "payment worker during a connection pool timeout.", session_id="s-77")
    for q in ["ERR_4711 connection pool timeout payment worker",
              "connection pool timeout payment worker err_4711",
              "why does parseLedgerBatch fail with a connection pool timeout in the payment worker?"]:
        res = _top(pool, q, app)
        top = res["hits"][0]
        assert top["page_id"] == target, (q, [h["path"] for h in res["hits"][:3]])
        streams = top["score_details"]["streams"]
        assert streams["exact"]["rank"] == 1 and streams["fts"]["rank"] == 1  # explain keeps every stream's rank
        assert {"entity", "links"} <= set(res["streams_active"])
        assert set(res["hits"][1]["score_details"]["streams"]) >= {"fts", "entity", "links"}
    # A word held by more than EXACT_MAX_DF pages is not an identifier signal.
    res = _top(pool, "pool_timeout connection", app)
    assert "exact" not in res["streams_active"]


def test_a_bare_version_number_finds_its_page_first(pool, seeder):
    """A dotted version with no letters (``2.3.1``) is an identifier too: among 1,000 pages
    about the same upgrade that name the neighbouring versions, the one holding it ranks first."""
    app = seeder.scope("default", "app")
    for i in range(1000):
        other = f"2.{i % 7}.{i % 5 + 2}" if i % 2 else f"1.2.3.{i % 9 + 2}"
        seeder.page(app, f"notes/upgrade-{i}.md",
                    f"# Upgrade note {i}\nThe upgrade to {other} broke the build of the payment worker.",
                    tags=["canonical"] if i < 5 else [])
    target = seeder.page(app, "sessions/s-9.md", "# Session s-9\nThe upgrade to 2.3.1 broke the build.",
                         session_id="s-9")
    res = _top(pool, "why did the upgrade to 2.3.1 break the build of the payment worker?", app)
    assert res["hits"][0]["page_id"] == target, [h["path"] for h in res["hits"][:3]]
    assert res["hits"][0]["score_details"]["streams"]["exact"]["rank"] == 1
    # A two-part number reads as a quantity, not an identifier.
    assert "exact" not in _top(pool, "upgrade 3.12 build", app)["streams_active"]


def test_a_bare_version_is_told_from_the_same_digits_written_otherwise(pool, seeder):
    """``2.3.1`` is not ``2, 3, 1``, ``192.2.3.1``, ``1.2.3.1`` or ``2-3-1``; ``v2.3.1`` is it."""
    app = seeder.scope("default", "app")
    for i in range(10):
        seeder.page(app, f"notes/rel-{i}.md", f"# Release notes {i}\nRelease notes for the upgrade, {i}.")
    for path, body in [("a", "Do steps 2, 3, 1 in that order for the upgrade."), ("b", "Gateway 192.2.3.1 for the upgrade."),
                       ("c", "libfoo 1.2.3.1 for the upgrade"), ("e", "Meeting at 2-3-1 upgrade"),
                       ("f", "Upgrade to 2.3.10 later.")]:
        seeder.page(app, f"notes/{path}.md", f"# {path}\n{body}")
    target = seeder.page(app, "notes/d.md", "# Target\nUpgrade to 2.3.1 tomorrow.")
    tagged = seeder.page(app, "notes/v.md", "# Regression\nThe regression shipped in v2.3.1 (parser).")
    res = _top(pool, "2.3.1", app)
    assert {h["page_id"] for h in res["hits"][:2]} == {target, tagged}, [h["path"] for h in res["hits"][:4]]
    exact = {h["page_id"] for h in res["hits"] if "exact" in h["score_details"]["streams"]}
    assert exact == {target, tagged}
