"""A running session has no page yet: its matching turns are ``raw_hits`` beside the page hits,
so what it found is not hidden by pages that share the question's other words."""

from __future__ import annotations

from aimem_common.search.raw import RUNNING_TURNS_PER_SESSION
from aimem_common.search.question import QueryOptions
from aimem_common.search.query import memory_query

Q = "ERR_9921 connection pool timeout payment worker"


def _query(pool, q, scopes, **kw):
    with pool.connection() as conn:
        return memory_query(conn, q, scopes, options=QueryOptions(explain=True, **kw)).to_json()


def test_a_running_sessions_turns_show_beside_page_hits(pool, seeder):
    app, other = seeder.scope("default", "app"), seeder.scope("default", "other")
    for i in range(50):
        seeder.page(app, f"notes/pool-{i}.md", f"# Pool note {i}\nA connection pool timeout hit the payment worker.")
    seeder.observation(app, "s-idle", "user-prompt", "lunch order for friday")
    live = seeder.observation(app, "s-live", "post-tool-use",
                              "pytest: ERR_9921 raised by parseLedgerBatch on a connection pool timeout", title="Bash")
    busy = [seeder.observation(app, "s-busy", "post-tool-use", f"retry {i}: ERR_9921 again") for i in range(6)]
    # Ended without a live page (its page was forgotten): not running, so not shown.
    seeder.observation(app, "s-ended", "user-prompt", "ERR_9921 seen last month")
    seeder.conn.execute("UPDATE sessions SET ended_at = ? WHERE session_id = 's-ended'", (seeder.tick(),))
    # Another project's running session holds it too.
    seeder.observation(other, "s-elsewhere", "user-prompt", "ERR_9921 in the other project")

    res = _query(pool, Q, [app])
    assert len(res["hits"]) == 10 and all(h["path"].startswith("notes/pool-") for h in res["hits"])
    raw = res["raw_hits"]
    assert raw[0]["observation_id"] == live and raw[0]["session_id"] == "s-live"
    assert "ERR_9921" in raw[0]["snippet"] and raw[0]["project"] == "app"
    sessions = [r["session_id"] for r in raw]
    assert set(sessions) == {"s-live", "s-busy"}
    assert sessions.count("s-busy") == RUNNING_TURNS_PER_SESSION
    assert {r["observation_id"] for r in raw if r["session_id"] == "s-busy"} <= set(busy)
    assert [r["score"] for r in raw] == sorted((r["score"] for r in raw), reverse=True)
    assert "raw" in res["streams_active"]
    assert len(_query(pool, Q, [app], raw_limit=2)["raw_hits"]) == 2

    # Once the session ends it has a page, and its turns lead there instead.
    page = seeder.page(app, "sessions/s-live.md", "# Session s-live\nran the tests", session_id="s-live")
    seeder.conn.execute("UPDATE sessions SET ended_at = ? WHERE session_id = 's-live'", (seeder.tick(),))
    res = _query(pool, Q, [app])
    assert res["hits"][0]["page_id"] == page
    assert {r["session_id"] for r in res["raw_hits"]} == {"s-busy"}

    # A global search returns pages only; so does a search no running turn matches.
    assert _query(pool, Q, None)["raw_hits"] == []
    quiet = _query(pool, "payment worker pool", [app])
    assert quiet["hits"] and quiet["raw_hits"] == [] and "raw" not in quiet["streams_active"]


def test_an_identifier_in_hundreds_of_running_turns_is_still_shown(pool, seeder):
    """600 turns of one running session hold the identifier (more than the turns stream ranks):
    pages holding the question's other words fill ``hits``, the running turns are still shown."""
    app = seeder.scope("default", "app")
    for i in range(3):
        seeder.page(app, f"notes/flaky-{i}.md", f"# Flaky test notes {i}\nWhy the flaky test fails: ordering, note {i}.")
    turns = [seeder.observation(app, "big-run", "pre-tool-use", f"pytest -k QZFLAKY77 --count {i}", title="Bash")
             for i in range(600)]
    res = _query(pool, "why is the flaky test QZFLAKY77 failing", [app])
    assert {h["path"] for h in res["hits"]} == {f"notes/flaky-{i}.md" for i in range(3)}
    raw = res["raw_hits"]
    assert [r["session_id"] for r in raw] == ["big-run"] * RUNNING_TURNS_PER_SESSION
    assert all(r["observation_id"] in turns and "QZFLAKY77" in r["snippet"] for r in raw)


def test_a_reopened_sessions_new_turns_show_beside_its_page(pool, seeder):
    """A session that ended (page written) and then resumed: the turns after its page are shown,
    the ones its page holds are not."""
    app = seeder.scope("default", "app")
    seeder.page(app, "notes/cache.md", "# Cache\nThe cache invalidation bug in the gateway.")
    before = seeder.observation(app, "r2", "user-prompt", "first look at the cache invalidation bug REOPEN_8888")
    seeder.end_session(app, "r2")
    seeder.page(app, "sessions/r2.md", "# Session r2\nfirst look at the cache invalidation bug", session_id="r2")
    seeder.conn.execute("UPDATE sessions SET ended_at = NULL WHERE session_id = 'r2'")  # an event after the end
    after = seeder.observation(app, "r2", "user-prompt", "reopened: REOPEN_8888 is the stale cache invalidation")
    res = _query(pool, "cache invalidation bug REOPEN_8888", [app])
    assert res["hits"]
    assert [r["observation_id"] for r in res["raw_hits"]] == [after]
    assert before != after


def test_an_early_identifier_turn_is_shown_behind_newer_matches_of_common_words(pool, seeder):
    """The running session named the identifier before 500 newer turns of another running
    session matched the question's common words: the identifier's turn still comes first."""
    app = seeder.scope("default", "app")
    seeder.page(app, "notes/parser.md", "# Parser\nThe parser keeps failing on long input.")
    early = seeder.observation(app, "s-early", "post-tool-use", "ERR_5150 raised by the parser")
    for i in range(500):
        seeder.observation(app, "s-noisy", "post-tool-use", f"parser failing again, attempt {i}")
    res = _query(pool, "why is the parser failing with ERR_5150", [app])
    raw = res["raw_hits"]
    assert raw[0]["observation_id"] == early, raw[:2]
    assert [r["session_id"] for r in raw[1:]] == ["s-noisy"] * RUNNING_TURNS_PER_SESSION


def test_a_running_sessions_cjk_turn_shows_beside_a_cjk_page(pool, seeder):
    """Words inside an unspaced-script turn (observations_tri) reach running_hits too."""
    app = seeder.scope("default", "app")
    page = seeder.page(app, "decisions/cache.md", "# 缓存决定\n我们决定使用读写分离的缓存策略来降低数据库压力。")
    turn = seeder.observation(app, "cjk-run", "user-prompt", "我们发现缓存击穿导致数据库压力升高")
    for q in ("缓存", "击穿", "缓存击穿是什么"):
        res = _query(pool, q, [app])
        assert [r["observation_id"] for r in res["raw_hits"]] == [turn], q
        if q == "缓存":
            assert res["hits"][0]["page_id"] == page
