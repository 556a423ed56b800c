"""MCP sessions over real HTTP: the configured idle timeout, shown in /healthz, and an
``initialize`` that carries a stale or unknown session id starting a new session."""

from __future__ import annotations

import time

import httpx
import pytest
from mcp import Client

pytestmark = [pytest.mark.integration]

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
IDLE_S = 1.5  # the configured idle timeout of these tests
PAST_IDLE_S = 5.0  # a wait well past it (a slow CPU reaps late, never early)


def rpc(method: str, params: dict | None = None, id_: int = 1) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}}


INIT = rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "raw", "version": "1"}})


@pytest.fixture
def gw(seed, services):
    """The gateway alone, its sessions closed after ``IDLE_S`` quiet seconds."""
    app = seed.project("app")
    seed.page(app, "notes/hello.md", body="hello world from the store")
    return services("mcp-gateway", extra_env={"AIMEM_MCP__SESSION_IDLE_TIMEOUT_S": str(IDLE_S)})["mcp-gateway"]


def session_headers(sid: str) -> dict[str, str]:
    return {**HEADERS, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"}


def open_session(url: str, extra: dict[str, str] | None = None) -> str:
    """initialize (+ notifications/initialized) over raw HTTP; return the new session id."""
    r = httpx.post(url, json=INIT, headers={**HEADERS, **(extra or {})})
    assert r.status_code == 200, r.text
    assert r.json()["result"]["serverInfo"]["name"] == "aimem"
    sid = r.headers["mcp-session-id"]
    r = httpx.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session_headers(sid))
    assert r.status_code == 202, r.text
    return sid


def test_idle_timeout_is_configured_and_shown(gw):
    health = httpx.get(gw.url + "/healthz").json()
    assert health["checks"]["mcp_sessions"] == {"idle_timeout_s": IDLE_S}


def test_stale_session_answers_404_and_initialize_with_it_starts_a_new_one(gw):
    url = gw.url + "/mcp"
    sid = open_session(url)
    r = httpx.post(url, json=rpc("tools/list", id_=2), headers=session_headers(sid))
    assert r.status_code == 200 and len(r.json()["result"]["tools"]) == 29
    time.sleep(PAST_IDLE_S)
    r = httpx.post(url, json=rpc("tools/list", id_=3), headers=session_headers(sid))
    assert r.status_code == 404, r.text  # reaped after the configured idle time
    # the client re-initializes, still sending the id it kept: a new session, not a refusal
    new = open_session(url, {"Mcp-Session-Id": sid})
    assert new != sid
    r = httpx.post(url, json=rpc("tools/list", id_=4), headers=session_headers(new))
    assert r.status_code == 200 and len(r.json()["result"]["tools"]) == 29
    assert httpx.post(url, json=rpc("tools/list", id_=5), headers=session_headers(sid)).status_code == 404


def test_initialize_with_an_id_never_issued_starts_a_session(gw):
    url = gw.url + "/mcp"
    sid = open_session(url, {"Mcp-Session-Id": "f" * 32})
    assert sid != "f" * 32
    r = httpx.post(url, json=rpc("tools/call", {"name": "memory_recent", "arguments": {"project": "app"}}, 2),
                   headers=session_headers(sid))
    assert r.status_code == 200 and r.json()["result"]["structuredContent"]["pages"][0]["path"] == "notes/hello.md"


def test_a_session_in_use_is_kept(gw):
    """Requests spaced under the idle timeout keep one session alive past it."""
    url = gw.url + "/mcp"
    sid = open_session(url)
    t0 = time.monotonic()
    while time.monotonic() - t0 < IDLE_S * 3:
        time.sleep(IDLE_S / 4)
        r = httpx.post(url, json=rpc("ping", id_=9), headers=session_headers(sid))
        assert r.status_code == 200, r.text


@pytest.mark.asyncio
async def test_official_client_keeps_its_session_while_its_stream_is_open(gw, h):
    """The official client holds the server stream (GET) open, so its session is never idle:
    a call after more than the idle timeout still lands in the same session."""
    url = h.mcp_url(gw)
    async with Client(url, mode="legacy") as c:
        assert (await h.call(c, "memory_recent", {"project": "app"}))["pages"][0]["path"] == "notes/hello.md"
        time.sleep(PAST_IDLE_S)  # blocks the loop on purpose: no new request reaches the gateway
        assert (await h.call(c, "memory_recent", {"project": "app"}))["pages"][0]["path"] == "notes/hello.md"
