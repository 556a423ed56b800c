"""The drive-by guard every service installs: Host, Origin, JSON bodies only."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI, Request

from aimem_common.http import install_error_handlers, install_guard

pytestmark = [pytest.mark.asyncio]


async def test_simple_cross_site_posts_are_refused_and_nothing_reaches_the_route() -> None:
    app = FastAPI()
    install_error_handlers(app)
    install_guard(app, ["localhost", "127.0.0.1", "::1"], None)
    seen: list[bytes] = []

    @app.post("/hook")
    async def hook(request: Request) -> dict:
        seen.append(await request.body())
        return {"ok": True}

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8701") as c:
        for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
            headers = {"Content-Type": ctype} if ctype else {}
            r = await c.post("/hook", content=b'{"prompt": "attacker"}', headers=headers)
            assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type", ctype
        r = await c.post("/hook", json={"p": 1}, headers={"Origin": "https://evil.example"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_origin"
        r = await c.post("/hook", json={"p": 1}, headers={"Origin": "null"})
        assert r.status_code == 403
        assert seen == []
        ok = await c.post("/hook", json={"p": 1}, headers={"Origin": "http://localhost:5173"})
        assert ok.status_code == 200 and len(seen) == 1
        ok = await c.post("/hook", json={"p": 2}, headers={"Content-Type": "application/json; charset=utf-8"})
        assert ok.status_code == 200


async def test_a_rebinding_host_cannot_read_but_probes_still_work() -> None:
    app = FastAPI()
    install_error_handlers(app)
    install_guard(app, ["localhost", "127.0.0.1", "::1", "query"], None)

    @app.get("/api/v1/status")
    async def status() -> dict:
        return {"secret": "project data"}

    @app.get("/healthz")
    async def healthz() -> dict:
        return {"status": "ok"}

    transport = httpx.ASGITransport(app=app)
    for host, expected in (("evil.example", 421), ("evil.example:8702", 421), ("127.0.0.1.nip.io", 421),
                           ("127.0.0.1:8702", 200), ("localhost", 200), ("[::1]:8702", 200), ("query:8702", 200)):
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as c:
            r = await c.get("/api/v1/status")
            assert r.status_code == expected, host
            if expected != 200:
                assert "project data" not in r.text and r.json()["error"]["code"] == "misdirected_host"
    async with httpx.AsyncClient(transport=transport, base_url="http://10.0.0.7:8702") as c:
        assert (await c.get("/healthz")).status_code == 200


async def test_the_web_ui_posts_same_origin_forms_but_not_cross_site_ones() -> None:
    app = FastAPI()
    install_error_handlers(app)
    install_guard(app, ["localhost", "127.0.0.1", "::1"], None)
    seen: list[str] = []

    @app.post("/web/pages/{page_id}/forget")
    async def forget(page_id: int, request: Request) -> dict:
        seen.append((await request.body()).decode())
        return {"ok": True}

    @app.post("/webhook")
    async def webhook(request: Request) -> dict:
        seen.append("webhook")
        return {"ok": True}

    form = {"Content-Type": "application/x-www-form-urlencoded"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8702") as c:
        r = await c.post("/web/pages/7/forget", content=b"csrf=t", headers={**form, "Origin": "http://127.0.0.1:8702"})
        assert r.status_code == 200 and seen == ["csrf=t"]
        r = await c.post("/web/pages/7/forget", content=b"csrf=t", headers={**form, "Origin": "https://evil.example"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_origin"
        r = await c.post("/webhook", content=b"x=1", headers=form)  # only /web and /web/... are the UI
        assert r.status_code == 415
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://evil.example") as c:
        assert (await c.post("/web/pages/7/forget", content=b"csrf=t", headers=form)).status_code == 421
    assert seen == ["csrf=t"]
