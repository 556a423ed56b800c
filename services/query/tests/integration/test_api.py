"""``/api/v1`` over real HTTP against a real query process (and NATS), with auth on.

Rows are seeded with SQL (``aimem_testing.seed.Seeder``) into a migrated DB before the query
service starts, so the reads under test do not depend on the writer.
"""

from __future__ import annotations

import httpx
import pytest

from aimem_common.auth import hash_key
from aimem_testing.seed import Seeder


ROOT = "root-secret-token"
APP_KEY = "aim_app_reader_key_0123456789"
OTHER_KEY = "aim_other_project_key_987654"


@pytest.fixture
def api(services, settings):
    seed = Seeder(settings.db_path)
    app = seed.scope("default", "app")
    infra = seed.scope("default", "infra")
    seed.page(infra, "runbooks/nats.md", "# NATS runbook\nRestart JetStream with its store dir kept.")
    seed.page(app, "decisions/0001-retries.md",
              "# Retry policy\nKeep the same event id when retrying delivery. [[infra:runbooks/nats.md]]",
              entities=["JetStream"])
    seed.page(app, "sessions/s1.md", "# Session s1\nDebugged retry storms.", session_id="s1")
    prefs = seed.scope("default", "_global")  # the workspace's user preferences
    seed.page(prefs, "prefs/retries.md", "# Retry preference\nWhen retrying delivery, prefer exponential backoff.")
    for i in range(3):
        seed.observation(app, "s1", "user-prompt", f"prompt {i} about the websocket reconnect")
    seed.end_session(app, "s1")
    seed.observation(app, "s2", "user-prompt", "the gateway handshake is flaky")  # a session without a page yet
    c = seed.conn
    c.execute("INSERT INTO users(id, name, created_at) VALUES (1, 'ann', 'now'), (2, 'bob', 'now')")
    c.execute("INSERT INTO api_keys(user_id, prefix, key_hash, created_at) VALUES (1, 'aim_app', ?, 'now'),"
              " (2, 'aim_oth', ?, 'now')", (hash_key(APP_KEY), hash_key(OTHER_KEY)))
    c.execute("INSERT INTO grants(user_id, workspace, project, can_read, can_write) VALUES"
              " (1, 'default', 'app', 1, 0), (2, 'default', 'infra', 1, 1)")
    c.execute("INSERT INTO handoffs(workspace_id, project_id, owner, title, body, created_at, automatic)"
              " VALUES (?, ?, 'root', 'next', 'continue the retry work', 'now', 1)", (app.workspace_id, app.project_id))
    seed.close()
    return services("query", extra_env={"AIMEM_AUTH__TOKEN": ROOT})["query"].url


def h(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


APP = "/api/v1/workspaces/default/projects/app"
ROUTES = [
    ("GET", "/api/v1/search?q=retry&project=app"),
    ("GET", f"{APP}/page?path=decisions/0001-retries.md"),
    ("GET", f"{APP}/recent"),
    ("GET", f"{APP}/recent?updated_since=2020-01-01T00:00:00Z"),
    ("GET", f"{APP}/sessions"),
    ("GET", f"{APP}/sessions/s1/observations"),
    ("GET", f"{APP}/handoffs"),
    ("GET", f"{APP}/messages"),
    ("GET", f"{APP}/graph"),
    ("GET", f"{APP}/status"),
]


@pytest.mark.integration
def test_auth_matrix_over_every_api_route(api):
    with httpx.Client(base_url=api, timeout=10) as c:
        for method, url in ROUTES:
            assert c.request(method, url).status_code == 401, url
            assert c.request(method, url, headers=h("wrong")).status_code == 401, url
            assert c.request(method, url, headers=h("aim_nope")).status_code == 401, url
            r = c.request(method, url, headers=h(OTHER_KEY))  # app exists but is not readable: as unknown
            assert r.status_code == 404, (url, r.text)
            assert r.json()["error"] == {"code": "not_found", "message": "project default/app not found",
                                         "data": {"workspace": "default", "project": "app"}}, url
            unknown = c.request(method, url.replace("app", "no-such-app"), headers=h(OTHER_KEY))
            assert unknown.status_code == 404 and unknown.json()["error"]["message"] == (
                "project default/no-such-app not found"), (url, unknown.text)
            assert c.request(method, url, headers=h(APP_KEY)).status_code == 200, url
            assert c.request(method, url, headers=h(ROOT)).status_code == 200, url
        assert c.get("/api/v1/status", headers=h(ROOT)).json()["counts"]["pages"] == 4  # with _global
        scoped = c.get("/api/v1/status", headers=h(APP_KEY)).json()  # only the figures of "app"
        assert (scoped["counts"]["projects"], scoped["counts"]["pages"], scoped["counts"]["handoffs_open"]) == (1, 2, 1)
        assert scoped["db_bytes"] is None and scoped["data_dir"] is None
        ws = c.get("/api/v1/workspaces", headers=h(APP_KEY)).json()
        assert [p["project"] for p in ws[0]["projects"]] == ["app"]


@pytest.mark.integration
def test_search_adds_global_preference_hits_like_memory_query(api):
    """A default-scoped search also returns ``global_scope_hits`` from ``_global`` (when readable)."""
    with httpx.Client(base_url=api, timeout=10, headers=h(ROOT)) as c:
        res = c.get("/api/v1/search", params={"q": "retrying delivery", "project": "app"}).json()
        assert res["hits"][0]["path"] == "decisions/0001-retries.md"
        assert {x["project"] for x in res["hits"]} == {"app"}
        assert [(x["project"], x["path"]) for x in res["global_scope_hits"]] == [("_global", "prefs/retries.md")]
        # only a plain one-project search gets them; a search of _global itself does not repeat them
        assert "global_scope_hits" not in c.post("/api/v1/search", json={
            "query": "retrying delivery", "project": "app", "scopes": ["infra"]}).json()
        assert "global_scope_hits" not in c.get(
            "/api/v1/search", params={"q": "retrying delivery", "project": "_global"}).json()
    with httpx.Client(base_url=api, timeout=10, headers=h(APP_KEY)) as c:  # no grant on _global
        res = c.get("/api/v1/search", params={"q": "retrying delivery", "project": "app"}).json()
        assert res["hits"] and "global_scope_hits" not in res


@pytest.mark.integration
def test_read_api_shapes(api):
    with httpx.Client(base_url=api, timeout=10, headers=h(ROOT)) as c:
        res = c.get("/api/v1/search", params={"q": "how do we retry delivery", "project": "app", "explain": True}).json()
        top = res["hits"][0]
        assert top["path"] == "decisions/0001-retries.md" and top["workspace"] == "default"
        assert {"path", "title", "snippet", "score", "kind", "workspace", "project", "page_id"} <= set(top)
        assert "fts" in res["streams_active"] and res["raw_hits"] == []
        sess = c.post("/api/v1/search", json={"query": "retry storms", "project": "app"}).json()["hits"]
        assert any(x.get("session_id") == "s1" for x in sess)
        # a session page is found by any of its turns (the turns stream), not only by its digest
        turn = c.get("/api/v1/search", params={"q": "websocket reconnect", "project": "app", "explain": True}).json()
        assert [x["path"] for x in turn["hits"]] == ["sessions/s1.md"] and turn["raw_hits"] == []
        assert turn["hits"][0]["score_details"]["streams"]["turns"]["rank"] == 1
        raw = c.get("/api/v1/search", params={"q": "gateway handshake", "project": "app"}).json()
        assert raw["hits"] == [] and raw["raw_hits"][0]["session_id"] == "s2"
        glob = c.get("/api/v1/search", params={"q": "restart jetstream store", "global": True}).json()
        assert glob["hits"][0]["project"] == "infra"
        assert c.get("/api/v1/search", params={"q": "x", "project": "ghost"}).status_code == 404
        assert c.get("/api/v1/search", params={"q": "x", "project": "../x"}).json()["error"]["code"] == "invalid_name"
        assert c.get("/api/v1/search", params={"q": "x"}).json()["error"]["code"] == "scope_required"

        page = c.get("/api/v1/workspaces/default/projects/infra/page", params={"path": "runbooks/nats.md"}).json()
        assert page["backlinks"][0]["project"] == "app" and page["body"].startswith("# NATS")
        by_id = c.get(f"/api/v1/workspaces/default/projects/infra/pages/{page['page_id']}").json()
        assert by_id["path"] == "runbooks/nats.md"
        assert c.get("/api/v1/workspaces/default/projects/app/page", params={"path": "nope.md"}).status_code == 404
        assert c.get("/api/v1/workspaces/default/projects/app/page", params={"path": "../x.md"}).status_code == 400

        inc = c.get(f"{APP}/recent", params={"updated_since": "2020-01-01T00:00:00Z", "limit": 1}).json()
        paths = [p["path"] for p in inc["pages"]]
        while inc["next_cursor"]:
            inc = c.get(f"{APP}/recent", params={"cursor": inc["next_cursor"], "limit": 1}).json()
            paths += [p["path"] for p in inc["pages"]]
        assert sorted(paths) == ["decisions/0001-retries.md", "sessions/s1.md"]
        assert isinstance(c.get(f"{APP}/recent").json(), list)

        obs = c.get(f"{APP}/sessions/s1/observations", params={"limit": 2, "body_max_chars": 5}).json()
        assert obs["total"] == 3 and obs["next_offset"] == 2 and obs["observations"][0]["truncated"]
        assert c.get(f"{APP}/handoffs").json()[0]["body"] == "continue the retry work"
        g = c.get(f"{APP}/graph").json()
        assert any(n["external"] for n in g["nodes"]) and g["edges"][0]["resolved"]
        st = c.get("/api/v1/status").json()
        assert st["schema_version"] >= 1 and st["writer_lag"] == 0 and st["import_lag"] == 0 and st["data_dir"]
        assert c.get("/docs").status_code == 200
        assert "/api/v1/search" in c.get("/openapi.json").json()["paths"]


ADVERSARIAL = ['"', "NEAR(a b)", "retry*", "title:x", "((", "AND OR NOT", "🔥", "重试", "x" * 10_000, "", "'; --"]


@pytest.mark.integration
def test_adversarial_queries_never_500(api):
    with httpx.Client(base_url=api, timeout=10, headers=h(ROOT)) as c:
        for q in ADVERSARIAL:
            for params in ({"project": "app"}, {"global": True}):
                r = c.get("/api/v1/search", params={"q": q, **params})
                assert r.status_code == 200, (q, r.text)
                r = c.post("/api/v1/search", json={"query": q, **params})
                assert r.status_code == 200, (q, r.text)
        assert c.get("/api/v1/search", params={"q": "x" * 20_000, "project": "app"}).status_code == 400
        # a big limit is clamped to `query.max_limit` (README), not refused; ≤ 0, text and booleans are 400
        for r in (c.get("/api/v1/search", params={"q": "retry", "project": "app", "limit": 1000}),
                  c.post("/api/v1/search", json={"query": "retry", "project": "app", "limit": 1000})):
            assert r.status_code == 200, r.text
            assert 0 < len(r.json()["hits"]) <= 100
        for bad in (0, -3, "ten"):
            r = c.get("/api/v1/search", params={"q": "x", "project": "app", "limit": bad})
            assert r.status_code == 400 and r.json()["error"]["code"], r.text
        for bad in (0, True, "5x"):
            r = c.post("/api/v1/search", json={"query": "x", "project": "app", "limit": bad})
            assert r.status_code == 400 and r.json()["error"]["code"], (bad, r.text)
