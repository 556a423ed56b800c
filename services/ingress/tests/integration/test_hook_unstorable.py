"""What POST /hook accepts must be storable (a real JetStream, no writer): NUL is removed
from text fields before publishing, identity fields with control characters or lost
(lone-surrogate) characters are a 400 ``invalid_field`` that stores nothing."""

from __future__ import annotations

import json

import pytest

from aimem_testing.probe import mut_messages

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]
JSON = {"Content-Type": "application/json"}
CLAUDE_PROMPT = {
    "session_id": "s-1", "transcript_path": "/home/dev/.claude/projects/x/s-1.jsonl",
    "cwd": "/home/dev/projects/acme-api", "hook_event_name": "UserPromptSubmit", "prompt": "add pagination",
}


async def stream_msgs(app) -> list[tuple[dict, dict]]:
    """Every command on AIMEM_MUT as ``(envelope, headers)``."""
    return await mut_messages(app.state.ctx.nc.jetstream())


def _nul_free(value) -> bool:
    return "\x00" not in json.dumps(value, ensure_ascii=False)


async def test_nul_in_text_fields_is_removed_before_publishing(ingress):
    client, app = ingress
    events = [
        {**CLAUDE_PROMPT, "prompt": "fix a\u0000b"},
        {**CLAUDE_PROMPT, "hook_event_name": "PostToolUse", "tool_name": "Ba\u0000sh",
         "tool_input": {"command": "printf 'a\\0b'\u0000"}, "tool_response": {"stdout": "a\u0000b"}},
        {**CLAUDE_PROMPT, "hook_event_name": "Stop", "last_assistant_message": "done\u0000"},
        {**CLAUDE_PROMPT, "hook_event_name": "Weird\u0000Event", "note": "x\u0000y"},
        {**CLAUDE_PROMPT, "hook_event_name": "SessionEnd", "reason": "exit\u0000ed", "model": "m\u0000"},
    ]
    for ev in events:
        r = await client.post("/hook?agent=claude-code&extension=t", json=ev)
        assert r.status_code == 202, r.text
    msgs = [env for env, _ in await stream_msgs(app)]
    assert [m["op"] for m in msgs] == ["observation.append"] * 5 + ["session.end"]
    for env in msgs:
        assert _nul_free(env), env
    assert msgs[0]["payload"]["body"] == "fix ab" and msgs[0]["payload"]["title"] == "Prompt: fix ab"
    assert msgs[1]["payload"]["tool_name"] == "Bash"
    assert msgs[-1]["payload"]["reason"] == "exited"


BAD_IDS = [
    ("nul-session", {**CLAUDE_PROMPT, "session_id": "nul\u0000prompt"}),
    ("newline-session", {**CLAUDE_PROMPT, "session_id": "a\nb"}),
    ("tab-session", {**CLAUDE_PROMPT, "session_id": "a\tb"}),
    ("c1-session", {**CLAUDE_PROMPT, "session_id": "a\u0085b"}),
    ("nul-cwd", {**CLAUDE_PROMPT, "cwd": "/x/bad\u0000in"}),
    ("newline-cwd", {**CLAUDE_PROMPT, "cwd": "/x/bad\nin"}),
]


@pytest.mark.parametrize("name,payload", BAD_IDS, ids=[b[0] for b in BAD_IDS])
async def test_an_identity_field_with_a_control_character_is_refused(ingress, name, payload):
    client, app = ingress
    for ev in (payload, {**payload, "hook_event_name": "SessionEnd"}):
        r = await client.post("/hook?agent=claude-code", json=ev)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"] == "invalid_field" and r.json()["error"]["message"]
    assert await stream_msgs(app) == []


async def test_a_query_cwd_with_a_control_character_is_refused(ingress):
    client, app = ingress
    payload = {"hook_event_name": "Stop", "session_id": "s-2"}
    r = await client.post("/hook?agent=claude-code&cwd=/home/dev/a%00b", json=payload)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_field", r.text
    assert await stream_msgs(app) == []


async def test_lone_surrogate_session_ids_are_refused_not_merged(ingress):
    """``\\udc00`` and ``\\udc01`` both decode to U+FFFD: accepting them would merge two sessions."""
    client, app = ingress
    base = json.dumps({k: v for k, v in CLAUDE_PROMPT.items() if k != "session_id"})[:-1]
    for escape in ("\\udc00", "\\udc01", "x\\ud800"):
        raw = f'{base}, "session_id": "{escape}"}}'.encode()
        r = await client.post("/hook?agent=claude-code", content=raw, headers=JSON)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_field", r.text
    assert await stream_msgs(app) == []
    # a session id that is plain text around spaces or dashes is fine
    for sid in ("a b", "a-b", "ses_01JX/2"):
        assert (await client.post("/hook?agent=claude-code", json={**CLAUDE_PROMPT, "session_id": sid})
                ).status_code == 202


@pytest.mark.parametrize("ts", ["abc", "nan", "inf", "1e308", "-99999999999"])
async def test_a_ts_that_is_no_time_is_refused(ingress, ts):
    client, app = ingress
    payload = {"hook_event_name": "Stop", "session_id": "s-ts", "cwd": "/home/dev/projects/acme-api"}
    r = await client.post(f"/hook?agent=claude-code&ts={ts}", json=payload)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_field" and repr(ts) in r.json()["error"]["message"]
    assert await stream_msgs(app) == []


async def test_a_ts_in_epoch_seconds_dates_the_event(ingress):
    client, app = ingress
    payload = {"hook_event_name": "Stop", "session_id": "s-ts", "cwd": "/home/dev/projects/acme-api"}
    r = await client.post("/hook?agent=claude-code&ts=1764900000.5", json=payload)
    assert r.status_code == 202, r.text
    [env] = [env for env, _ in await stream_msgs(app)]
    assert env["payload"]["occurred_at"] == "2025-12-05T02:00:00.500Z"
