"""POST /hook/import against a real JetStream (no writer): imported observations, historical
session ends after their observations, per-item rejection, the batch's bad-input matrix."""

from __future__ import annotations

import pytest

from aimem_common import bus as busmod

from aimem_testing.probe import mut_messages

from .test_hook_api import stream_msgs as live_msgs

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]
SECRET = "ghp_" + "Zq8" * 12


async def stream_msgs(app) -> list[tuple[dict, dict]]:
    """Every command of the bulk lane (``AIMEM_BULK``, where imports travel) as ``(envelope, headers)``."""
    return await mut_messages(app.state.ctx.nc.jetstream(), busmod.BULK_STREAM)


def item(key: str, kind: str, **fields) -> dict:
    return {"key": key, "payload": {"hook_event_name": kind, "session_id": "s-9", "cwd": "/w/acme-api",
                                    "timestamp": "2026-03-01T10:00:00Z", **fields}}


async def test_batch_is_normalised_sanitised_and_ends_historically(ingress):
    client, app = ingress
    batch = {"agent": "claude-code", "project": "acme-api", "events": [
        item("k1", "user-prompt", prompt=f"deploy with token {SECRET}"),
        item("k2", "post-tool-use", tool_name="Bash", tool_input={"command": "pytest -q"}, tool_response="1 failed"),
        {"key": "k3", "payload": {"hook_event_name": "stop"}},  # no session id: rejected alone
        {**item("k4", "session-end"), "end": True},
    ]}
    r = await client.post("/hook/import", json=batch)
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["accepted"] == 3 and body["duplicates"] == 0
    assert (body["new"], body["already"], body["captured_live"]) == (2, 0, 0)
    assert [x["index"] for x in body["rejected"]] == [2] and body["rejected"][0]["code"] == "missing_session_id"
    msgs = await stream_msgs(app)
    assert [e["op"] for e, _ in msgs] == ["observation.append", "observation.append", "session.end"]
    prompt, tool, end = (e for e, _ in msgs)
    assert prompt["payload"]["imported"] is True and prompt["payload"]["agent"] == "claude-code"
    assert SECRET not in prompt["payload"]["body"] and "[REDACTED:" in prompt["payload"]["body"]
    assert prompt["payload"]["occurred_at"] == "2026-03-01T10:00:00.000Z"
    assert tool["payload"]["title"] == "Bash: pytest -q" and "output: 1 failed" in tool["payload"]["body"]
    assert end["payload"]["historical"] is True and end["payload"]["ended_at"] == "2026-03-01T10:00:00.000Z"
    assert [h[busmod.MSG_ID_HEADER].split(":", 1)[1] for _, h in msgs] == ["k1", "k2", "k4"]
    again = await client.post("/hook/import", json=batch)  # a re-run: acknowledged, stored once
    assert again.json()["duplicates"] == 3 and len(await stream_msgs(app)) == 3
    assert (again.json()["new"], again.json()["already"]) == (0, 2)
    assert await live_msgs(app) == []  # live first: nothing of an import in the live lane


async def test_identity_keys_go_into_every_envelope_like_a_hook(ingress):
    client, app = ingress
    batch = {"agent": "codex", "project": "api", "root": "/w/acme/api", "origin": "github.com/acme/api",
             "events": [item("k1", "user-prompt", prompt="hi"), {**item("k2", "session-end"), "end": True}]}
    assert (await client.post("/hook/import", json=batch)).status_code == 202
    scopes = [e["scope"] for e, _ in await stream_msgs(app)]
    assert scopes == [{"workspace": "default", "project": "api", "root": "/w/acme/api",
                       "origin": "github.com/acme/api"}] * 2
    named = {"agent": "codex", "project": "shop", "named": True, "events": [item("k3", "user-prompt", prompt="x")]}
    assert (await client.post("/hook/import", json=named)).status_code == 202
    assert (await stream_msgs(app))[-1][0]["scope"] == {"workspace": "default", "project": "shop", "explicit": True}


@pytest.mark.parametrize("batch, code", [
    ({"agent": "codex", "project": "p", "root": "a\nb", "events": []}, "invalid_field"),
    ({"agent": "codex", "project": "p", "origin": "x" * 1025, "events": []}, "invalid_field"),
    ({"agent": "claude-code", "project": "acme-api"}, "invalid_batch"),
    ({"agent": "nope", "project": "acme-api", "events": []}, "unknown_agent"),
    ({"agent": "codex", "project": "../etc", "events": []}, "invalid_name"),
    ({"agent": "codex", "project": "p", "events": [{"key": "", "payload": {}}]}, "invalid_batch"),
    ({"agent": "codex", "project": "p", "events": [{"key": "k", "payload": {}}] * 1001}, "invalid_batch"),
])
async def test_bad_batches_are_400_and_store_nothing(ingress, batch, code):
    client, app = ingress
    r = await client.post("/hook/import", json=batch)
    assert r.status_code == 400 and r.json()["error"]["code"] == code
    assert await stream_msgs(app) == [] and await live_msgs(app) == []
