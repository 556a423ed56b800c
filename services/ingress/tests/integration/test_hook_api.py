"""POST /hook against a real JetStream (no writer): 202 + the command on the stream, dedupe,
session end, the bad-input matrix, back-pressure (429), NATS down (503), metrics."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from aimem_common import bus as busmod
from aimem_testing.probe import mut_messages

JSON = {"Content-Type": "application/json"}
pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

CLAUDE_PROMPT = {
    "session_id": "s-1", "transcript_path": "/home/dev/.claude/projects/x/s-1.jsonl",
    "cwd": "/home/dev/projects/acme-api", "permission_mode": "default",
    "hook_event_name": "UserPromptSubmit", "prompt": "add cursor pagination to /invoices",
}


async def stream_msgs(app) -> list[tuple[dict, dict]]:
    """Every command on AIMEM_MUT as ``(envelope, headers)``."""
    return await mut_messages(app.state.ctx.nc.jetstream())


async def test_accepts_and_publishes_with_idempotency_key(ingress):
    client, app = ingress
    r = await client.post("/hook?agent=claude-code", json=CLAUDE_PROMPT, headers={"Idempotency-Key": "k-1"})
    assert r.status_code == 202, r.text
    cmd_id = r.json()["accepted"]
    [(env, headers)] = await stream_msgs(app)
    assert env["cmd_id"] == cmd_id and env["op"] == "observation.append"
    assert env["scope"] == {"workspace": "default", "project": "acme-api"}
    # the client's key, prefixed with the caller's namespace (who sends, where it goes)
    assert env["idempotency_key"] == headers[busmod.MSG_ID_HEADER]
    prefix, key = env["idempotency_key"].split(":", 1)
    assert key == "k-1" and len(prefix) == 12 and int(prefix, 16) >= 0
    p = env["payload"]
    assert (p["kind"], p["session_id"], p["agent"], p["sanitized"]) == ("user-prompt", "s-1", "claude-code", True)
    assert "cursor pagination" in p["body"]
    # A retry with the same key is acknowledged but not stored twice.
    r2 = await client.post("/hook?agent=claude-code", json=CLAUDE_PROMPT, headers={"Idempotency-Key": "k-1"})
    assert r2.status_code == 202 and r2.json().get("duplicate") is True
    assert len(await stream_msgs(app)) == 1


async def test_a_key_guessed_for_another_place_is_not_a_duplicate(ingress):
    """Someone who knows a session's key (import keys are predictable) cannot make that
    session's own event read as an already-stored duplicate: keys are per caller and place."""
    client, app = ingress
    theirs = {**CLAUDE_PROMPT, "cwd": "/home/eve/projects/eve", "prompt": "planted first"}
    r = await client.post("/hook?agent=claude-code", json=theirs, headers={"Idempotency-Key": "claude-code:s-1:7"})
    assert r.status_code == 202 and "duplicate" not in r.json()
    r = await client.post("/hook?agent=claude-code&root=/home/bob/secret", json=CLAUDE_PROMPT,
                          headers={"Idempotency-Key": "claude-code:s-1:7"})
    assert r.status_code == 202 and "duplicate" not in r.json(), r.text
    bodies = [e["payload"]["body"] for e, _ in await stream_msgs(app)]
    assert len(bodies) == 2 and any("cursor pagination" in b for b in bodies)


async def test_body_idempotency_key_and_detected_agent(ingress):
    client, app = ingress
    r = await client.post("/hook", json={**CLAUDE_PROMPT, "idempotency_key": "body-key"})
    assert r.status_code == 202
    [(env, headers)] = await stream_msgs(app)
    assert headers[busmod.MSG_ID_HEADER].split(":", 1)[1] == "body-key" and env["payload"]["agent"] == "claude-code"


async def test_session_end_publishes_session_end_command(ingress):
    client, app = ingress
    end = {**CLAUDE_PROMPT, "hook_event_name": "SessionEnd", "reason": "logout"}
    del end["prompt"]
    r = await client.post("/hook?agent=claude-code", json=end, headers={"Idempotency-Key": "end-1"})
    assert r.status_code == 202
    msgs = await stream_msgs(app)
    assert [e["op"] for e, _ in msgs] == ["observation.append", "session.end"]
    assert msgs[1][0]["payload"]["session_id"] == "s-1"
    assert msgs[1][1][busmod.MSG_ID_HEADER].split(":", 1)[1] == "end-1:session.end"


async def test_secrets_are_redacted_before_publishing(ingress):
    client, app = ingress
    secret = "AKIAIOSFODNN7EXAMPLE"
    r = await client.post("/hook?agent=claude-code", json={**CLAUDE_PROMPT, "prompt": f"use key {secret} now"})
    assert r.status_code == 202
    [(env, _)] = await stream_msgs(app)
    assert secret not in json.dumps(env) and "[REDACTED" in env["payload"]["body"]


async def test_a_secret_in_the_session_end_reason_is_redacted(ingress):
    """The client's end ``reason`` reaches the session page (frontmatter and its "Ended:"
    line), so it is redacted like every other free-text field, before it is cut to size."""
    client, app = ingress
    secret = "ghp_" + "a1B2c3D4e5" * 4
    # the token straddles the 64-character cut: cut first, its head would no longer look like a token
    end = {**CLAUDE_PROMPT, "hook_event_name": "SessionEnd", "reason": f"other {'x' * 40} {secret}"}
    del end["prompt"]
    r = await client.post("/hook?agent=claude-code", json=end)
    assert r.status_code == 202, r.text
    msgs = await stream_msgs(app)
    assert [e["op"] for e, _ in msgs] == ["observation.append", "session.end"]
    assert secret[:20] not in json.dumps([e for e, _ in msgs])
    assert msgs[1][0]["payload"]["reason"] == f"other {'x' * 40} [REDACTED:github_token]"[:64]


async def test_cwd_query_fallback_and_unsafe_basename(ingress):
    client, app = ingress
    payload = {"hook_event_name": "Stop", "session_id": "s-2"}
    r = await client.post("/hook?agent=claude-code&cwd=/home/dev/My%20Repo!", json=payload)
    assert r.status_code == 202, r.text
    [(env, _)] = await stream_msgs(app)
    assert env["scope"]["project"] == "My-Repo" and env["payload"]["cwd"] == "/home/dev/My Repo!"


BAD_INPUTS = [
    ("non-json", b"this is not json", 400, "invalid_json"),
    ("empty", b"", 400, "empty_body"),
    ("not-an-object", b"[1, 2, 3]", 400, "invalid_field"),
    ("wrong-types", json.dumps({**CLAUDE_PROMPT, "session_id": 12345}).encode(), 400, "invalid_field"),
    ("wrong-cwd-type", json.dumps({**CLAUDE_PROMPT, "cwd": ["/a"]}).encode(), 400, "invalid_field"),
    ("invalid-utf8", b'{"session_id": "s", "prompt": "\xff\xfe"}', 400, "invalid_utf8"),
    ("missing-session", json.dumps({k: v for k, v in CLAUDE_PROMPT.items() if k != "session_id"}).encode(),
     400, "missing_session_id"),
    ("deep-nesting", (b'{"session_id": "s", "x": ' + b"[" * 200 + b"]" * 200 + b"}"), 400, "too_deep"),
    ("very-deep", b"[" * 100_000 + b"]" * 100_000, 400, "too_deep"),
    ("huge-int", b'{"session_id": "s", "hook_event_name": "Stop", "timestamp": ' + b"9" * 5000 + b"}",
     400, "invalid_json"),
    ("bad-project", json.dumps({**CLAUDE_PROMPT, "project": "../etc"}).encode(), 400, "invalid_name"),
]


@pytest.mark.parametrize("name,body,status,code", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
async def test_bad_input_is_a_4xx_json_error_and_stores_nothing(ingress, name, body, status, code):
    client, app = ingress
    r = await client.post("/hook?agent=claude-code", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code and r.json()["error"]["message"]
    assert await stream_msgs(app) == []
    ok = await client.post("/hook?agent=claude-code", json=CLAUDE_PROMPT)  # still serving
    assert ok.status_code == 202


async def test_eleven_mib_body_is_413_while_reading(ingress):
    client, app = ingress
    big = b'{"session_id": "s", "prompt": "' + b"a" * (11 * 1024 * 1024) + b'"}'
    r = await client.post("/hook?agent=claude-code", content=big, headers=JSON)
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"

    async def chunks():  # no Content-Length: the cap holds while streaming
        for _ in range(11):
            yield b"a" * (1024 * 1024)

    r = await client.post("/hook?agent=claude-code", content=chunks(), headers=JSON)
    assert r.status_code == 413
    assert await stream_msgs(app) == []
    assert (await client.post("/hook?agent=claude-code", json=CLAUDE_PROMPT)).status_code == 202


async def test_lone_surrogates_become_replacement_chars(ingress):
    client, app = ingress
    raw = json.dumps(CLAUDE_PROMPT)[:-1] + ', "prompt": "x\\ud800y", "extra\\udc00": "z\\udfff"}'
    for path in ("/hook?agent=claude-code", "/hook/session-start-context?agent=claude-code"):
        r = await client.post(path, content=raw.encode(), headers={"Content-Type": "application/json"})
        assert r.status_code in (200, 202), (path, r.text)
    [env] = [e for e, _ in await stream_msgs(app) if e["op"] == "observation.append"]
    assert env["payload"]["body"] == "x\ufffdy"


async def test_unknown_agent_and_bad_idempotency_key(ingress):
    client, _ = ingress
    r = await client.post("/hook?agent=vim", json=CLAUDE_PROMPT)
    assert r.status_code == 400 and r.json()["error"]["code"] == "unknown_agent"
    r = await client.post("/hook", json=CLAUDE_PROMPT, headers={"Idempotency-Key": "x" * 300})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_idempotency_key"


async def test_writer_lag_over_bound_is_429_with_retry_after(settings):
    """The gate reads the real consumer lag: 5 commands waiting for a writer that is not running."""
    from aimem_ingress.app import create_app
    import httpx

    nc = await busmod.connect(settings.bus, name="t", reconnect=False)
    try:
        js = nc.jetstream()
        await busmod.ensure_streams(js, settings.bus)
        await busmod.ensure_writer_consumer(js, ack_wait_s=5)
        for i in range(5):
            await js.publish("aimem.mut.observation.append", b"{}", headers={busmod.MSG_ID_HEADER: f"lag-{i}"})
    finally:
        await nc.close()
    for bound, expected in ((10, 202), (3, 429)):
        settings.ingress.max_writer_lag = bound
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://ingress") as client:
                r = await client.post("/hook?agent=claude-code", json=CLAUDE_PROMPT)
        assert r.status_code == expected, (bound, r.text)
    assert r.headers["retry-after"] == str(settings.ingress.retry_after_s)
    assert r.json()["error"]["code"] == "back_pressure" and r.json()["error"]["data"]["writer_lag"] >= 5


async def test_hook_requires_the_token_when_one_is_configured(settings):
    from aimem_ingress.app import create_app
    import httpx

    settings.auth.token = "t0k3n-for-hooks"
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://ingress") as client:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "t0k3n-for-hooks"}):
                r = await client.post("/hook?agent=claude-code", json=CLAUDE_PROMPT, headers=headers)
                assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", headers
                r = await client.post("/hook/session-start-context?agent=claude-code", json=CLAUDE_PROMPT,
                                      headers=headers)
                assert r.status_code == 401, headers
            assert await stream_msgs(app) == []
            ok = await client.post("/hook?agent=claude-code", json=CLAUDE_PROMPT,
                                   headers={"Authorization": "Bearer t0k3n-for-hooks"})
            assert ok.status_code == 202 and len(await stream_msgs(app)) == 1


async def test_full_stream_is_429(settings):
    from aimem_ingress.app import create_app
    import httpx

    settings.bus.mut_max_bytes = 4096
    app = create_app(settings)
    statuses = []
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://ingress") as client:
            for i in range(20):
                r = await client.post("/hook?agent=claude-code", json={**CLAUDE_PROMPT, "prompt": "x" * 500 + str(i)})
                statuses.append(r.status_code)
                if r.status_code == 429:
                    assert "retry-after" in r.headers
                    break
    assert statuses[0] == 202 and statuses[-1] == 429


async def test_nats_down_is_a_fast_503(ingress, nats_server):
    client, _ = ingress
    nats_server.stop()
    await asyncio.sleep(0.3)
    t0 = time.monotonic()
    r = await client.post("/hook?agent=claude-code", json=CLAUDE_PROMPT)
    assert r.status_code == 503 and r.json()["error"]["code"] in {"nats_unavailable", "bus_timeout"}
    assert time.monotonic() - t0 < 1.2


async def test_metrics_count_events_and_statuses(ingress):
    client, _ = ingress
    await client.post("/hook?agent=claude-code", json=CLAUDE_PROMPT)
    await client.post("/hook?agent=claude-code", content=b"nope", headers=JSON)
    text = (await client.get("/metrics")).text
    assert 'aimem_hook_events_total{agent="claude-code",kind="user-prompt"} 1.0' in text
    assert 'aimem_hook_responses_total{status="202"} 1.0' in text
    assert 'aimem_hook_responses_total{status="400"} 1.0' in text
    assert "aimem_hook_request_duration_seconds_bucket" in text


async def test_session_start_context_without_writer_is_empty(ingress):
    client, _ = ingress
    start = {**CLAUDE_PROMPT, "hook_event_name": "SessionStart", "source": "startup"}
    t0 = time.monotonic()
    r = await client.post("/hook/session-start-context?agent=claude-code", json=start)
    assert r.status_code == 200 and r.json() == {"context": "", "handoff_id": None}
    assert time.monotonic() - t0 < 1.5
