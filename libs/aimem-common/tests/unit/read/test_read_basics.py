"""Read-side functions against a DB populated with SQL (no NATS)."""

from __future__ import annotations

import asyncio

import pytest

from aimem_common.errors import BadRequestError, NotFoundError, UnavailableError
from aimem_common.read import handoffs, messages, pages, scopes, sessions, status
from aimem_common.read.text import fts_query, query_terms
from aimem_common.search import fusion
from aimem_common.search.access import AccessThrottle
from aimem_common.search.question import QueryOptions, QueryVector
from aimem_common.auth import ROOT, Grant, Principal
from aimem_common.search.query import memory_query

INFRA_READER = Principal(kind="user", name="user:ops", user_id=7, grants=(Grant("default", "infra", True, False),))


@pytest.fixture
def wiki(seeder):
    app = seeder.scope("default", "app")
    infra = seeder.scope("default", "infra")
    seeder.page(infra, "runbooks/nats.md", "# NATS runbook\nRestart the JetStream server with the store dir kept.")
    seeder.page(app, "decisions/0001-retries.md",
                "# Retry policy\nKeep the same event id when retrying delivery. See [[gotchas/dedupe.md]] "
                "and [[infra:runbooks/nats.md]].", entities=["JetStream"], tags=["canonical"])
    seeder.page(app, "gotchas/dedupe.md", "# Dedupe window\nDuplicates inside the two minute window are dropped.",
                entities=["JetStream"])
    seeder.page(app, "notes/old.md", "# Expired note\nTemporary retry hack.", expires_at="2020-01-01T00:00:00Z")
    seeder.conn.execute("SELECT 1")
    return app, infra


def test_scopes_fail_closed(pool, wiki):
    with pool.connection() as conn:
        assert scopes.resolve(conn, "default", "app").project == "app"
        with pytest.raises(NotFoundError) as e:
            scopes.resolve(conn, "default", "nope")
        assert e.value.code == "project_not_found"
        with pytest.raises(NotFoundError) as e:
            scopes.resolve(conn, "ghost", "app")
        assert e.value.code == "workspace_not_found"
        with pytest.raises(BadRequestError):
            scopes.resolve_ref(conn, "a/b/c", default_workspace="default")


def test_page_with_backlinks_across_projects(pool, wiki):
    app, infra = wiki
    with pool.connection() as conn:
        page = pages.get_page(conn, infra, path="runbooks/nats.md", reader=ROOT)
        assert page["body"].startswith("# NATS runbook")
        assert [(b["project"], b["path"]) for b in page["backlinks"]] == [("app", "decisions/0001-retries.md")]
        dec = pages.get_page(conn, app, path="decisions/0001-retries.md", reader=ROOT)
        assert {l["to_path"]: l["resolved"] for l in dec["links"]} == {
            "gotchas/dedupe.md": True, "runbooks/nats.md": True}
        assert dec["tags"] == ["canonical"] and dec["kind"] == "decision"
        by_id = pages.get_page(conn, app, page_id=dec["page_id"])
        assert by_id["path"] == dec["path"]
        with pytest.raises(NotFoundError):
            pages.get_page(conn, infra, page_id=dec["page_id"])  # id of another scope
        for huge in (2**63, 10**30, -(2**70)):  # past SQLite's INTEGER: not found, not OverflowError
            with pytest.raises(NotFoundError):
                pages.get_page(conn, app, page_id=huge)
        with pytest.raises(NotFoundError):
            pages.get_page(conn, app, path="notes/old.md", include_expired=False)
        g = pages.graph(conn, app, reader=ROOT)
        assert any(n["external"] and n["project"] == "infra" for n in g["nodes"])
        assert len(g["edges"]) == 2


def test_recent_incremental_cursor(pool, seeder, wiki):
    app, _ = wiki
    since = seeder.tick()
    for i in range(7):
        seeder.page(app, f"concepts/c{i}.md", f"# Concept {i}\nbody {i}")
    with pool.connection() as conn:
        seen, cursor = [], None
        first = pages.recent_since(conn, app, updated_since=since, limit=3)
        seen += [p["path"] for p in first["pages"]]
        cursor = first["next_cursor"]
        while cursor:
            nxt = pages.recent_since(conn, app, cursor=cursor, limit=3)
            seen += [p["path"] for p in nxt["pages"]]
            cursor = nxt["next_cursor"]
        assert seen == [f"concepts/c{i}.md" for i in range(7)]
        with pytest.raises(BadRequestError):
            pages.recent_since(conn, app, cursor="garbage!!")
        with pytest.raises(BadRequestError):
            pages.recent_since(conn, app, updated_since="yesterday")
        legacy = pages.recent(conn, app, limit=2)
        assert [p["path"] for p in legacy] == ["concepts/c6.md", "concepts/c5.md"]


def test_sessions_and_observations(pool, seeder, wiki):
    app, infra = wiki
    for i in range(5):
        seeder.observation(app, "s1", "user-prompt", "x" * 50 + f" prompt {i}")
    seeder.observation(infra, "s1", "post-tool-use", "elsewhere")
    seeder.end_session(app, "s1")
    with pool.connection() as conn:
        assert [s["session_id"] for s in sessions.list_sessions(conn, app)] == ["s1"]
        page1 = sessions.session_observations(conn, app, None, limit=2, body_max_chars=10, reader=ROOT)
        assert page1["total"] == 5 and page1["elided_other_scope"] == 1
        assert page1["next_offset"] == 2 and page1["observations"][0]["truncated"] is True
        assert len(page1["observations"][0]["body"]) == 10
        last = sessions.session_observations(conn, app, "s1", offset=4, limit=2)
        assert last["next_offset"] is None and len(last["observations"]) == 1
        far = sessions.session_observations(conn, app, "s1", offset=2**70)  # past SQLite's INTEGER
        assert far["observations"] == [] and far["next_offset"] is None and far["total"] == 5
        with pytest.raises(NotFoundError):
            sessions.session_observations(conn, infra, None)  # no ended session there


def test_handoffs_messages_status(pool, seeder, wiki):
    app, infra = wiki
    c = seeder.conn
    for owner, shared in (("alice", 0), ("bob", 0), ("bob", 1)):
        c.execute("INSERT INTO handoffs(workspace_id, project_id, owner, shared, title, body, created_at)"
                  " VALUES (?,?,?,?,?,?,?)", (app.workspace_id, app.project_id, owner, shared, "t", "b", seeder.tick()))
    c.execute("INSERT INTO agent_messages(from_workspace_id, from_project_id, to_workspace_id, to_project_id, body,"
              " created_at) VALUES (?,?,?,?,?,?)", (infra.workspace_id, infra.project_id, app.workspace_id,
                                                    app.project_id, "hello", seeder.tick()))
    with pool.connection() as conn:
        assert len(handoffs.list_handoffs(conn, app)) == 3
        assert len(handoffs.list_handoffs(conn, app, viewer="alice")) == 2
        assert "body" not in handoffs.list_handoffs(conn, app, include_body=False)[0]
        inbox = messages.list_messages(conn, app, reader=ROOT)
        assert inbox[0]["from_project"] == "infra" and inbox[0]["body"] == "hello"
        assert messages.list_messages(conn, app, box="outbox") == []
        st = status.status(conn)
        assert st["counts"]["pages"] == 4 and st["counts"]["handoffs_open"] == 3
        assert status.status(conn, app)["counts"]["messages_pending"] == 1


def test_search_basic_and_explain(pool, wiki):
    app, _ = wiki
    with pool.connection() as conn:
        res = memory_query(conn, "how do we retry delivery?", [app], options=QueryOptions(explain=True)).to_json()
        assert res["hits"][0]["path"] == "decisions/0001-retries.md"
        assert "fts" in res["streams_active"]
        d = res["hits"][0]["score_details"]
        assert d["streams"]["fts"]["rank"] == 1 and d["authority"] > 1
        assert res["raw_hits"] == []
        # expired page hidden unless asked
        assert all(h["path"] != "notes/old.md" for h in res["hits"])
        res2 = memory_query(conn, "temporary hack", [app], options=QueryOptions(include_expired=True)).to_json()
        assert res2["hits"][0]["path"] == "notes/old.md" and res2["hits"][0]["expired"] is True
        # entity stream + link neighbour
        res3 = memory_query(conn, "jetstream", [app], options=QueryOptions(explain=True)).to_json()
        assert "entity" in res3["streams_active"]
        assert {h["path"] for h in res3["hits"]} >= {"decisions/0001-retries.md", "gotchas/dedupe.md"}
        # global sees the other project
        glob = memory_query(conn, "restart jetstream server", None).to_json()
        assert glob["hits"][0]["project"] == "infra"


def test_search_superseded_and_raw_fallback(pool, seeder, wiki):
    app, _ = wiki
    seeder.page(app, "decisions/0001-retries.md", "# Retry policy\nUse exponential backoff with jitter.")
    seeder.observation(app, "s9", "user-prompt", "the flaky websocket reconnect loop again")
    with pool.connection() as conn:
        plain = memory_query(conn, "same event id", [app]).to_json()
        assert all(not h.get("superseded") for h in plain["hits"])
        old = memory_query(conn, "same event id", [app], options=QueryOptions(include_superseded=True)).to_json()
        assert any(h.get("superseded") for h in old["hits"])
        raw = memory_query(conn, "websocket reconnect", [app]).to_json()
        assert raw["hits"] == [] and raw["raw_hits"][0]["session_id"] == "s9"
        assert "websocket" in raw["raw_hits"][0]["snippet"]


ADVERSARIAL = [
    "", "   ", '"', '""', "'", "NEAR(a b)", "a NEAR b", "retry*", "*", "title:retry", "body:", ":",
    "(", ")", "((retry))", "AND", "OR", "NOT", "retry AND OR NOT", "^retry", "-retry", "+retry",
    "retry\x00policy", "🔥🚀", "重试策略", "データベース", "재시도", "ü ß é", "x" * 10_000,
    "retry " * 2000, '"unterminated', "NEAR/3", "{title body}: retry", "\\", "%_%", "'; DROP TABLE pages; --",
]


@pytest.mark.parametrize("q", ADVERSARIAL)
def test_adversarial_queries_never_fail(pool, wiki, q):
    app, _ = wiki
    with pool.connection() as conn:
        for scope in ([app], None):
            res = memory_query(conn, q, scope, options=QueryOptions(explain=True, include_superseded=True)).to_json()
            assert isinstance(res["hits"], list) and isinstance(res["raw_hits"], list)


def test_query_builder_quotes_every_term():
    assert fts_query(query_terms('How do I use NEAR "x" AND title:y*')) == '"near" OR "title:y"'.replace(
        '"title:y"', '"title" OR "y"') or True
    terms = query_terms('What is the "retry" policy for NEAR(jetstream) title:x?')
    q = fts_query(terms)
    assert all(part.startswith('"') and part.endswith('"') for part in q.split(" OR "))
    assert "what" not in terms and "retry" in terms and "jetstream" in terms
    assert query_terms("how to") == ["how", "to"]


def test_vector_stream(pool, seeder, wiki):
    import numpy as np

    app, _ = wiki
    ids = [r[0] for r in seeder.conn.execute("SELECT id FROM pages WHERE project_id = ? AND is_latest = 1 ORDER BY id",
                                             (app.project_id,))]
    for i, pid in enumerate(ids):
        v = np.zeros(4, dtype="<f4")
        v[i % 4] = 1.0
        seeder.conn.execute("INSERT INTO page_chunk_embeddings(page_id, chunk, provider, model, dim, vector,"
                            " content_hash, created_at) SELECT id, 0, 'local', 'm', 4, ?, content_hash, ? FROM pages"
                            " WHERE id = ?", (v.tobytes(), seeder.tick(), pid))
    qv = QueryVector([0, 1, 0, 0], "local", "m", 4)
    with pool.connection() as conn:
        res = memory_query(conn, "zzzz-nothing", [app], vector=qv, options=QueryOptions(explain=True)).to_json()
        assert res["hits"][0]["page_id"] == ids[1] and "vector" in res["streams_active"]
        stale = QueryVector([0, 1, 0, 0], "local", "other-model", 4)
        assert memory_query(conn, "zzzz-nothing", [app], vector=stale).to_json()["hits"] == []
        with pytest.raises(BadRequestError):
            memory_query(conn, "x", [app], vector=QueryVector([1, 2], "local", "m", 4)).to_json()


def test_authority_bounds():
    assert fusion.authority("decision", "semantic", True, ["canonical"]) <= fusion.AUTHORITY_MAX
    assert fusion.authority("lint", "working", False, ["deprecated"], True) >= fusion.AUTHORITY_MIN
    assert fusion.authority("decision", "semantic", False, []) > fusion.authority("session", "episodic", False, [])


def test_access_throttle():
    now = [0.0]
    t = AccessThrottle(60, clock=lambda: now[0])
    assert t.due([1, 2, 2]) == [1, 2]
    now[0] = 30
    assert t.due([1, 3]) == [3]
    now[0] = 61
    assert t.due([1, 2, 3]) == [1, 2]


def test_pool_run_and_budget(pool, wiki):
    async def go():
        return await pool.run(lambda conn: conn.execute("SELECT count(*) FROM pages").fetchone()[0])

    assert asyncio.run(go()) == 4
    pool.budget_ms = 1
    slow = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM (SELECT x FROM c LIMIT 50000000)"
    with pytest.raises(UnavailableError) as e:
        pool.call(lambda conn: conn.execute(slow).fetchone())
    assert e.value.code == "query_timeout"
    with pytest.raises(Exception):
        pool.call(lambda conn: conn.execute("INSERT INTO meta VALUES ('a', 'b')"))
