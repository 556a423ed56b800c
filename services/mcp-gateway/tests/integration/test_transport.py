"""The /mcp endpoint over real HTTP: session flow, stateless requests, Host/Origin, auth,
metrics, and a client nobody here wrote (the MCP Inspector CLI)."""

from __future__ import annotations

import json
import shutil
import subprocess

import httpx
import pytest
from mcp import Client

pytestmark = [pytest.mark.integration]

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def rpc(method: str, params: dict | None = None, id_: int = 1) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}}


@pytest.fixture
def gw(seed, services, h):
    """Only the gateway, on a migrated store (default/app with one page)."""
    app = seed.project("app")
    seed.page(app, "notes/hello.md", body="hello world from the store")
    procs = services("mcp-gateway")
    return procs["mcp-gateway"]


@pytest.mark.asyncio
async def test_session_flow_with_official_client(gw, h):
    """initialize → Mcp-Session-Id → tools/list + tools/call on that session (legacy handshake)."""
    async with Client(h.mcp_url(gw), mode="legacy") as c:
        assert c.server_info.name == "aimem"
        names = [t.name for t in (await c.list_tools()).tools]
        assert len(names) == 29
        res = await h.call(c, "memory_query", {"project": "app", "query": "hello"})
        assert res["hits"][0]["path"] == "notes/hello.md"


def test_session_flow_raw_http(gw):
    url = gw.url + "/mcp"
    init = rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "raw", "version": "1"}})
    r = httpx.post(url, json=init, headers=HEADERS)
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    hdrs = {**HEADERS, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"}
    r = httpx.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=hdrs)
    assert r.status_code == 202
    r = httpx.post(url, json=rpc("tools/list", id_=2), headers=hdrs)
    assert r.status_code == 200 and len(r.json()["result"]["tools"]) == 29
    r = httpx.delete(url, headers=hdrs)
    assert r.status_code in (200, 204)
    r = httpx.post(url, json=rpc("tools/list", id_=3), headers=hdrs)
    assert r.status_code == 404  # the session is gone


def test_stateless_request_needs_no_handshake(gw):
    url = gw.url + "/mcp"
    r = httpx.post(url, json=rpc("tools/call", {"name": "memory_recent", "arguments": {"project": "app"}}), headers=HEADERS)
    assert r.status_code == 200, r.text
    body = r.json()
    assert "mcp-session-id" not in r.headers
    data = json.loads(body["result"]["content"][0]["text"])
    assert [p["path"] for p in data["pages"]] == ["notes/hello.md"]
    # a JSON-RPC error, not an HTTP error, for bad params
    r = httpx.post(url, json=rpc("tools/call", {"name": "memory_recent", "arguments": {}}), headers=HEADERS)
    assert r.status_code == 200 and r.json()["error"]["code"] == -32602


def test_host_and_origin_checks(gw, settings):
    url = gw.url + "/mcp"
    port = settings.port("mcp-gateway")
    body = rpc("tools/list")
    assert httpx.post(url, json=body, headers={**HEADERS, "Host": "evil.example:80"}).status_code == 421
    assert httpx.post(url, json=body, headers={**HEADERS, "Host": "evil.example"}).status_code == 421
    for host in (f"mcp-gateway:{port}", "mcp-gateway", f"localhost:{port}", f"127.0.0.1:{port}"):
        r = httpx.post(url, json=body, headers={**HEADERS, "Host": host})
        assert r.status_code == 200, (host, r.status_code, r.text)
    r = httpx.post(url, json=body, headers={**HEADERS, "Origin": "http://evil.example"})
    assert r.status_code == 403
    r = httpx.post(url, json=body, headers={**HEADERS, "Origin": f"http://localhost:{port}"})
    assert r.status_code == 200


@pytest.mark.parametrize(("body", "code", "says"), [
    (b"[]", -32600, "got an empty array"),
    (b'[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]', -32600, "got a batch"),
    (b"42", -32600, "got a JSON number"),
    (b'"tools/list"', -32600, "got a JSON string"),
    (b"null", -32600, "got a JSON null"),
    (b"{}", -32600, "no JSON-RPC 2.0 request"),
    (b'{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}', -32600, "no JSON-RPC 2.0 request"),
    (b"{not json", -32700, "Parse error: the body is not JSON"),
])
def test_a_body_that_is_no_jsonrpc_message_gets_a_clean_error(gw, body, code, says):
    """400 + one JSON-RPC error with a one-line message, never the validator's dump."""
    r = httpx.post(gw.url + "/mcp", content=body, headers=HEADERS)
    assert r.status_code == 400, r.text
    doc = r.json()
    assert doc["jsonrpc"] == "2.0" and doc["id"] is None
    assert doc["error"]["code"] == code
    msg = doc["error"]["message"]
    assert says in msg and "\n" not in msg and "pydantic" not in msg and len(msg) < 160, msg
    # the same endpoint still serves a good request
    ok = httpx.post(gw.url + "/mcp", json=rpc("tools/list"), headers=HEADERS)
    assert ok.status_code == 200 and len(ok.json()["result"]["tools"]) == 29


def test_metrics_count_tool_calls(gw):
    url = gw.url + "/mcp"
    httpx.post(url, json=rpc("tools/call", {"name": "memory_recent", "arguments": {"project": "app"}}), headers=HEADERS)
    httpx.post(url, json=rpc("tools/call", {"name": "memory_recent", "arguments": {}}), headers=HEADERS)
    text = httpx.get(gw.url + "/metrics").text
    assert 'aimem_mcp_tool_calls_total{outcome="ok",tool="memory_recent"} 1.0' in text
    assert 'aimem_mcp_tool_calls_total{outcome="invalid_params",tool="memory_recent"} 1.0' in text
    assert 'aimem_mcp_tool_duration_seconds_count{tool="memory_recent"} 2.0' in text


@pytest.fixture
def authed_gw(seed, services, settings):
    """The gateway with a root token and one user key with a read grant on default/app only."""
    from aimem_common.auth import new_api_key

    app = seed.project("app")
    seed.project("secret")
    seed.page(app, "notes/hello.md", body="hello")
    key, prefix, key_hash = new_api_key()
    seed.conn.execute("INSERT INTO users (id, name, is_root, created_at) VALUES (1, 'ann', 0, '2026-01-01')")
    seed.conn.execute("INSERT INTO api_keys (user_id, prefix, key_hash, created_at) VALUES (1, ?, ?, '2026-01-01')",
                      (prefix, key_hash))
    seed.conn.execute("INSERT INTO grants (user_id, workspace, project, can_read, can_write) VALUES (1, 'default', 'app', 1, 0)")
    settings.auth.token = "root-s3cret"
    procs = services("mcp-gateway")
    return procs["mcp-gateway"], key


@pytest.mark.asyncio
async def test_bearer_auth(authed_gw, h):
    gw, key = authed_gw
    url = gw.url + "/mcp"
    call = rpc("tools/call", {"name": "memory_recent", "arguments": {"project": "app"}})
    r = httpx.post(url, json=call, headers=HEADERS)
    assert r.status_code == 401 and r.json()["error"]["code"] == -32001
    assert r.headers["www-authenticate"].startswith("Bearer")
    r = httpx.post(url, json=call, headers={**HEADERS, "Authorization": "Bearer wrong"})
    assert r.status_code == 401
    r = httpx.post(url, json=call, headers={**HEADERS, "Authorization": "Bearer root-s3cret"})
    assert r.status_code == 200 and "result" in r.json()
    # a user key: its grant allows reading app, not secret, and no writes
    async with h.client_with_auth(url, key) as c:
        res = await h.call(c, "memory_recent", {"project": "app"})
        assert res["pages"][0]["path"] == "notes/hello.md"
        err = await h.rpc_error(c, "memory_recent", {"project": "secret"})  # exists, not readable
        unknown = await h.rpc_error(c, "memory_recent", {"project": "no-such-project"})
        assert (err.code, err.data["code"], str(err).replace("secret", "X")) == (
            unknown.code, unknown.data["code"], str(unknown).replace("no-such-project", "X"))
        assert err.code == -32602 and err.data["code"] == "not_found"  # the same as an unknown project
        err = await h.rpc_error(c, "memory_write_page", {"project": "app", "path": "x.md", "body": "x"})
        assert err.code == -32001
        err = await h.rpc_error(c, "memory_status", {})
        assert err.code == -32001


NPX = shutil.which("npx")
INSPECTOR = ["npx", "-y", "@modelcontextprotocol/inspector@0.15.0", "--cli"]


@pytest.mark.slow
@pytest.mark.skipif(NPX is None, reason="npx (Node.js) is not installed; the MCP Inspector CLI runs through npx")
def test_mcp_inspector_cli(gw):
    """tools/list and one tools/call through the official MCP Inspector CLI."""
    url = gw.url + "/mcp"
    base = [*INSPECTOR, url, "--transport", "http"]
    out = subprocess.run([*base, "--method", "tools/list"], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    tools = json.loads(out.stdout)["tools"]
    assert len(tools) == 29 and all(t.get("annotations") for t in tools)
    out = subprocess.run(
        [*base, "--method", "tools/call", "--tool-name", "memory_recent", "--tool-arg", "project=app"],
        capture_output=True, text=True, timeout=180,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert not result.get("isError")
    assert json.loads(result["content"][0]["text"])["pages"][0]["path"] == "notes/hello.md"
