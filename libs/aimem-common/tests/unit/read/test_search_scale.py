"""The query shapes that keep ``memory_query`` cheap on a large vault return what the plain
shapes did: the fts stream ranks inside FTS5 and joins only its best rowids, the whole-vault
page count comes from FTS5's own row count, and the turns stream folds a session's matching
observations onto its live page."""

from __future__ import annotations

from aimem_common.read import search
from aimem_common.read.search import QueryOptions, live_page_count


def _q(pool, q, scopes, **kw):
    with pool.connection() as conn:
        return search.memory_query(conn, q, scopes, options=QueryOptions(explain=True, **kw))


def test_live_page_count_of_the_vault_matches_a_count(pool, seeder):
    app, infra = seeder.scope("default", "app"), seeder.scope("default", "infra")
    for i in range(300):  # > 127 rows: a two-byte varint
        seeder.page(app if i % 3 else infra, f"notes/n{i}.md", f"# Note {i}\nbody {i}")
    for i in range(0, 40, 2):
        seeder.page(app, f"notes/n{i + 1}.md", f"# Note {i + 1}\nnew body")  # supersedes app's, adds to infra's
    seeder.conn.execute("DELETE FROM pages WHERE path = 'notes/n299.md'")
    with pool.connection() as conn:
        live = conn.execute("SELECT count(*) FROM pages WHERE is_latest = 1").fetchone()[0]
        assert 250 < live < 330
        assert live_page_count(conn, None) == live
        assert live_page_count(conn, [app]) == conn.execute(
            "SELECT count(*) FROM pages WHERE is_latest = 1 AND project_id = ?", (app.project_id,)).fetchone()[0]


def test_fts_stream_keeps_scope_and_expiry(pool, seeder):
    app, infra = seeder.scope("default", "app"), seeder.scope("default", "infra")
    keep = seeder.page(app, "notes/live.md", "# Broker failover\nThe broker failover drill.")
    seeder.page(app, "notes/old.md", "# Broker failover\nThe broker failover drill, expired.",
                expires_at="2020-01-01T00:00:00Z")
    other = seeder.page(infra, "notes/infra.md", "# Broker failover\nThe broker failover drill in infra.")
    for i in range(150):  # more matches than 2 x candidates
        seeder.page(app, f"notes/f{i}.md", f"# Note {i}\nfailover mentioned once.")
    res = _q(pool, "broker failover", [app])
    ids = [h["page_id"] for h in res["hits"]]
    assert ids[0] == keep and other not in ids and len(ids) == 10
    assert all(h["project"] == "app" and not h.get("expired") for h in res["hits"])
    assert _q(pool, "broker failover", [app], include_expired=True)["hits"][1]["path"] == "notes/old.md"
    assert {h["page_id"] for h in _q(pool, "broker failover", None)["hits"][:2]} == {keep, other}


def test_turns_stream_finds_a_session_page_by_any_turn(pool, seeder):
    app, infra = seeder.scope("default", "app"), seeder.scope("default", "infra")
    page = seeder.page(app, "sessions/s1.md", "# Session s1\nA digest that names only the first prompt.", session_id="s1")
    seeder.page(app, "notes/other.md", "# Other\nNothing about it.")
    for i in range(30):
        seeder.observation(app, "s1", "user-prompt", f"turn {i}: small talk")
    seeder.observation(app, "s1", "user-prompt", "we migrated the ledger to postgres partitions")
    seeder.observation(infra, "s1", "user-prompt", "ledger postgres partitions in infra")  # same id, other project
    res = _q(pool, "ledger postgres partitions", [app])
    assert [h["page_id"] for h in res["hits"]] == [page] and res["raw_hits"] == []
    assert res["hits"][0]["score_details"]["streams"]["turns"]["rank"] == 1 and "turns" in res["stream_ms"]
    assert _q(pool, "ledger postgres partitions", [infra])["hits"] == []  # infra's s1 has no page
    assert [h["page_id"] for h in _q(pool, "ledger postgres partitions", None)["hits"]] == [page]
    # a retired version is not resurrected by its turns
    new = seeder.page(app, "sessions/s1.md", "# Session s1\nRewritten digest.", session_id="s1")
    assert [h["page_id"] for h in _q(pool, "ledger postgres partitions", [app])["hits"]] == [new]
