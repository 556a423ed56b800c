"""Issue 26 at ingress: locations reach the writer normalised, ``repo_id`` is checked (400, never 5xx)."""

from __future__ import annotations

import pytest

from aimem_common.bus import BULK_STREAM
from aimem_testing.probe import mut_messages

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

PROMPT = {"session_id": "s-1", "hook_event_name": "UserPromptSubmit", "prompt": "hi",
          "cwd": "C:\\Users\\Dev\\My Repo\\src\\"}
RID = "0123456789abcdef0123456789abcdef"


async def test_a_windows_root_is_normalised_and_the_repo_id_travels(ingress):
    client, app = ingress
    r = await client.post("/hook", params={"agent": "claude-code", "root": "C:\\Users\\Dev\\My Repo\\",
                                           "project": "my-repo", "repo_id": RID}, json=PROMPT)
    assert r.status_code == 202, r.text
    [env] = [e for e, _ in await mut_messages(app.state.ctx.nc.jetstream())]
    assert env["scope"] == {"workspace": "default", "project": "my-repo", "root": "c:/users/dev/my repo",
                            "repo_id": RID}


async def test_a_windows_cwd_names_the_project_by_its_folder(ingress):
    client, app = ingress
    r = await client.post("/hook", params={"agent": "claude-code", "cwd": "c:/Users/Dev/My Repo/"},
                          json={k: v for k, v in PROMPT.items() if k != "cwd"})
    assert r.status_code == 202, r.text
    [env] = [e for e, _ in await mut_messages(app.state.ctx.nc.jetstream())]
    assert env["scope"]["project"] == "my-repo"  # a Windows folder's name is lower-case, like its place


@pytest.mark.parametrize("bad", ["nothex", "0123456789ABCDEF0123456789ABCDEF", RID + "00", "../../etc"])
async def test_a_bad_repo_id_is_a_400_and_stores_nothing(ingress, bad: str):
    client, app = ingress
    r = await client.post("/hook", params={"agent": "claude-code", "repo_id": bad}, json=PROMPT)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_field" and "repo_id" in r.json()["error"]["message"]
    assert await mut_messages(app.state.ctx.nc.jetstream()) == []


async def test_an_import_batch_carries_its_repo_id_and_refuses_a_bad_one(ingress):
    client, app = ingress
    batch = {"agent": "claude-code", "project": "api", "root": "C:\\Repos\\API\\", "repo_id": RID,
             "events": [{"key": "imp-1:0", "payload": {
                 "hook_event_name": "UserPromptSubmit", "session_id": "imp-1", "prompt": "old work",
                 "cwd": "C:\\Repos\\API", "timestamp": "2026-01-01T00:00:00Z"}}]}
    r = await client.post("/hook/import", json=batch)
    assert r.status_code == 202, r.text
    envs = [e for e, _ in await mut_messages(app.state.ctx.nc.jetstream(), BULK_STREAM)]  # imports: the bulk lane
    assert envs and all(e["scope"].get("repo_id") == RID and e["scope"]["root"] == "c:/repos/api" for e in envs)
    r = await client.post("/hook/import", json={**batch, "repo_id": "NOPE"})
    assert r.status_code == 400, r.text
