"""A running session has no page yet: its matching turns are ``raw_hits`` beside the page hits,
so what it found is not hidden by pages that share the question's other words."""

from __future__ import annotations

from aimem_common.read import search
from aimem_common.read.search import RUNNING_TURNS_PER_SESSION, QueryOptions

Q = "ERR_9921 connection pool timeout payment worker"


def _query(pool, q, scopes, **kw):
    with pool.connection() as conn:
        return search.memory_query(conn, q, scopes, options=QueryOptions(explain=True, **kw))


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
