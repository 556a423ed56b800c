"""Nothing acknowledged may be lost, on real processes (ingress, writer, query, nats-server):

* a prompt carrying NUL is stored without it, and its session ends with a page and a handoff
  (it used to become a dead letter ``page body contains NUL``, the session never ended);
* session ids whose safe file names coincide (``a-b``, ``a b``; ``../../etc/passwd``,
  ``etc-passwd``) keep one page each;
* a dead letter whose replay fails again is still an open dead letter afterwards.
"""

from __future__ import annotations

import time

import httpx
import pytest

from aimem_common.commands import Envelope, ScopeRef
from aimem_testing.probe import db_rows, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(120)]


def _post(client: httpx.Client, sid: str, event: str, **fields) -> None:
    body = {"session_id": sid, "cwd": "/x/badin", "hook_event_name": event, **fields}
    r = client.post("/hook?agent=claude-code", json=body)
    assert r.status_code == 202, r.text


def _ended(settings, sid: str):
    rows = db_rows(settings.db_path, "SELECT s.ended_at, p.path FROM sessions s LEFT JOIN pages p ON p.id = s.summary_page_id"
                             " WHERE s.session_id = ?", (sid,))
    return rows[0] if rows and rows[0]["ended_at"] else None


def test_nul_prompt_session_ends_and_colliding_ids_keep_their_pages(services, settings) -> None:
    procs = services("writer", "ingress", "query")
    with httpx.Client(base_url=procs["ingress"].url, timeout=10) as client:
        _post(client, "nulprompt", "UserPromptSubmit", prompt="fix a\u0000b")
        _post(client, "nulprompt", "SessionEnd")
        ids = ["a-b", "a b", "../../etc/passwd", "etc-passwd"]
        for sid in ids:
            _post(client, sid, "UserPromptSubmit", prompt=f"the task of {sid}")
            _post(client, sid, "SessionEnd")
    row = wait_for(lambda: _ended(settings, "nulprompt"), 60, "the NUL session's end")
    assert row["path"] == "sessions/nulprompt.md"
    [page] = db_rows(settings.db_path, "SELECT body FROM pages WHERE path = ? AND is_latest = 1", (row["path"],))
    assert "fix ab" in page["body"]
    assert db_rows(settings.db_path, "SELECT id FROM handoffs WHERE from_session_id = 'nulprompt' AND status = 'open'")
    paths = {sid: wait_for(lambda sid=sid: _ended(settings, sid), 60, f"{sid}'s end")["path"] for sid in ids}
    assert len(set(paths.values())) == len(ids), paths
    assert paths["a-b"] == "sessions/a-b.md" and paths["etc-passwd"] == "sessions/etc-passwd.md"
    for sid, path in paths.items():
        [page] = db_rows(settings.db_path, "SELECT session_id, body FROM pages WHERE path = ? AND is_latest = 1", (path,))
        assert page["session_id"] == sid and f"the task of {sid}" in page["body"]
    with httpx.Client(base_url=procs["query"].url, timeout=10) as q:
        assert q.get("/admin/dead-letters").json()["open"] == 0


@pytest.mark.asyncio
async def test_a_replayed_dead_letter_that_fails_again_stays_open(services, settings, bus) -> None:
    procs = services("writer", "ingress", "query")
    with httpx.Client(base_url=procs["ingress"].url, timeout=10) as client:
        _post(client, "real", "UserPromptSubmit", prompt="creates the project")
    wait_for(lambda: db_rows(settings.db_path, "SELECT 1 FROM sessions WHERE session_id = 'real'"), 60, "the project")
    # a page body with NUL, nobody waiting for the answer: the writer gives it up, every time
    doomed = Envelope(op="page.write", payload={"path": "concepts/x.md", "body": "a\u0000b"},
                      scope=ScopeRef(workspace="default", project="badin"), actor="tester")
    await bus.publish(doomed)
    with httpx.Client(base_url=procs["query"].url, timeout=10) as q:
        def open_ends() -> list:
            return [d for d in q.get("/admin/dead-letters").json()["dead_letters"] if d["op"] == "page.write"]

        dead = wait_for(open_ends, 60, "the dead letter")
        assert len(dead) == 1 and dead[0]["error_code"] == "invalid_payload", dead
        r = q.post("/admin/dead-letters/replay", json={"all": True})
        assert r.status_code == 200 and r.json()["replayed"] == [dead[0]["id"]], r.text
        # the replay is applied before its resolve: its failure must survive the resolve
        again = wait_for(lambda: [d for d in open_ends() if d["id"] != dead[0]["id"]], 60, "the replay's failure")
        assert again[0]["error_code"] == "invalid_payload" and again[0]["cmd_id"] == doomed.cmd_id
        time.sleep(1.0)
        listing = q.get("/admin/dead-letters").json()
        assert listing["open"] == 1 and [d["id"] for d in listing["dead_letters"]] == [again[0]["id"]], listing
        every = q.get("/admin/dead-letters", params={"all": "true"}).json()["dead_letters"]
        assert {d["id"]: bool(d["replayed_at"]) for d in every} == {dead[0]["id"]: True, again[0]["id"]: False}
