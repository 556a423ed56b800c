"""A running session's observations written in an unspaced script are found by a word inside
their sentences (``observations_tri``, schema migration 13): in ``raw_hits`` while the session
has no page, through the turns stream once it has one; kept to the searched scopes; an
English question never reads the table."""

from __future__ import annotations

import pytest

from aimem_common.search.question import QueryOptions
from aimem_common.search.query import memory_query

ZH = "我们决定使用读写分离的缓存策略来降低数据库压力。"
JA = "本番環境へのデプロイはブルーグリーン方式で行います。"


def _query(pool, q, scopes, **kw):
    with pool.connection() as conn:
        return memory_query(conn, q, scopes, options=QueryOptions(explain=True, **kw)).to_json()


def _raw(pool, q, scopes):
    return [(x["project"], x["session_id"], x["observation_id"]) for x in _query(pool, q, scopes)["raw_hits"]]


@pytest.fixture
def running(seeder):
    app, other = seeder.scope("default", "app"), seeder.scope("default", "other")
    ids = {
        "zh": seeder.observation(app, "run1", "user-prompt", ZH),
        "ja": seeder.observation(app, "run1", "tool-output", f"{JA}\nexit 0 — ok ✓", title="Bash"),
        "cat": seeder.observation(app, "run2", "user-prompt", "これは猫"),  # 猫: a 1-character word, last
        "en": seeder.observation(app, "run1", "user-prompt", "lower the database load — cache reads"),
        "other": seeder.observation(other, "run9", "user-prompt", f"另一个项目：{ZH}"),
    }
    return app, other, ids


@pytest.mark.parametrize(("q", "key"), [("缓存", "zh"), ("数据库", "zh"), ("读写分离的缓存策略", "zh"),
                                        ("缓存策略是什么？", "zh"), ("デプロイ", "ja"), ("ブルーグリーン方式", "ja"),
                                        ("猫", "cat")])
def test_running_sessions_cjk_observation_is_a_raw_hit(pool, running, q, key):
    app, _other, ids = running
    res = _query(pool, q, [app])
    assert res["hits"] == [] and res["streams_active"] == ["raw"]
    assert [x["observation_id"] for x in res["raw_hits"]] == [ids[key]], q
    assert res["raw_hits"][0]["score"] > 0


def test_raw_hits_stay_in_scope(pool, running):
    app, other, ids = running
    assert _raw(pool, "缓存", [app]) == [("app", "run1", ids["zh"])]
    assert _raw(pool, "缓存", [other]) == [("other", "run9", ids["other"])]
    assert sorted(x[2] for x in _raw(pool, "缓存", [app, other])) == sorted([ids["zh"], ids["other"]])
    assert _raw(pool, "猫", [other]) == [] and _raw(pool, "デプロイ", [other]) == []


def test_bm25_and_trigram_raw_hits_merge_best_first(pool, seeder, running):
    """A question holding a Latin word and a CJK word gets both kinds of match, best first, ≤ limit."""
    app, _other, ids = running
    res = _query(pool, "database 缓存", [app])
    got = [x["observation_id"] for x in res["raw_hits"]]
    assert sorted(got) == sorted([ids["zh"], ids["en"]])
    scores = [x["score"] for x in res["raw_hits"]]
    assert scores == sorted(scores, reverse=True)
    assert len(_query(pool, "database 缓存", [app], raw_limit=1)["raw_hits"]) == 1


def test_english_observation_not_indexed_and_english_question_reads_nothing(pool, running):
    app, _other, ids = running
    with pool.connection() as conn:
        held = {r[0] for r in conn.execute("SELECT id FROM observations_tri_docsize")}
        assert held == {ids["zh"], ids["ja"], ids["cat"], ids["other"]}
        sql: list[str] = []
        conn.set_trace_callback(sql.append)
        try:
            res = memory_query(conn, "lower database load", [app], options=QueryOptions()).to_json()
        finally:
            conn.set_trace_callback(None)
    assert [x["observation_id"] for x in res["raw_hits"]] == [ids["en"]]
    assert sql and not [s for s in sql if "observations_tri" in s]


def test_turns_stream_folds_cjk_turns_onto_the_session_page(pool, seeder):
    """A session page whose digest lacks the word is found by a turn holding it."""
    app, other = seeder.scope("default", "app"), seeder.scope("default", "other")
    for i in range(3):
        seeder.observation(app, "long", "user-prompt", f"第{i}步：检查日志。")
    seeder.observation(app, "long", "user-prompt", ZH)
    seeder.end_session(app, "long")
    page = seeder.page(app, "sessions/long.md", "# 会话\n检查日志。", session_id="long")
    seeder.page(app, "notes/misc.md", "# 杂项\n与此无关。")
    seeder.observation(other, "long", "user-prompt", ZH)  # the same session id in another project
    seeder.page(other, "sessions/long.md", "# 会话\n别的。", session_id="long")
    res = _query(pool, "数据库", [app])
    assert [h["page_id"] for h in res["hits"]] == [page]
    assert res["hits"][0]["score_details"]["streams"]["turns"]["rank"] == 1
    assert "trigram" not in res["hits"][0]["score_details"]["streams"]  # the page itself does not hold it
    short = _query(pool, "压", [app])  # a 1-character word of a turn
    assert [h["page_id"] for h in short["hits"]] == [page]
