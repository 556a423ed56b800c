"""handoff.begin/accept/cancel and message.send/pop/cancel."""

from __future__ import annotations

from aimem_common.commands.messages import INBOX_DEPTH_CAP

from aimem_writer.ops.handoffs import cwd_matches


def test_cwd_matching_on_path_boundaries() -> None:
    assert cwd_matches("/repo", "/repo") and cwd_matches("/repo", "/repo/sub/dir")
    assert not cwd_matches("/repo", "/repo-old") and not cwd_matches("/repo/sub", "/repo")
    assert cwd_matches(None, "/x") and cwd_matches("/", "/x")


def _ended_session(wh, sid: str, cwd: str) -> int:
    wh.obs(sid, "user-prompt", "Prompt: work", f"work in {cwd}", cwd=cwd)
    return wh.ok("session.end", {"session_id": sid, "cwd": cwd})["handoff_id"]


def test_accept_prefers_manual_then_newest_automatic_and_supersedes_older(wh) -> None:
    old = _ended_session(wh, "a", "/w/app")
    new = _ended_session(wh, "b", "/w/app")
    other_dir = _ended_session(wh, "c", "/w/app-old")
    manual = wh.ok("handoff.begin", {"body": "please review the PR", "cwd": "/w/app"})["handoff"]
    assert manual["automatic"] is False and manual["title"] == "please review the PR"
    got = wh.ok("handoff.accept", {"cwd": "/w/app/src", "agent": "codex"})
    assert got["handoff"]["id"] == manual["id"] and got["handoff"]["status"] == "accepted"
    got = wh.ok("handoff.accept", {"cwd": "/w/app/src", "agent": "codex", "session_id": "z"})
    assert got["handoff"]["id"] == new and got["superseded"] == [old]
    assert [f["id"] for f in got["handoff"]["folded"]] == [old]
    assert wh.ok("handoff.accept", {"cwd": "/w/app"})["handoff"] is None
    states = dict(wh.conn.execute("SELECT id, status FROM handoffs"))
    assert states == {old: "superseded", new: "accepted", other_dir: "open", manual["id"]: "accepted"}
    assert wh.count("SELECT superseded_by FROM handoffs WHERE id = ?", old) == new


def test_claim_exactly_once(wh) -> None:
    h = wh.ok("handoff.begin", {"body": "baton"})["handoff"]
    envs = [wh.envelope("handoff.accept", {"handoff_id": h["id"]}) for _ in range(2)]
    r1, r2 = wh.batch(envs)
    assert r1["ok"] and not r2["ok"] and r2["error"]["code"] == "handoff_not_open"
    assert wh.err("handoff.accept", {"handoff_id": 424242})["code"] == "not_found"
    assert wh.err("handoff.accept", {"cwd": "/x"}, pj="nope")["code"] == "not_found"


def test_own_session_and_other_agents_handoffs_are_skipped(wh) -> None:
    hid = _ended_session(wh, "mine", "/w/app")
    assert wh.ok("handoff.accept", {"cwd": "/w/app", "session_id": "mine"})["handoff"] is None
    wh.ok("handoff.begin", {"body": "for gemini only", "to_agent": "gemini"})
    got = wh.ok("handoff.accept", {"cwd": "/w/app", "agent": "codex"})
    assert got["handoff"]["id"] == hid


def test_owner_scoping(wh) -> None:
    wh.ok("handoff.begin", {"body": "private"}, actor="alice")
    assert wh.ok("handoff.accept", {}, actor="bob")["handoff"] is None
    shared = wh.ok("handoff.begin", {"body": "for all", "shared": True}, actor="alice")["handoff"]
    assert wh.ok("handoff.accept", {}, actor="bob")["handoff"]["id"] == shared["id"]


def test_cancel(wh) -> None:
    h = wh.ok("handoff.begin", {"body": "x"})["handoff"]
    assert wh.ok("handoff.cancel", {"handoff_id": h["id"]})["cancelled"] is True
    assert wh.ok("handoff.cancel", {"handoff_id": h["id"]})["cancelled"] is False
    assert wh.ok("handoff.accept", {"handoff_id": None})["handoff"] is None
    assert wh.err("handoff.cancel", {"handoff_id": h["id"]}, pj="other-missing")["code"] == "not_found"
    assert wh.err("handoff.begin", {"body": ""})["code"] == "invalid_payload"


def test_messages_claim_once_cancel_and_isolation(wh) -> None:
    wh.ok("page.write", {"path": "notes/x.md", "body": "x"}, pj="lib")  # creates default/lib
    assert wh.err("message.send", {"to_project": "lib", "body": "x"})["code"] == "not_found"  # no sender yet
    wh.ok("page.write", {"path": "notes/x.md", "body": "x"}, pj="app")
    m = wh.ok("message.send", {"to_project": "lib", "body": "bump the API", "subject": "api"})["message"]
    assert m["to_project"] == "lib" and m["from_project"] == "app" and m["status"] == "pending"
    assert wh.ok("message.pop", {})["message"] is None  # app's own inbox is empty
    got = wh.ok("message.pop", {}, pj="lib")["message"]
    assert got["id"] == m["id"] and got["status"] == "claimed"
    assert wh.ok("message.pop", {}, pj="lib")["message"] is None
    assert wh.err("message.pop", {"message_id": m["id"]}, pj="lib")["code"] == "message_not_pending"
    m2 = wh.ok("message.send", {"to_project": "lib", "body": "second"})["message"]
    assert wh.ok("message.cancel", {})["cancelled"] == [m2["id"]]
    assert wh.err("message.cancel", {"message_id": m2["id"]}, pj="lib")["code"] == "not_found"
    assert wh.err("message.send", {"to_project": "ghost", "body": "x"})["code"] == "not_found"
    assert wh.err("message.send", {"to_workspace": "ghost", "to_project": "lib", "body": "x"})["code"] == "not_found"


def test_inbox_depth_cap(wh) -> None:
    wh.ok("page.write", {"path": "notes/x.md", "body": "x"}, pj="lib")
    wh.ok("page.write", {"path": "notes/x.md", "body": "x"}, pj="app")
    envs = [wh.envelope("message.send", {"to_project": "lib", "body": f"m{i}"}) for i in range(INBOX_DEPTH_CAP + 1)]
    replies = wh.batch(envs)
    assert all(r["ok"] for r in replies[:-1])
    assert replies[-1]["error"]["code"] == "inbox_full"
    assert wh.count("SELECT count(*) FROM agent_messages WHERE status='pending'") == INBOX_DEPTH_CAP
