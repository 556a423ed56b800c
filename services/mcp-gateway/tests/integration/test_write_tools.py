"""Write tools over real HTTP against real writer + gateway processes.

Pins: read-your-write, conditional writes (precondition_failed data), atomic batches,
handoff claim-once and message pop-exactly-once under concurrency, maintainer-backed tools
failing clearly without a maintainer, and a silent writer turning into a timeout error.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from mcp import Client

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

APP = {"workspace": "demo", "project": "app"}


@pytest.fixture
def url(services, h):
    h.requires_writer_ops("page.write", "page.write_batch", "page.delete", "page.feedback", "handoff.begin",
                          "handoff.accept", "handoff.cancel", "message.send", "message.pop", "message.cancel")
    procs = services("writer", "mcp-gateway")
    return h.mcp_url(procs["mcp-gateway"])


async def test_write_then_read_your_write_and_conditional_writes(url, h):
    async with Client(url) as c:
        w = await h.call(c, "memory_write_page", {**APP, "path": "notes/retries.md",
                                                   "body": "# Retry policy\nKeep the same event ID when retrying."})
        assert w["path"] == "notes/retries.md" and isinstance(w["page_id"], int)
        page = await h.call(c, "memory_read_page", {**APP, "path": "notes/retries.md"})  # scope now exists
        assert page["page_id"] == w["page_id"] and "same event ID" in page["body"]
        hits = await h.call(c, "memory_query", {**APP, "query": "retry policy"})
        assert hits["hits"][0]["path"] == "notes/retries.md"

        err = await h.rpc_error(c, "memory_write_page", {**APP, "path": "notes/retries.md", "body": "x",
                                                          "create_only": True})
        assert err.code == -32600
        assert err.data["reason"] == "precondition_failed" and err.data["current_page_id"] == w["page_id"]
        err = await h.rpc_error(c, "memory_write_page", {**APP, "path": "notes/retries.md", "body": "x",
                                                          "expected_page_id": w["page_id"] + 1000})
        assert err.data["reason"] == "precondition_failed" and err.data["current_page_id"] == w["page_id"]
        w2 = await h.call(c, "memory_write_page", {**APP, "path": "notes/retries.md", "body": "v2",
                                                    "expected_page_id": w["page_id"]})
        assert w2["page_id"] != w["page_id"]
        assert (await h.call(c, "memory_read_page", {**APP, "path": "notes/retries.md"}))["body"].strip() == "v2"

        g = await h.call(c, "memory_write_page", {**APP, "path": "prefs/tabs.md", "body": "Tabs over spaces.",
                                                   "scope": "global", "expires_at": "2999-01-01"})
        assert g["project"] == "_global"
        q = await h.call(c, "memory_query", {**APP, "query": "tabs spaces"})
        assert [x["path"] for x in q["global_scope_hits"]] == ["prefs/tabs.md"]

        fb = await h.call(c, "memory_feedback", {**APP, "path": "notes/retries.md", "signal": "helpful"})
        assert fb["signal"] == "helpful"

        d = await h.call(c, "memory_delete_page", {**APP, "path": "notes/retries.md"})
        assert d["deleted"] is True
        d = await h.call(c, "memory_delete_page", {**APP, "path": "notes/retries.md"})
        assert d["deleted"] is False
        err = await h.rpc_error(c, "memory_read_page", {**APP, "path": "notes/retries.md"})
        assert err.data["code"] == "page_not_found"

        # bad inputs
        for args in (
            {**APP, "path": "../etc/passwd.md", "body": "x"},
            {**APP, "path": "notes/no-extension", "body": "x"},
            {**APP, "body": "x"},
            {"path": "a.md", "body": "x"},
            {**APP, "path": "a.md", "body": "x", "scope": "elsewhere"},
        ):
            err = await h.rpc_error(c, "memory_write_page", args)
            assert err.code == -32602, args
        err = await h.rpc_error(c, "memory_feedback", {**APP, "path": "notes/x.md", "signal": "meh"})
        assert err.code == -32602
        err = await h.rpc_error(c, "memory_feedback", {**APP, "path": "notes/missing.md", "signal": "wrong"})
        assert err.code == -32602 and err.data["code"] == "not_found"
        err = await h.rpc_error(c, "memory_delete_page", {"workspace": "demo", "project": "ghost", "path": "a.md"})
        assert err.code == -32602


async def test_batch_is_atomic(url, h):
    async with Client(url) as c:
        res = await h.call(c, "memory_write_pages_batch", {**APP, "pages": [
            {"path": "b/one.md", "body": "one", "create_only": True},
            {"path": "b/two.md", "body": "two", "create_only": True},
        ]})
        assert [p["path"] for p in res["pages"]] == ["b/one.md", "b/two.md"]
        one_id = res["pages"][0]["page_id"]
        err = await h.rpc_error(c, "memory_write_pages_batch", {**APP, "pages": [
            {"path": "b/three.md", "body": "three", "create_only": True},
            {"path": "b/one.md", "body": "one v2", "expected_page_id": one_id + 999},
        ]})
        assert err.code == -32600 and err.data["reason"] == "precondition_failed"
        assert err.data["index"] == 1 and err.data["current_page_id"] == one_id
        err = await h.rpc_error(c, "memory_read_page", {**APP, "path": "b/three.md"})  # nothing written
        assert err.data["code"] == "page_not_found"
        err = await h.rpc_error(c, "memory_write_pages_batch", {**APP, "pages": [
            {"path": "b/x.md", "body": "x", "create_only": True}, {"path": "b/x.md", "body": "y", "create_only": True}]})
        assert err.code == -32602 and err.data["code"] == "duplicate_path"
        err = await h.rpc_error(c, "memory_write_pages_batch", {**APP, "pages": [{"path": "b/y.md", "body": "y"}]})
        assert err.code == -32602 and "exactly one" in err.message
        err = await h.rpc_error(c, "memory_write_pages_batch", {**APP, "pages": []})
        assert err.code == -32602


async def test_handoff_flow_and_claim_once_under_concurrency(url, h):
    async with Client(url) as c:
        b = await h.call(c, "memory_handoff_begin", {**APP, "summary": "Retry policy saved.",
                                                      "next_steps": ["Add a retry regression test."]})
        hid = b["handoff_id"]
        assert isinstance(hid, int) and "Next steps" in b["handoff"]["body"]
        listed = await h.call(c, "memory_handoff_list", APP)
        assert [x["id"] for x in listed["handoffs"]] == [hid]

    async def accept() -> dict:
        async with Client(url) as c2:
            return await h.call(c2, "memory_handoff_accept", APP)

    results = await asyncio.gather(*(accept() for _ in range(2)))
    claimed = [r["handoff"] for r in results if r["handoff"]]
    assert len(claimed) == 1 and claimed[0]["id"] == hid

    async with Client(url) as c:
        assert (await h.call(c, "memory_handoff_accept", APP))["handoff"] is None
        assert (await h.call(c, "memory_handoff_list", APP))["count"] == 0
        b2 = await h.call(c, "memory_handoff_begin", {**APP, "summary": "Oops, wrong project."})
        cancelled = await h.call(c, "memory_handoff_cancel", {**APP, "handoff_id": b2["handoff_id"]})
        assert cancelled["cancelled"] is True
        # an exact id that is no longer open is refused, not claimed
        err = await h.rpc_error(c, "memory_handoff_accept", {**APP, "handoff_id": b2["handoff_id"]})
        assert err.data["code"] == "handoff_not_open"
        # -32600 once the writer's reply carries the error's HTTP status (409) like
        # bus.make_reply does; until then a custom code arrives as status 500 (-32603).
        assert err.code in (-32600, -32603)
        err = await h.rpc_error(c, "memory_handoff_cancel", {**APP, "handoff_id": 99999})
        assert err.code == -32602
        err = await h.rpc_error(c, "memory_handoff_begin", {**APP, "summary": ""})
        assert err.code == -32602
        err = await h.rpc_error(c, "memory_handoff_begin", {**APP, "summary": " \n\t "})  # blank: no title
        assert err.code == -32602 and "blank" in err.message
        err = await h.rpc_error(c, "memory_handoff_accept", {"workspace": "demo", "project": "ghost"})
        assert err.data["code"] == "project_not_found"  # accepting never creates a scope


async def test_root_accepts_the_handoff_of_an_idle_finalised_session(url, h, settings):
    """The maintainer's idle pass writes a crashed session's automatic handoff; it belongs to
    the place, so root's memory_handoff_accept claims it and the list stops showing it open
    (issue 26 class 1: it was owned by `maintainer` and invisible to every other actor)."""
    from aimem_common.bus import Bus, connect
    from aimem_common.commands import make_envelope

    nc = await connect(settings.bus, name="test", reconnect=False)
    try:
        bus = Bus(nc, settings.bus)
        obs = {"session_id": "crashed", "kind": "user-prompt", "title": "Prompt: shard the queue",
               "body": "shard the queue", "cwd": "/w/app", "sanitized": True, "agent": "codex"}
        await bus.request(make_envelope("observation.append", obs, actor="hook", **APP), timeout_s=30)
        end = {"session_id": "crashed", "agent": "codex", "cwd": "/w/app", "reason": "idle"}
        res = await bus.request(make_envelope("session.end", end, actor="maintainer", **APP), timeout_s=30)
    finally:
        await nc.close()
    assert isinstance(res["handoff_id"], int)
    async with Client(url) as c:
        assert [x["id"] for x in (await h.call(c, "memory_handoff_list", APP))["handoffs"]] == [res["handoff_id"]]
        got = await h.call(c, "memory_handoff_accept", {**APP, "cwd": "/w/app"})
        assert got["handoff"]["id"] == res["handoff_id"] and "shard the queue" in got["handoff"]["body"]
        assert (await h.call(c, "memory_handoff_list", APP))["count"] == 0


async def test_messages_pop_exactly_once_under_concurrency(url, h):
    async with Client(url) as c:
        await h.call(c, "memory_write_page", {"workspace": "demo", "project": "other", "path": "a.md", "body": "x"})
        await h.call(c, "memory_write_page", {**APP, "path": "a.md", "body": "x"})
        err = await h.rpc_error(c, "memory_message_send", {**APP, "to_project": "ghost", "body": "hi"})
        assert err.code == -32602 and err.data["code"] == "project_not_found"
        sent = [await h.call(c, "memory_message_send", {**APP, "to_project": "other", "body": f"msg {i}",
                                                          "subject": "API change"}) for i in range(3)]
        assert all(isinstance(s["message_id"], int) for s in sent)
        inbox = await h.call(c, "memory_message_list", {"workspace": "demo", "project": "other"})
        assert inbox["count"] == 3

    other = {"workspace": "demo", "project": "other"}

    async def pop() -> dict | None:
        async with Client(url) as c2:
            return (await h.call(c2, "memory_message_pop", other))["message"]

    popped = await asyncio.gather(*(pop() for _ in range(6)))
    got = [m for m in popped if m]
    assert sorted(m["id"] for m in got) == sorted(s["message_id"] for s in sent)  # each exactly once
    assert all(m["untrusted"] and 'from="demo/app"' in m["fenced"] for m in got)

    async with Client(url) as c:
        assert (await h.call(c, "memory_message_pop", other))["message"] is None
        s = await h.call(c, "memory_message_send", {**APP, "to_project": "other", "body": "retract me"})
        out = await h.call(c, "memory_message_list", {**APP, "box": "outbox"})
        assert [m["id"] for m in out["messages"]] == [s["message_id"]]
        cancelled = await h.call(c, "memory_message_cancel", APP)
        assert cancelled["cancelled"] == [s["message_id"]]
        assert (await h.call(c, "memory_message_pop", other))["message"] is None
        err = await h.rpc_error(c, "memory_message_send", {**APP, "to_project": "other", "body": ""})
        assert err.code == -32602


async def test_maintainer_tools_fail_clearly_without_a_maintainer(url, h):
    async with Client(url) as c:
        await h.call(c, "memory_write_page", {**APP, "path": "a.md", "body": "x"})
        for name, args in (
            ("memory_consolidate", {}),
            ("memory_auto_improve", {}),
            ("memory_forget_sweep", {"dry_run": True}),
            ("memory_lint", {}),
        ):
            t0 = time.monotonic()
            err = await h.rpc_error(c, name, {**APP, **args})
            assert err.code == -32002 and err.data["code"] == "maintainer_unavailable", name
            assert time.monotonic() - t0 < 5, name
        ex = await h.call(c, "memory_explore", APP)
        assert ex["mode"] == "structured" and ex["reason_code"] == "maintainer_unavailable"


async def test_silent_writer_is_a_timeout_error_not_a_hang(seed, services, h):
    seed.project("app", workspace="demo")
    procs = services("mcp-gateway", extra_env={"AIMEM_BUS__REQUEST_TIMEOUT_S": "1"})
    url = h.mcp_url(procs["mcp-gateway"])
    async with Client(url) as c:
        t0 = time.monotonic()
        err = await h.rpc_error(c, "memory_write_page", {**APP, "path": "a.md", "body": "x"})
        assert err.code == -32003 and "may still apply" in err.message
        assert time.monotonic() - t0 < 5
    assert httpx.get(procs["mcp-gateway"].url + "/healthz").status_code == 200


async def test_a_handoff_naming_a_purged_session_is_a_clear_error_and_is_not_stored(url, h, settings):
    """memory_handoff_begin with a purged session's id: the writer drops it and counts it on the
    purge tombstone like every other late op of that session; the caller gets a JSON-RPC error
    carrying ``purged`` (410), never a handoff that brings the purged session back."""
    from aimem_common.bus import Bus, connect
    from aimem_common.commands import make_envelope

    nc = await connect(settings.bus, name="test", reconnect=False)
    try:
        bus = Bus(nc, settings.bus)
        obs = {"session_id": "gone-1", "kind": "user-prompt", "title": "Prompt: x", "body": "x", "cwd": "/w/app",
               "sanitized": True, "agent": "codex"}
        await bus.request(make_envelope("observation.append", obs, actor="hook", **APP), timeout_s=30)
        purged = await bus.request(make_envelope("session.purge", {"session_id": "gone-1"}, actor="root", **APP),
                                   timeout_s=30)
    finally:
        await nc.close()
    async with Client(url) as c:
        err = await h.rpc_error(c, "memory_handoff_begin", {**APP, "summary": "continue gone-1's work",
                                                             "session_id": "gone-1"})
        assert err.data["code"] == "purged" and err.data["session_id"] == "gone-1" and "purged" in err.message
        assert (await h.call(c, "memory_handoff_list", APP))["count"] == 0
        ok = await h.call(c, "memory_handoff_begin", {**APP, "summary": "other work", "session_id": "live-2"})
        assert isinstance(ok["handoff_id"], int)
    assert purged["tombstone_id"]
