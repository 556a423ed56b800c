"""Profile memory in the writer: ``profile.add`` / ``profile.remove`` per owner, redacted,
bounded, and forgotten by the purges of where it was stated and by its user's deletion."""

from __future__ import annotations

from aimem_common.commands.profile import MAX_ENTRIES_PER_OWNER
from aimem_common.read.profile import entries


def _user(wh, name: str) -> int:
    return wh.ok("user.create", {"name": name}, pj=None)["id"]


def test_entries_belong_to_their_owner_and_secrets_are_redacted(wh) -> None:
    alice, bob = _user(wh, "alice"), _user(wh, "bob")
    wh.obs("s1", "session-start", "Session start", cwd="/w/app")
    added = wh.ok("profile.add", {"user_id": alice, "body": "  Answer in French.  ", "session_id": "s1"})
    assert added["created"] is True and added["entry"]["body"] == "Answer in French."
    assert added["entry"]["source_project"] == "app" and added["entry"]["source_session_id"] == "s1"
    again = wh.ok("profile.add", {"user_id": alice, "body": "Answer in French."})
    assert again == {**added, "created": False}  # the same preference is not stored twice
    key = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    wh.ok("profile.add", {"user_id": alice, "body": f"My token is {key}"}, pj=None)
    wh.ok("profile.add", {"body": "The operator likes tabs."}, pj=None)
    assert [e["body"] for e in entries(wh.conn, bob)] == []
    assert [e["body"] for e in entries(wh.conn, None)] == ["The operator likes tabs."]
    mine = entries(wh.conn, alice)
    assert len(mine) == 2 and key not in mine[1]["body"] and "[REDACTED" in mine[1]["body"]
    assert mine[1]["source_project"] is None
    # bob cannot remove alice's entry: it is not in his profile
    assert wh.err("profile.remove", {"user_id": bob, "entry_id": mine[0]["id"]}, pj=None)["code"] == "not_found"
    assert wh.ok("profile.remove", {"user_id": alice, "entry_id": mine[0]["id"]}, pj=None) == {"removed": mine[0]["id"]}
    assert [e["id"] for e in entries(wh.conn, alice)] == [mine[1]["id"]]
    assert wh.err("profile.add", {"user_id": 999, "body": "x"}, pj=None)["code"] == "not_found"
    assert wh.err("profile.add", {"user_id": alice, "body": "   "}, pj=None)["code"] == "invalid_payload"
    wh.ok("user.delete", {"name": "alice"}, pj=None)
    assert wh.count("SELECT count(*) FROM profile_entries WHERE user_id IS NOT NULL") == 0


def test_a_profile_is_bounded(wh) -> None:
    for i in range(MAX_ENTRIES_PER_OWNER):
        wh.ok("profile.add", {"body": f"preference {i}"}, pj=None)
    err = wh.err("profile.add", {"body": "one too many"}, pj=None)
    assert err["code"] == "profile_full" and err["data"]["cap"] == MAX_ENTRIES_PER_OWNER


def test_purges_forget_what_was_stated_there(wh) -> None:
    alice = _user(wh, "alice")
    wh.obs("s1", "session-start", "Session start", cwd="/w/app")
    wh.obs("s2", "session-start", "Session start", cwd="/w/app")
    wh.obs("o1", "session-start", "Session start", cwd="/w/other", pj="other")
    wh.ok("profile.add", {"user_id": alice, "body": "from s1", "session_id": "s1"})
    wh.ok("profile.add", {"user_id": alice, "body": "from s2", "session_id": "s2"})
    wh.ok("profile.add", {"user_id": alice, "body": "from other"}, pj="other")
    wh.ok("profile.add", {"user_id": alice, "body": "from nowhere"}, pj=None)
    dry = wh.ok("session.purge", {"session_id": "s1", "dry_run": True})
    assert dry["profile_entries_deleted"] == 1 and len(entries(wh.conn, alice)) == 4
    assert wh.ok("session.purge", {"session_id": "s1"})["profile_entries_deleted"] == 1
    assert [e["body"] for e in entries(wh.conn, alice)] == ["from s2", "from other", "from nowhere"]
    assert wh.ok("project.purge", {"force": True}, pj="other")["profile_entries_deleted"] == 1
    assert wh.ok("workspace.purge", {"workspace": "default", "force": True}, pj=None)["profile_entries_deleted"] == 1
    assert [e["body"] for e in entries(wh.conn, alice)] == ["from nowhere"]
