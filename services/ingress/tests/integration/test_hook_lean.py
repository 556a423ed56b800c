"""``POST /hook`` is a lean route (``aimem_common.http.ServiceApp``): it skips FastAPI's and
Starlette's own layers but keeps every guard of the app, and stores what the full stack
stored. Against a real JetStream, in process (ASGI), with a root token."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

TOKEN = "lean-route-root-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EVENT = {
    "session_id": "s-lean", "cwd": "/home/dev/projects/acme-api", "hook_event_name": "PostToolUse",
    "tool_name": "Bash", "tool_input": {"command": "export API_TOKEN=" + "q7Zp2Lx9Vb4Nc8Rt1Wm6Ks3Hj5Df0Ga"},
    "tool_response": {"stdout": "curl -u admin:hunter2 https://example.org\nok", "stderr": ""},
}
HOOK = "/hook?agent=claude-code"


async def _msgs(app) -> list[tuple[dict, dict]]:
    from aimem_common.bus import MUT_STREAM

    js = app.state.ctx.nc.jetstream()
    info = await js.stream_info(MUT_STREAM)
    out = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1) if info.state.messages else ():
        msg = await js.get_msg(MUT_STREAM, seq)
        out.append((json.loads(msg.data), dict(msg.headers or {})))
    return out


def _app(settings, *, lean: bool = True):
    from aimem_ingress.app import create_app

    settings.auth.token = TOKEN
    settings.server.body_read_timeout_s = 0.3
    app = create_app(settings)
    if not lean:
        app.lean_routes.clear()  # the same handler, served through the router and every framework layer
    return app


async def _call(app, headers: list[tuple[bytes, bytes]], receive, path: str = "/hook", query: bytes = b"agent=claude-code"):
    """One raw ASGI request; returns ``(status, body, headers)`` of the answer."""
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": query, "root_path": "",
             "server": ("127.0.0.1", 8702), "client": ("127.0.0.1", 5000), "headers": headers}
    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(body), dict(start["headers"])


def _headers(**extra: str) -> list[tuple[bytes, bytes]]:
    h = {"host": "127.0.0.1:8702", "content-type": "application/json", "content-length": "1000"}
    h.update({k.replace("_", "-"): v for k, v in extra.items()})
    return [(k.encode(), v.encode()) for k, v in h.items() if v]


def _never_read():
    """A ``receive`` that records whether anybody asked for a body byte."""
    asked: list[bool] = []

    async def receive():
        asked.append(True)
        await asyncio.sleep(30)
        return {"type": "http.disconnect"}

    return receive, asked


async def test_post_hook_is_served_in_front_of_the_router(settings):
    """POST /hook never reaches FastAPI's router; everything else still does."""
    app = _app(settings)
    assert set(app.lean_routes) == {("POST", "/hook")}
    routed: list[str] = []
    inner = app.router.middleware_stack

    async def spy(scope, receive, send):
        routed.append(f"{scope['method']} {scope['path']}")
        await inner(scope, receive, send)

    app.router.middleware_stack = spy
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8702",
                                     headers=AUTH) as client:
            assert (await client.post(HOOK, json=EVENT)).status_code == 202
            assert (await client.get("/healthz")).status_code == 200
            assert (await client.get("/hook")).status_code == 405
    assert routed == ["GET /healthz", "GET /hook"]


async def test_every_guard_refuses_before_any_body_byte_on_the_lean_route(settings):
    app = _app(settings)
    async with app.router.lifespan_context(app):
        cases = [
            (_headers(), 401, "unauthorized"),  # no credential
            (_headers(authorization="Bearer wrong"), 401, "unauthorized"),
            (_headers(authorization=AUTH["Authorization"], host="evil.example:8702"), 421, "misdirected_host"),
            (_headers(authorization=AUTH["Authorization"], origin="https://evil.example"), 403, "forbidden_origin"),
            (_headers(authorization=AUTH["Authorization"], content_type="text/plain"), 415, "unsupported_media_type"),
            # two Host headers (a loopback one last) are refused, not judged by the last one
            ([(b"host", b"evil.example")] + _headers(authorization=AUTH["Authorization"]), 400, "bad_request"),
        ]
        for headers, status, code in cases:
            receive, asked = _never_read()
            got, body, answer_headers = await _call(app, headers, receive)
            assert (got, body["error"]["code"]) == (status, code), headers
            assert asked == [], f"{code}: the body was read before the refusal"
            if status == 401:
                assert answer_headers[b"www-authenticate"] == b'Bearer realm="aimem"'
        assert await _msgs(app) == []


async def test_a_stalled_body_gets_408_and_close_on_the_lean_route(settings):
    app = _app(settings)
    async with app.router.lifespan_context(app):
        first = True

        async def stall():
            nonlocal first
            if first:
                first = False
                return {"type": "http.request", "body": b'{"session_id": "s', "more_body": True}
            await asyncio.sleep(30)
            return {"type": "http.disconnect"}

        status, body, headers = await asyncio.wait_for(_call(app, _headers(authorization=AUTH["Authorization"]), stall), 5)
        assert status == 408 and body["error"]["code"] == "body_timeout"
        assert headers[b"connection"] == b"close"
        assert await _msgs(app) == []


async def test_typed_errors_and_the_request_metric_on_the_lean_route(settings):
    app = _app(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8702",
                                     headers=AUTH) as client:
            r = await client.post("/hook?agent=vim", json=EVENT)
            assert r.status_code == 400 and r.json()["error"]["code"] == "unknown_agent"
            r = await client.post(HOOK, content=b"{not json", headers={"Content-Type": "application/json"})
            assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
            r = await client.get("/hook")  # another method takes the full stack
            assert r.status_code == 405
            assert (await client.post(HOOK, json=EVENT)).status_code == 202
            metrics = (await client.get("/metrics")).text
        assert 'route="/hook",service="ingress",status="202"' in metrics
        assert 'aimem_hook_responses_total{status="400"} 2.0' in metrics


async def test_the_lean_route_stores_what_the_full_stack_stored(settings):
    """The same events through the lean route and through every framework layer: the same
    envelopes on the stream (but for the fresh ``cmd_id`` and ``issued_at``), secrets redacted."""
    stored = {}
    for lean in (True, False):
        app = _app(settings, lean=lean)
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8702",
                                         headers=AUTH) as client:
                before = len(await _msgs(app))
                for key in ("k-1", None):
                    headers = {"Idempotency-Key": f"{key}-{lean}"} if key else {}
                    r = await client.post(HOOK, json=EVENT, headers=headers)
                    assert r.status_code == 202, r.text
                end = {**EVENT, "hook_event_name": "SessionEnd", "reason": "exit"}
                assert (await client.post(HOOK, json=end)).status_code == 202
                msgs = (await _msgs(app))[before:]
        stored[lean] = [{k: v for k, v in env.items() if k not in ("cmd_id", "issued_at", "idempotency_key")}
                        for env, _ in msgs]
    assert len(stored[True]) == 4  # two observations, the session-end observation, session.end
    assert stored[True] == stored[False]
    body = stored[True][0]["payload"]["body"]
    assert "hunter2" not in body and "q7Zp2Lx9Vb4Nc8Rt1Wm6Ks3Hj5Df0Ga" not in body and "[REDACTED:" in body


async def test_a_middleware_added_to_the_app_guards_the_lean_route_too(settings):
    app = _app(settings)
    seen: list[str] = []

    class Spy:
        def __init__(self, inner):
            self.inner = inner

        async def __call__(self, scope, receive, send):
            if scope["type"] == "http":
                seen.append(scope["path"])
            await self.inner(scope, receive, send)

    app.add_middleware(Spy)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8702",
                                     headers=AUTH) as client:
            assert (await client.post(HOOK, json=EVENT)).status_code == 202
    assert seen == ["/hook"]


async def _post_at_once(app, n: int) -> tuple[list[str], list[dict], int]:
    """Post ``n`` hooks concurrently; return (accepted cmd ids, the stream's envelopes, its messages)."""
    from aimem_common.bus import BUNDLE_HEADER, split_bundle
    from aimem_common.bus import MUT_STREAM

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8702",
                                 headers=AUTH) as client:
        answers = await asyncio.gather(*(client.post(HOOK, json={**EVENT, "session_id": f"s-{i}"}) for i in range(n)))
    assert [a.status_code for a in answers] == [202] * n
    js = app.state.ctx.nc.jetstream()
    info = await js.stream_info(MUT_STREAM)
    envelopes = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1) if info.state.messages else ():
        msg = await js.get_msg(MUT_STREAM, seq)
        parts = split_bundle(msg.data) if BUNDLE_HEADER in (msg.headers or {}) else [msg.data]
        envelopes += [json.loads(p) for p in parts]
    return sorted(a.json()["accepted"] for a in answers), envelopes, info.state.messages


async def test_hooks_posted_at_once_share_messages_and_each_is_in_one(settings):
    """Concurrent hooks are gathered (``aimem_common.bundles``) once the writer announced that
    it reads bundles: each gets its 202, the stream holds fewer messages than hooks, and the
    bundles' lines are exactly the accepted commands, each once, each redacted."""
    from aimem_common.bus import WRITER_STATUS_SUBJECT

    app = _app(settings)
    async with app.router.lifespan_context(app):
        nc = app.state.ctx.nc
        await nc.publish(WRITER_STATUS_SUBJECT, json.dumps({"state": "ok", "bundles": 1}).encode())
        await nc.flush()
        for _ in range(100):
            if app.state.ctx.gate.writer_reads_bundles():
                break
            await asyncio.sleep(0.02)
        accepted, envelopes, messages = await _post_at_once(app, 24)
    assert messages < 24
    assert sorted(e["cmd_id"] for e in envelopes) == accepted
    assert sorted(e["payload"]["session_id"] for e in envelopes) == sorted(f"s-{i}" for i in range(24))
    assert not any("hunter2" in json.dumps(e) or "q7Zp2Lx9Vb4Nc8Rt1Wm6Ks3Hj5Df0Ga" in json.dumps(e) for e in envelopes)


async def test_no_bundle_leaves_before_the_writer_says_it_reads_them(settings):
    """A writer from before bundles (it announces no ``bundles``) would drop one as a bad
    envelope (found by a tester: 514 of 3,000 hooks lost): every hook travels alone."""
    from aimem_common.bus import WRITER_STATUS_SUBJECT

    app = _app(settings)
    async with app.router.lifespan_context(app):
        nc = app.state.ctx.nc
        await nc.publish(WRITER_STATUS_SUBJECT, json.dumps({"state": "ok"}).encode())  # an older writer
        await nc.flush()
        await asyncio.sleep(0.2)
        accepted, envelopes, messages = await _post_at_once(app, 24)
    assert messages == 24 and sorted(e["cmd_id"] for e in envelopes) == accepted
