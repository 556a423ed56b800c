"""``aimem_writer.forget`` on a real migrated SQLite: which stored replies and dead letters a
purge forgets, and which it keeps (the whole stack's check is
``tests/e2e/test_purge_leaves_no_text.py``)."""

from __future__ import annotations

import json

import pytest

from aimem_common import config
from aimem_common.commands import make_envelope
from aimem_common.db.connect import open_writer

from aimem_writer import ledger
from aimem_writer.forget import forget_dead_letters, forget_profile_replies, forget_replies, optimize_text_indexes


@pytest.fixture
def conn(tmp_path):
    c = open_writer(config.load(tmp_path / "data", environ={}).db_path)
    yield c
    c.close()


def store(conn, key: str, result: dict, project_id: str | None, op: str = "handoff.accept") -> None:
    env = make_envelope(op, {"cwd": "/w", "agent": "a", "session_id": "x"} if op == "handoff.accept" else {"body": "b"},
                        project="app").model_copy(update={"cmd_id": key})
    ledger.record_reply(conn, key, env, {"cmd_id": key, "ok": True, "result": result}, "2026-12-05T00:00:00+00:00",
                        project_id)


def replies(conn) -> dict[str, dict]:
    return {k: json.loads(r) for k, r in conn.execute("SELECT key, result FROM ingest_keys")}


@pytest.mark.parametrize("others", [0, 60])  # 60 more ids: the one-pass regex path instead of SQL's
def test_replies_of_a_purged_project_or_naming_a_purged_session_become_the_purged_marker(conn, others) -> None:
    store(conn, "k-app", {"handoff": {"title": "app secret"}}, "P-app")
    store(conn, "k-lab-accepts", {"handoff": {"from_session_id": "s-app", "body": "s-app's words"}}, "P-lab")
    store(conn, "k-lab-folded", {"handoff": {"folded": [{"from_session_id": "s-app", "title": "t"}]}}, "P-lab")
    store(conn, "k-lab-own", {"handoff": {"from_session_id": "s-lab", "body": "mentions s-app in text only"}}, "P-lab")
    store(conn, "k-old", {"session_id": "s-app", "id": 3}, None)  # a row from before migration 24
    sids = ["s-app", *(f"s-gone-{i}" for i in range(others))]
    n = forget_replies(conn, session_ids=sids, project_ids=["P-app"], hint="project default/app")
    got = replies(conn)
    forgotten = {k for k, r in got.items() if not r["ok"]}
    assert forgotten == {"k-app", "k-lab-accepts", "k-lab-folded", "k-old"} and n == 4
    for k in forgotten:
        assert got[k]["error"]["code"] == "purged" and got[k]["error"]["status"] == 410 and got[k]["cmd_id"] == k
        assert "secret" not in json.dumps(got[k]) and "words" not in json.dumps(got[k])
    assert got["k-lab-own"]["result"]["handoff"]["body"] == "mentions s-app in text only"  # a name in text is no link
    # The replay path reads the marker back: the key stays, so the command is never applied again.
    assert ledger.stored_replies(conn, {"k-app"})["k-app"]["error"]["code"] == "purged"
    assert forget_replies(conn, session_ids=sids, project_ids=["P-app"], hint="again") == 0  # idempotent


def test_dead_letters_of_the_place_or_naming_the_session_are_deleted(conn) -> None:
    def letter(ws: str, pj: str, payload: dict) -> None:
        conn.execute("INSERT INTO dead_letters(cmd_id, op, workspace, project, envelope, reason, error_code, created_at)"
                     " VALUES ('c', 'observation.append', ?, ?, ?, 'r', 'bad', 'now')",
                     (ws, pj, json.dumps({"op": "observation.append", "payload": payload})))

    letter("default", "app", {"session_id": "s-x", "body": "app text"})
    letter("default", "lab", {"session_id": "s-app", "body": "s-app text filed under lab"})
    letter("default", "lab", {"session_id": "s-lab", "body": "lab text"})
    conn.execute("INSERT INTO dead_letters(cmd_id, op, envelope, reason, error_code, created_at)"
                 " VALUES ('u', 'unknown', 'not json s-app', 'r', 'invalid_envelope', 'now')")
    n = forget_dead_letters(conn, session_ids=["s-app"], places=[("default", "app")])
    left = [r[0] for r in conn.execute("SELECT envelope FROM dead_letters ORDER BY id")]
    assert n == 2 and len(left) == 2 and "lab text" in left[0] and left[1] == "not json s-app"


def test_every_fts5_index_is_merged_and_no_fts5vocab_view_is_touched(conn) -> None:
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE sql LIKE '%USING fts5(%'")}
    assert optimize_text_indexes(conn) == len(names) >= 4


def test_a_profile_entry_forgotten_takes_the_reply_that_echoed_it(conn) -> None:
    store(conn, "k-pref", {"entry": {"id": 7, "body": "I prefer wombat names"}, "created": True}, None, "profile.add")
    store(conn, "k-other", {"entry": {"id": 8, "body": "keep me"}, "created": True}, None, "profile.add")
    assert forget_profile_replies(conn, [7], hint="profile entry 7 removed") == 1
    got = replies(conn)
    assert got["k-pref"]["error"]["code"] == "purged" and "wombat" not in json.dumps(got["k-pref"])
    assert got["k-other"]["result"]["entry"]["body"] == "keep me"


def test_a_duplicate_behind_a_purge_in_the_same_batch_gets_the_marker(wh) -> None:
    """The batch read its stored replies before the purge ran: a re-sent command behind the
    purge is answered from the ledger as the purge left it, not from that earlier read."""
    first = wh.batch([wh.envelope("page.write", {"path": "notes/a.md", "body": "x"}, key="k1")])[0]
    assert first["ok"] and first["result"]
    purge = wh.envelope("project.purge", {"dry_run": False})
    again = wh.envelope("page.write", {"path": "notes/a.md", "body": "x"}, key="k1")
    replies_ = wh.batch([purge, again])
    assert replies_[0]["ok"] and replies_[0]["result"]["forgotten"]["stored_replies_forgotten"] == 1, replies_[0]
    assert replies_[1]["duplicate"] is True and replies_[1]["error"]["code"] == "purged"
    assert wh.count("SELECT count(*) FROM pages") == 0  # not applied again


def test_a_workspace_purge_forgets_the_replies_of_each_of_its_projects(wh) -> None:
    wh.batch([wh.envelope("page.write", {"path": "notes/a.md", "body": "x"}, pj="app", key="ka"),
              wh.envelope("page.write", {"path": "notes/b.md", "body": "y"}, pj="lab", key="kb"),
              wh.envelope("page.write", {"path": "notes/c.md", "body": "z"}, ws="other", pj="keep", key="kc")])
    out = wh.batch([wh.envelope("workspace.purge", {"workspace": "default", "dry_run": False}, pj=None)])[0]
    assert out["ok"] and out["result"]["forgotten"]["stored_replies_forgotten"] == 2, out
    again = wh.batch([wh.envelope("page.write", {"path": "notes/a.md", "body": "x"}, pj="app", key=k)
                      for k in ("ka", "kb", "kc")])
    assert [r.get("error", {}).get("code") for r in again] == ["purged", "purged", None]
    assert again[2]["ok"] and again[2]["duplicate"]
