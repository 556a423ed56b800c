"""Project identity keys, handoffs by project root, and the session lifecycle rules (writer side).

The same rules run end to end through the hook client in ``tests/e2e/test_identity_lifecycle.py``;
these pin each one on the writer alone, fast.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from aimem_common.db.connect import open_writer
from aimem_common.db.migrations.m01_core import SQL as MIGRATION_1
from aimem_common.db.schema import SCHEMA_VERSION
from aimem_common.wikifmt import parse_meta



def projects(wh) -> dict[str, tuple]:
    return {r[0]: (r[1], r[2]) for r in wh.conn.execute("SELECT name, root, origin FROM projects")}


def test_two_repositories_with_one_folder_name_get_two_projects(wh) -> None:
    a = wh.obs("s1", "user-prompt", "Prompt: a", "a", pj="api", root="/srv/clientA/api")
    b = wh.obs("s2", "user-prompt", "Prompt: b", "b", pj="api", root="/srv/clientB/api")
    wh.obs("s3", "user-prompt", "Prompt: a again", "a2", pj="api", root="/srv/clientA/api")
    assert a and b
    assert projects(wh) == {"api": ("/srv/clientA/api", None), "api-2": ("/srv/clientB/api", None)}
    per_project = dict(wh.conn.execute(
        "SELECT p.name, group_concat(o.session_id) FROM observations o JOIN projects p ON p.id = o.project_id"
        " GROUP BY p.name"))
    assert per_project == {"api": "s1,s3", "api-2": "s2"}
    # The manifest keeps the keys, so `aimem reindex` rebuilds `api-2` as client B's.
    meta = parse_meta((wh.scope_dir(pj="api-2") / "_meta.md").read_text())
    assert (meta["name"], meta["root"]) == ("api-2", "/srv/clientB/api")


def test_one_origin_is_one_project_wherever_it_is_cloned(wh) -> None:
    wh.obs("s1", "user-prompt", "Prompt: a", "a", pj="api", root="/home/a/api", origin="github.com/acme/api")
    wh.obs("s2", "user-prompt", "Prompt: b", "b", pj="api", root="/tmp/api", origin="github.com/acme/api")
    wh.obs("s3", "user-prompt", "Prompt: c", "c", pj="api", root="/home/a/other/api", origin="github.com/zeta/api")
    assert projects(wh) == {"api": ("/home/a/api", "github.com/acme/api"),
                            "api-2": ("/home/a/other/api", "github.com/zeta/api")}


def test_a_keyless_project_is_adopted_and_explicit_names_never_split(wh) -> None:
    wh.obs("old", "user-prompt", "Prompt: before keys", "x", pj="web")  # today's data: no keys
    wh.obs("new", "user-prompt", "Prompt: with keys", "y", pj="web", root="/w/web", origin="github.com/acme/web")
    assert projects(wh) == {"web": ("/w/web", "github.com/acme/web")}
    # A marker-named project is found by its name even from another repository.
    wh.obs("m1", "user-prompt", "Prompt: m", "m", pj="shared", root="/w/one", explicit=True)
    wh.obs("m2", "user-prompt", "Prompt: m", "m", pj="shared", root="/w/two", explicit=True)
    assert projects(wh)["shared"] == ("/w/one", None)
    assert wh.count("SELECT count(*) FROM projects") == 2


def _work(wh, sid: str, cwd: str, root: str | None, pj: str = "app") -> int | None:
    wh.obs(sid, "user-prompt", "Prompt: work", f"work in {cwd}", cwd=cwd, pj=pj, root=root)
    return wh.ok("session.end", {"session_id": sid, "cwd": cwd}, pj=pj, root=root)["handoff_id"]


def test_handoffs_match_by_project_root_both_ways(wh) -> None:
    at_root = _work(wh, "a", "/w/app", "/w/app")
    got = wh.ok("handoff.accept", {"cwd": "/w/app/services/web", "session_id": "b"}, root="/w/app")
    assert got["handoff"]["id"] == at_root
    in_sub = _work(wh, "b", "/w/app/services/web", "/w/app")
    # A worktree of the same repository (its cwd is outside the root) gets it too.
    got = wh.ok("handoff.accept", {"cwd": "/w/app-wt/docs", "session_id": "c"}, root="/w/app")
    assert got["handoff"]["id"] == in_sub
    sibling = _work(wh, "d", "/w/app-old", "/w/app-old", pj="app-old")
    assert wh.ok("handoff.accept", {"cwd": "/w/app", "session_id": "e"}, root="/w/app")["handoff"] is None
    assert wh.count("SELECT count(*) FROM handoffs WHERE id = ? AND status = 'open'", sibling) == 1


def test_an_empty_session_gives_its_claim_back(wh) -> None:
    older = _work(wh, "a", "/w/app", "/w/app")
    newer = _work(wh, "b", "/w/app", "/w/app")
    wh.obs("empty", "session-start", "Session start", cwd="/w/app", root="/w/app")
    got = wh.ok("handoff.accept", {"cwd": "/w/app", "session_id": "empty"}, root="/w/app")
    assert got["handoff"]["id"] == newer and got["superseded"] == [older]
    wh.obs("empty", "session-end", "Session end", cwd="/w/app", root="/w/app")
    res = wh.ok("session.end", {"session_id": "empty", "cwd": "/w/app"}, root="/w/app")
    assert res["returned_handoffs"] == [newer] and res["handoff_id"] is None
    states = dict(wh.conn.execute("SELECT id, status FROM handoffs"))
    assert states == {older: "open", newer: "open"}
    # The next real session gets the newest again, exactly once.
    assert wh.ok("handoff.accept", {"cwd": "/w/app/x", "session_id": "real"}, root="/w/app")["handoff"]["id"] == newer


def test_a_session_that_worked_keeps_its_claim(wh) -> None:
    hid = _work(wh, "a", "/w/app", "/w/app")
    assert wh.ok("handoff.accept", {"cwd": "/w/app", "session_id": "b"}, root="/w/app")["handoff"]["id"] == hid
    _work(wh, "b", "/w/app", "/w/app")
    assert wh.count("SELECT count(*) FROM handoffs WHERE id = ? AND status = 'accepted'", hid) == 1


def test_a_later_event_reopens_an_ended_session_and_a_re_end_updates_the_page(wh) -> None:
    wh.obs("s", "user-prompt", "Prompt: start", "start the refactor", occurred_at="2026-03-01T10:00:00Z")
    last = wh.conn.execute("SELECT last_event_at FROM sessions WHERE session_id = 's'").fetchone()[0]
    first = wh.ok("session.end", {"session_id": "s", "reason": "idle", "ended_at": last, "if_last_event_at": last})
    assert first["ended"] and first["reason"] == "idle"
    page = wh.page_file(first["path"]).read_text()
    assert "end_reason: idle" in page and "Ended: idle" in page
    wh.obs("s", "user-prompt", "Prompt: continue", "finish the refactor", occurred_at="2026-03-01T12:00:00Z")
    row = wh.conn.execute("SELECT ended_at, end_reason FROM sessions WHERE session_id = 's'").fetchone()
    assert tuple(row) == (None, None)  # resumed
    again = wh.ok("session.end", {"session_id": "s", "reason": "exit"})
    assert again["changed"] and again["path"] == first["path"]
    page = wh.page_file(first["path"]).read_text()
    assert "finish the refactor" in page and "end_reason: exit" in page and "Ended: idle" not in page


def test_a_late_delivery_of_an_earlier_event_does_not_reopen(wh) -> None:
    wh.obs("s", "user-prompt", "Prompt: a", "a", occurred_at="2026-03-01T10:00:00Z")
    wh.ok("session.end", {"session_id": "s", "ended_at": "2026-03-01T11:00:00Z"})
    wh.obs("s", "stop", "Stop", "done", occurred_at="2026-03-01T10:30:00Z")
    assert wh.conn.execute("SELECT ended_at FROM sessions WHERE session_id = 's'").fetchone()[0] is not None


def test_the_idle_precondition_skips_a_session_that_moved(wh) -> None:
    wh.obs("s", "user-prompt", "Prompt: a", "a", occurred_at="2026-03-01T10:00:00Z")
    res = wh.ok("session.end", {"session_id": "s", "reason": "idle", "if_last_event_at": "2026-01-01T00:00:00Z"})
    assert res == {"ended": False, "changed": False, "skipped": "active", "observation_count": 1}
    assert wh.conn.execute("SELECT ended_at FROM sessions WHERE session_id = 's'").fetchone()[0] is None


def test_a_database_of_the_previous_schema_migrates_with_its_projects(wh, tmp_path: Path) -> None:
    data = tmp_path / "old-data"
    (data / "db").mkdir(parents=True)
    db = data / "db" / "memory.sqlite"
    old = sqlite3.connect(db)
    old.executescript(MIGRATION_1)
    old.executescript(
        "INSERT INTO workspaces VALUES ('w1', 'default', '2026-01-01T00:00:00Z');"
        "INSERT INTO projects VALUES ('p1', 'w1', 'acme-api', '2026-01-01T00:00:00Z');"
        "INSERT INTO sessions(workspace_id, project_id, session_id, agent, cwd, started_at, last_event_at,"
        " observation_count) VALUES ('w1', 'p1', 'old-s', 'claude-code', '/w/acme-api', '2026-01-01T00:00:00Z',"
        " '2026-01-01T00:00:00Z', 1);"
        "INSERT INTO handoffs(workspace_id, project_id, automatic, cwd, title, body, status, created_at)"
        " VALUES ('w1', 'p1', 1, '/w/acme-api', 'Continue', 'from before', 'open', '2026-01-01T00:00:00Z');"
        "PRAGMA user_version = 1;")
    old.commit()
    old.close()
    wh = type(wh)(data)  # the same harness on the old file
    try:
        assert wh.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert projects(wh) == {"acme-api": (None, None)}
        # Every later migration ran too: the old session has no imported observations.
        assert wh.count("SELECT imported_count FROM sessions WHERE session_id = 'old-s'") == 0
        # The first keyed event adopts the old project; its open handoff (cwd only) still matches.
        wh.obs("new-s", "session-start", "Session start", cwd="/w/acme-api/src", pj="acme-api",
               root="/w/acme-api", origin="github.com/acme/acme-api")
        assert projects(wh) == {"acme-api": ("/w/acme-api", "github.com/acme/acme-api")}
        got = wh.ok("handoff.accept", {"cwd": "/w/acme-api/src", "session_id": "new-s"}, pj="acme-api",
                    root="/w/acme-api")
        assert got["handoff"]["body"] == "from before"
        assert wh.count("SELECT count(*) FROM sessions WHERE project_id = 'p1'") == 2
    finally:
        wh.close()


def test_open_writer_on_a_fresh_file_has_the_keys(tmp_path: Path) -> None:
    conn = open_writer(tmp_path / "m.sqlite")
    cols = {r[1] for r in conn.execute("PRAGMA table_info(projects)")}
    assert {"root", "origin"} <= cols
