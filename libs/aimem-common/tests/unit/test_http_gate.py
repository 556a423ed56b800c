"""The request gate every service installs: credentials before the body, a bound on reading it."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from fastapi import FastAPI, Request

from aimem_common import config
from aimem_common.http import install_error_handlers, install_gate

pytestmark = [pytest.mark.asyncio]
TOKEN = "root-token-for-the-gate"


def _app(*, token: str | None = TOKEN, require_token: bool = False, timeout_s: float = 0.3,
         min_rate: int = 65536) -> tuple[FastAPI, list]:
    settings = config.Settings(auth={"token": token}, metrics={"require_token": require_token},
                               server={"body_read_timeout_s": timeout_s, "body_min_rate_bytes_s": min_rate,
                                       "body_read_max_s": 5.0})
    app = FastAPI()
    install_error_handlers(app)
    install_gate(app, settings, self_auth=("/mcp",))
    seen: list = []

    @app.post("/hook")
    async def hook(request: Request) -> dict:
        seen.append(await request.body())
        return {"ok": True}

    @app.get("/metrics")
    async def metrics() -> dict:
        return {"m": 1}

    @app.post("/mcp")
    async def mcp(request: Request) -> dict:
        seen.append("mcp")
        return {"own": "auth"}

    @app.post("/web/login")
    async def login(request: Request) -> dict:
        seen.append("web")
        return {"login": True}

    return app, seen


async def test_no_or_a_wrong_credential_is_refused_before_the_route_reads_anything() -> None:
    app, seen = _app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": f"Basic {TOKEN}"},
                        {"Authorization": "Bearer aim_unknown"}):
            r = await c.post("/hook", json={"p": 1}, headers=headers)
            assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", headers
            assert r.headers["www-authenticate"].startswith("Bearer")
        assert seen == []
        r = await c.post("/hook", json={"p": 1}, headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 200 and seen == [b'{"p":1}']
        # the MCP endpoint and the web UI authenticate themselves; metrics open by default
        assert (await c.post("/mcp", json={})).status_code == 200
        assert (await c.post("/web/login", json={})).status_code == 200
        assert (await c.get("/metrics")).status_code == 200
        assert (await c.get("/openapi.json")).status_code == 200


async def test_require_token_closes_metrics_and_docs() -> None:
    app, _ = _app(require_token=True)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
        for path in ("/metrics", "/openapi.json", "/docs"):
            assert (await c.get(path)).status_code == 401, path
            assert (await c.get(path, headers={"Authorization": f"Bearer {TOKEN}"})).status_code == 200, path
        assert (await c.get("/healthz")).status_code == 404  # not refused: no such route here


async def test_without_a_token_nothing_is_refused() -> None:
    app, seen = _app(token=None, require_token=True)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
        assert (await c.post("/hook", json={"p": 1})).status_code == 200
        assert (await c.get("/metrics")).status_code == 200


async def _call(app: FastAPI, messages: list[dict], stall: bool, gap_s: float = 0.0) -> tuple[list[dict], float]:
    """Drive ``app`` with raw ASGI: ``messages`` as the body (``gap_s`` apart), then
    (``stall``) never more."""
    queue = list(messages)
    sent: list[dict] = []

    async def receive() -> dict:
        if queue:
            await asyncio.sleep(gap_s)
            return queue.pop(0)
        if stall:
            await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "path": "/hook",
             "raw_path": b"/hook", "query_string": b"", "root_path": "", "scheme": "http",
             "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5000), "app": app,
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                         (b"content-length", b"100"), (b"authorization", f"Bearer {TOKEN}".encode())]}
    t0 = time.monotonic()
    await asyncio.wait_for(app(scope, receive, send), 10)
    return sent, time.monotonic() - t0


async def test_a_stalled_body_gets_408_and_close_within_the_bound_and_the_route_answers_nothing() -> None:
    app, seen = _app(timeout_s=0.3)
    sent, took = await _call(app, [{"type": "http.request", "body": b'{"p', "more_body": True}], stall=True)
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert len(starts) == 1 and starts[0]["status"] == 408  # the route's own error answer was dropped
    assert (b"connection", b"close") in starts[0]["headers"]
    assert b"body_timeout" in b"".join(m.get("body", b"") for m in sent)
    assert 0.25 <= took < 2.0 and seen == []


async def test_a_body_in_time_reaches_the_route_whole() -> None:
    app, seen = _app(timeout_s=0.3)
    sent, _ = await _call(app, [{"type": "http.request", "body": b'{"p":', "more_body": True},
                                {"type": "http.request", "body": b"1}", "more_body": False}], stall=False)
    assert sent[0]["status"] == 200 and seen == [b'{"p":1}']
    assert (b"connection", b"close") not in sent[0]["headers"]


async def test_a_body_arriving_at_the_minimum_rate_may_take_longer_than_the_initial_bound() -> None:
    app, seen = _app(timeout_s=0.3, min_rate=2000)  # each 1,000 bytes buy 0.5 s more
    chunks = [{"type": "http.request", "body": b" " * 1000, "more_body": True} for _ in range(5)]
    chunks.append({"type": "http.request", "body": b"{}", "more_body": False})
    sent, took = await _call(app, chunks, stall=False, gap_s=0.2)
    assert sent[0]["status"] == 200 and took > 0.3 and len(seen) == 1
    # a trickle below the rate is cut at the bound
    app, seen = _app(timeout_s=0.3, min_rate=2000)
    trickle = [{"type": "http.request", "body": b" ", "more_body": True} for _ in range(20)]
    sent, took = await _call(app, trickle, stall=False, gap_s=0.1)
    assert sent[0]["status"] == 408 and took < 1.0 and seen == []
