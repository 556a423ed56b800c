"""Tools for programs over real writer + gateway processes (issue 30): resolving a write
target without creating it, stable ``project_id`` selectors, ``expected_page_id`` on delete,
root's ``any_owner`` on handoff accept/cancel, the batch per-body limit, and
memory_restore_page (a page's checkpoints; one written back)."""

from __future__ import annotations

import asyncio
import time

import pytest
from mcp import Client

from aimem_common.bus import Bus, connect
from aimem_common.commands import make_envelope

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

APP = {"workspace": "demo", "project": "app"}


@pytest.fixture
def url(services, h):
    h.requires_writer_ops("page.write", "page.write_batch", "page.delete", "page.restore", "handoff.begin",
                          "handoff.accept", "handoff.cancel")
    procs = services("writer", "mcp-gateway")
    return h.mcp_url(procs["mcp-gateway"])


async def test_resolve_write_target_creates_nothing_and_project_id_selects_exactly(url, h):
    async with Client(url) as c:
        t = await h.call(c, "memory_resolve_write_target", APP)
        assert t == {"workspace": "demo", "project": "app", "workspace_id": None, "project_id": None,
                     "workspace_exists": False, "project_exists": False, "would_create": True}
        assert (await h.call(c, "memory_resolve_write_target", APP))["project_exists"] is False  # still nothing
        err = await h.rpc_error(c, "memory_read_page", {**APP, "path": "a.md"})
        assert err.data["code"] in ("workspace_not_found", "project_not_found")

        w = await h.call(c, "memory_write_page", {**APP, "path": "notes/a.md", "body": "alpha"})
        t = await h.call(c, "memory_resolve_write_target", APP)
        assert t["project_exists"] and t["workspace_exists"] and not t["would_create"]
        pid = t["project_id"]
        assert isinstance(pid, str) and t["workspace_id"]
        assert await h.call(c, "memory_resolve_write_target", {"project_id": pid}) == t
        assert await h.call(c, "memory_resolve_write_target", {"workspace": "demo", "project_id": pid}) == t

        # the id reads and writes the same project; names come back in the result
        page = await h.call(c, "memory_read_page", {"project_id": pid, "path": "notes/a.md"})
        assert page["page_id"] == w["page_id"]
        w2 = await h.call(c, "memory_write_page", {"project_id": pid, "path": "notes/b.md", "body": "beta"})
        assert (w2["workspace"], w2["project"]) == ("demo", "app")

        err = await h.rpc_error(c, "memory_read_page", {**APP, "project_id": pid, "path": "notes/a.md"})
        assert err.code == -32602 and "not both" in err.message
        for bad in ({"project_id": "nope"}, {"workspace": "other", "project_id": pid}):
            err = await h.rpc_error(c, "memory_write_page", {**bad, "path": "x.md", "body": "x"})
            assert err.code == -32602 and err.data["code"] == "not_found"
            err = await h.rpc_error(c, "memory_resolve_write_target", bad)
            assert err.data["code"] == "not_found"
        err = await h.rpc_error(c, "memory_resolve_write_target", {"workspace": "demo"})
        assert err.data["code"] == "scope_required"
        assert (await h.call(c, "memory_resolve_write_target", {"workspace": "other", "project": "x"}))[
            "workspace_exists"] is False


async def test_delete_page_expected_page_id(url, h):
    async with Client(url) as c:
        w = await h.call(c, "memory_write_page", {**APP, "path": "notes/x.md", "body": "v1"})
        w2 = await h.call(c, "memory_write_page", {**APP, "path": "notes/x.md", "body": "v2"})
        err = await h.rpc_error(c, "memory_delete_page", {**APP, "path": "notes/x.md",
                                                          "expected_page_id": w["page_id"]})
        assert err.code == -32600
        assert err.data["reason"] == "precondition_failed"
        assert err.data["current_page_id"] == w2["page_id"] and err.data["expected_page_id"] == w["page_id"]
        assert (await h.call(c, "memory_read_page", {**APP, "path": "notes/x.md"}))["body"].strip() == "v2"
        d = await h.call(c, "memory_delete_page", {**APP, "path": "notes/x.md", "expected_page_id": w2["page_id"]})
        assert d["deleted"] is True
        # 0 = there must be no page: true now, so nothing to delete and no error
        d = await h.call(c, "memory_delete_page", {**APP, "path": "notes/x.md", "expected_page_id": 0})
        assert d["deleted"] is False


async def test_root_any_owner_accepts_and_cancels_another_operators_handoff(url, h, settings):
    nc = await connect(settings.bus, name="test", reconnect=False)
    try:
        bus = Bus(nc, settings.bus)
        ids = []
        for summary in ("Alice's private note", "Alice's second note"):
            r = await bus.request(make_envelope("handoff.begin", {"body": summary, "title": summary}, actor="alice", **APP),
                                  timeout_s=30)
            ids.append(r["handoff"]["id"])
    finally:
        await nc.close()
    async with Client(url) as c:
        assert (await h.call(c, "memory_handoff_list", APP))["count"] == 0  # private to alice
        err = await h.rpc_error(c, "memory_handoff_accept", {**APP, "handoff_id": ids[0]})
        assert err.code == -32602  # not visible without any_owner
        assert (await h.call(c, "memory_handoff_accept", APP))["handoff"] is None
        got = await h.call(c, "memory_handoff_accept", {**APP, "handoff_id": ids[0], "any_owner": True})
        assert got["handoff"]["id"] == ids[0]
        err = await h.rpc_error(c, "memory_handoff_cancel", {**APP, "handoff_id": ids[1]})
        assert err.code == -32602
        cancelled = await h.call(c, "memory_handoff_cancel", {**APP, "handoff_id": ids[1], "any_owner": True})
        assert cancelled["cancelled"] is True
        listed = await h.call(c, "memory_handoff_list", {**APP, "any_owner": True, "status": "any"})
        assert {x["id"]: x["status"] for x in listed["handoffs"]} == {ids[0]: "accepted", ids[1]: "expired"}


async def test_batch_refuses_a_body_over_one_mib(url, h):
    async with Client(url) as c:
        big = "x" * (1024 * 1024 + 1)
        err = await h.rpc_error(c, "memory_write_pages_batch", {**APP, "pages": [
            {"path": "a.md", "body": "small", "create_only": True},
            {"path": "b.md", "body": big, "create_only": True}]})
        assert err.data["code"] == "payload_too_large" and err.data["index"] == 1
        # (a page itself is capped lower, [writer] max_page_bytes = 256 KiB by default)
        ok = await h.call(c, "memory_write_pages_batch", {**APP, "pages": [
            {"path": "b.md", "body": "y" * (200 * 1024), "create_only": True}]})
        assert len(ok["pages"]) == 1
        assert [p["path"] for p in (await h.call(c, "memory_recent", APP))["pages"]] == ["b.md"]  # a.md: never written


async def test_restore_page_lists_checkpoints_and_writes_one_back(url, h):
    async with Client(url) as c:
        await h.call(c, "memory_write_page", {**APP, "path": "decisions/d.md", "body": "first take"})
        deadline = time.monotonic() + 20
        while True:  # checkpoints are debounced: wait for the first one
            listed = await h.call(c, "memory_restore_page", {**APP, "path": "decisions/d.md"})
            if listed["count"] >= 1 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        await h.call(c, "memory_write_page", {**APP, "path": "decisions/d.md", "body": "second take"})
        while True:
            listed = await h.call(c, "memory_restore_page", {**APP, "path": "decisions/d.md"})
            if listed["count"] >= 2 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert listed["count"] == 2, listed
        older = listed["checkpoints"][1]["oid"]
        res = await h.call(c, "memory_restore_page", {**APP, "path": "decisions/d.md", "rev": older[:12]})
        assert res["restored_from"]["rev"] == older
        body = (await h.call(c, "memory_read_page", {**APP, "path": "decisions/d.md"}))["body"]
        assert "first take" in body and "second" not in body
        err = await h.rpc_error(c, "memory_restore_page", {**APP, "path": "decisions/d.md", "rev": "deadbeef"})
        assert err.data["code"] == "git_error"
