"""Read tools over real HTTP against real processes, on a seeded store.

The store is seeded row by row before the services start (no writer ops needed), so these
tests pin the read surface: happy paths, aliases, fail-closed scopes and bad inputs.
"""

from __future__ import annotations

import pytest
from mcp import Client

from aimem_testing.seed import NOW

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

APP = {"workspace": "default", "project": "app"}


@pytest.fixture
def world(seed, services, h):
    """default/app with pages, a session, handoffs and mail; default/other; the _global scope."""
    app = seed.project("app")
    other = seed.project("other")
    glob = seed.project("_global")
    ids = {
        "retry": seed.page(app, "decisions/retry-policy.md", title="Retry policy",
                           body="Keep the same event ID when retrying delivery. Backoff is exponential."),
        "rule": seed.page(app, "_rules/style.md", title="Style rule", body="Always run the linter before commit."),
        "slot": seed.page(app, "_slots/owner.md", title="Owner", body="The owner is the platform team.", pinned=True),
        "nats": seed.page(app, "concepts/nats.md", title="NATS", body="JetStream carries every mutation."),
        "pref": seed.page(glob, "prefs/editor.md", title="Editor preference", body="Retrying prefers vim keybindings."),
    }
    seed.page(other, "notes/other.md", body="retry other project")
    seed.session(app, "sess-1", summary_page_id=None, observations=3, obs_age_days=1)
    ts = NOW.isoformat()
    seed.conn.execute(
        "INSERT INTO handoffs (workspace_id, project_id, automatic, shared, owner, title, body, status, created_at)"
        " VALUES (?, ?, 0, 0, 'anonymous', 'Continue retries', 'Add the delivery test next.', 'open', ?)",
        (app.workspace_id, app.project_id, ts),
    )
    seed.conn.execute(
        "INSERT INTO agent_messages (from_workspace_id, from_project_id, to_workspace_id, to_project_id, from_actor,"
        " subject, body, status, created_at) VALUES (?, ?, ?, ?, 'anonymous', 'API change', 'v2 is live', 'pending', ?)",
        (other.workspace_id, other.project_id, app.workspace_id, app.project_id, ts),
    )
    # Reads need no writer: the store is seeded and page.access bumps just queue on JetStream.
    procs = services("mcp-gateway")
    return {"url": h.mcp_url(procs["mcp-gateway"]), "ids": ids, "procs": procs}


async def test_read_tools_happy_paths(world, h):
    url = world["url"]
    async with Client(url) as c:
        # memory_query with the q alias and the top_k alias; global preferences ride along
        res = await h.call(c, "memory_query", {**APP, "q": "retry delivery event", "top_k": 3})
        assert res["hits"] and res["hits"][0]["path"] == "decisions/retry-policy.md"
        assert len(res["hits"]) <= 3
        assert {h["project"] for h in res["hits"]} == {"app"}
        assert [h["path"] for h in res.get("global_scope_hits", [])] == ["prefs/editor.md"]
        res = await h.call(c, "memory_query", {**APP, "search": "exponential backoff", "n": 1, "explain": True})
        assert len(res["hits"]) == 1 and "score_details" in res["hits"][0]
        res = await h.call(c, "memory_query", {"query": "retry", "global": True})
        assert {h["project"] for h in res["hits"]} >= {"app", "other"}
        res = await h.call(c, "memory_query", {**APP, "query": "retry", "scopes": ["other"]})
        assert {h["project"] for h in res["hits"]} == {"app", "other"}
        # no page matches: raw observation fallback
        res = await h.call(c, "memory_query", {**APP, "query": "prompt body"})
        assert res["hits"] == [] or all(h["project"] == "app" for h in res["hits"])

        page = await h.call(c, "memory_read_page", {**APP, "path": "decisions/retry-policy.md"})
        assert page["page_id"] == world["ids"]["retry"] and "same event ID" in page["body"]
        page = await h.call(c, "memory_read_page", {**APP, "query": "JetStream mutation"})
        assert page["path"] == "concepts/nats.md"
        page = await h.call(c, "memory_read_page", {**APP, "page_id": world["ids"]["rule"]})
        assert page["path"] == "_rules/style.md"

        rec = await h.call(c, "memory_recent", {**APP, "limit": 2})
        assert len(rec["pages"]) == 2 and "body" not in rec["pages"][0]
        inc = await h.call(c, "memory_recent", {**APP, "updated_since": "2000-01-01T00:00:00Z", "n": 2})
        assert len(inc["pages"]) == 2 and inc["next_cursor"]
        inc2 = await h.call(c, "memory_recent", {**APP, "cursor": inc["next_cursor"], "n": 10})
        assert {p["path"] for p in inc["pages"]}.isdisjoint({p["path"] for p in inc2["pages"]})

        obs = await h.call(c, "memory_read_session_observations", {**APP, "limit": 2})
        assert obs["session_id"] == "sess-1" and obs["total"] == 3 and len(obs["observations"]) == 2
        assert obs["next_offset"] == 2

        st = await h.call(c, "memory_status", APP)
        assert st["counts"]["pages"] == 4 and st["project"] == "app"
        st = await h.call(c, "memory_status", {})
        assert st["counts"]["projects"] == 3

        br = await h.call(c, "memory_briefing", {**APP, "settled_first": True})
        assert [r["path"] for r in br["rules"]] == ["_rules/style.md"]
        assert [s["path"] for s in br["slots"]] == ["_slots/owner.md"]
        assert br["counts"]["handoffs_open"] == 1 and br["counts"]["messages_pending"] == 1
        assert list(br)[2] == "settled"

        ex = await h.call(c, "memory_explore", APP)
        assert ex["mode"] == "structured" and ex["briefing"]["project"] == "app" and ex["reason"]

        hl = await h.call(c, "memory_handoff_list", APP)
        assert hl["count"] == 1 and hl["handoffs"][0]["title"] == "Continue retries"
        ml = await h.call(c, "memory_message_list", APP)
        assert ml["count"] == 1 and ml["messages"][0]["from_project"] == "other"
        ob = await h.call(c, "memory_message_list", {"project": "other", "box": "outbox"})
        assert ob["count"] == 1

        rt = await h.call(c, "memory_install_self_routing", {"client": "codex", "project": "app"})
        assert "memory_handoff_accept" in rt["snippet"] and rt["targets"] == {
            "codex": {"instructions": "AGENTS.md", "skills_dir": ".agents/skills"}
        }
        assert len(rt["skills"]) == 3


async def test_reads_fail_closed_and_bad_inputs(world, h):
    url = world["url"]
    async with Client(url) as c:
        # missing / partial / unknown scope
        for name in ("memory_recent", "memory_briefing", "memory_handoff_list", "memory_message_list"):
            err = await h.rpc_error(c, name, {"workspace": "default"})
            assert err.code == -32602 and "project" in err.message
            err = await h.rpc_error(c, name, {"project": "nope"})
            assert err.code == -32602 and err.data["code"] == "project_not_found"
        err = await h.rpc_error(c, "memory_query", {"query": "x"})
        assert err.code == -32602 and err.data["code"] == "scope_required"
        err = await h.rpc_error(c, "memory_query", {"project": "app", "workspace": "ghost", "query": "x"})
        assert err.data["code"] == "workspace_not_found"
        # schema violations name the field
        err = await h.rpc_error(c, "memory_query", {**APP})
        assert err.code == -32602 and "query" in err.message
        err = await h.rpc_error(c, "memory_query", {**APP, "query": "x", "limit": 0})
        assert err.code == -32602 and "limit" in err.data["fields"]
        err = await h.rpc_error(c, "memory_query", {**APP, "query": "x", "limit": True})  # not a count
        assert err.code == -32602 and "limit" in err.data["fields"]
        big = await h.call(c, "memory_query", {**APP, "query": "x", "limit": 1000})  # clamped, as REST
        assert "hits" in big
        # the API's and the web's limit: a pasted 10,000-character log is read (its start), 16 KiB + 1 refused
        pasted = await h.call(c, "memory_query", {**APP, "query": "decision " * 1250})
        assert "hits" in pasted
        err = await h.rpc_error(c, "memory_query", {**APP, "query": "x" * (16 * 1024 + 1)})
        assert err.code == -32602 and "query" in err.data["fields"]
        err = await h.rpc_error(c, "memory_query", {**APP, "query": "x", "bogus": True})
        assert "bogus" in err.message and "unknown argument" in err.message
        err = await h.rpc_error(c, "memory_read_page", {**APP, "path": "a.md", "query": "x"})
        assert err.code == -32602 and "exactly one" in err.message
        err = await h.rpc_error(c, "memory_read_page", {**APP, "path": "missing.md"})
        assert err.code == -32602 and err.data["code"] == "page_not_found"
        err = await h.rpc_error(c, "memory_read_page", {**APP, "query": "zzzqqq nothing"})
        assert err.data["code"] == "page_not_found"
        err = await h.rpc_error(c, "memory_read_session_observations", {**APP, "session_id": "nope"})
        assert err.data["code"] == "session_not_found"
        err = await h.rpc_error(c, "memory_recent", {**APP, "cursor": "garbage!"})
        assert err.data["code"] == "invalid_cursor"
        err = await h.rpc_error(c, "memory_recent", {"workspace": "bad name", "project": "app"})
        assert err.code == -32602 and err.data["code"] == "invalid_name"
        err = await h.rpc_error(c, "memory_install_self_routing", {"client": "emacs"})
        assert err.code == -32602
        err = await h.rpc_error(c, "memory_handoff_list", {**APP, "status": "weird"})
        assert err.code == -32602
        # unknown tool
        res = await c.call_tool("memory_nope", {})
        assert res.is_error
