"""Purge tombstones and idempotent ends on the real batch path (``Applier``, SQLite, git).

* a session purge leaves a tombstone; late hooks, imports and ends of that session id are
  dropped and counted on it (no session row, observation, page, handoff or job comes back);
  ``purge.lift`` lets the id be used again;
* a project purge refuses its sessions' late events and events for its name from before the
  purge, while new work after the purge is stored;
* a late ``session.ended`` (consolidation) and auto-improve claims of a purged session queue
  nothing;
* a doubled session end stores one event, one page version, one job; an end after new
  events updates the page and the handoff in place.
"""

from __future__ import annotations

import json



def _session(wh, sid: str = "s1", cwd: str = "/w/app") -> None:
    """Seven events of one session with real work, ending in its session-end event."""
    wh.obs(sid, "session-start", "Session start", cwd=cwd)
    wh.obs(sid, "user-prompt", "Prompt: rotate the key", "rotate the zanzibar key", cwd=cwd)
    wh.obs(sid, "pre-tool-use", "Bash: make rotate", json.dumps({"command": "make rotate"}), tool_name="Bash")
    wh.obs(sid, "post-tool-use", "Bash: make rotate", json.dumps({"command": "make rotate", "out": "ok"}),
           tool_name="Bash")
    wh.obs(sid, "post-tool-use", "Edit: keys.py", json.dumps({"file_path": f"{cwd}/keys.py"}), tool_name="Edit")
    wh.obs(sid, "stop", "Stop: done", "The key is rotated.")
    wh.obs(sid, "session-end", "Session end")


def _purge(wh, sid: str = "s1") -> dict:
    return wh.ok("session.purge", {"session_id": sid})


def _tomb(wh, tid: int):
    return wh.conn.execute("SELECT * FROM purge_tombstones WHERE id = ?", (tid,)).fetchone()


def test_session_purge_writes_a_tombstone_and_refuses_late_events(wh) -> None:
    _session(wh)
    wh.ok("session.end", {"session_id": "s1", "cwd": "/w/app"})
    out = _purge(wh)
    t = _tomb(wh, out["tombstone_id"])
    assert (t["kind"], t["session_id"], t["workspace"], t["project"]) == ("session", "s1", "default", "app")
    removed = json.loads(t["removed"])
    assert removed["observations_deleted"] == 7 and removed["pages_deleted"] == 1 and removed["handoffs_deleted"] == 1
    # Late events: a hook from the spool, an import, a second end.
    late = wh.obs("s1", "user-prompt", "Prompt: leaked", "the secret plan zanzibar")
    assert late == {"observation_id": None, "session_id": "s1", "skipped": "purged"}
    assert wh.obs("s1", "stop", "Stop", "zanzibar again", imported=True)["skipped"] == "purged"
    end = wh.ok("session.end", {"session_id": "s1"})
    assert end["skipped"] == "purged" and end["ended"] is False
    assert wh.ok("consolidation.enqueue", {"session_id": "s1", "generation": 9})["skipped"] == "purged"
    assert wh.ok("auto_improve.claim", {"session_id": "s1"})["claimed"] is False
    for table in ("sessions", "observations", "handoffs", "session_consolidation_jobs", "auto_improve_runs"):
        assert wh.count(f"SELECT count(*) FROM {table} WHERE " + (
            "from_session_id" if table == "handoffs" else "session_id") + " = 's1'") == 0, table
    assert wh.count("SELECT count(*) FROM pages WHERE session_id = 's1'") == 0
    assert not wh.page_file("sessions/s1.md").exists()
    assert wh.count("SELECT count(*) FROM observations_fts WHERE observations_fts MATCH 'zanzibar'") == 0
    t = _tomb(wh, out["tombstone_id"])
    assert t["refused_events"] == 5 and t["last_refused_at"]
    assert json.loads(t["refused"]) == {"observation.append": 2, "session.end": 1, "consolidation.enqueue": 1,
                                        "auto_improve.claim": 1}
    # Another session of the project is not affected.
    assert wh.obs("s2", "user-prompt", "Prompt: fine", "fine")["observation_id"] is not None
    # The hook ledger kept an excerpt of each event: the purge removed s1's, and only those.
    ledger = "".join(p.read_text() for p in wh.scope_dir().glob("log-*.md"))
    assert "zanzibar" not in ledger and "session s1" not in ledger and "session s2" in ledger


def test_purge_scrubs_the_ledger_entries_of_that_session_only(wh) -> None:
    from aimem_writer.wiki import without_session

    ledger = ("## [t1] user-prompt · claude-code · session s1\n\nzanzibar\n\n"
              "## [t2] stop · codex · session s10\n\nkept\n\n"
              "## [t3] stop · codex · session s1\n\nzanzibar 2\n\n")
    assert without_session(ledger, "s1") == "## [t2] stop · codex · session s10\n\nkept\n\n"


def test_purge_lift_lets_the_session_id_be_used_again(wh) -> None:
    _session(wh)
    tid = _purge(wh)["tombstone_id"]
    assert wh.obs("s1", "stop", "Stop", "late")["skipped"] == "purged"
    lifted = wh.ok("purge.lift", {"session_id": "s1"})
    assert lifted["lifted"] == [tid]
    assert _tomb(wh, tid)["lifted_at"] and _tomb(wh, tid)["refused_events"] == 1  # the history stays
    assert wh.obs("s1", "user-prompt", "Prompt: again", "on purpose")["observation_id"] is not None
    assert wh.err("purge.lift", {"session_id": "s1"})["code"] == "no_tombstone"


def test_ingress_refusals_are_counted_on_the_tombstone(wh) -> None:
    _session(wh)
    tid = _purge(wh)["tombstone_id"]
    assert wh.ok("purge.refused", {"session_id": "s1", "count": 3}, pj=None) == {"counted": 3, "tombstone_id": tid}
    assert _tomb(wh, tid)["refused_events"] == 3
    assert wh.ok("purge.refused", {"session_id": "never-purged"}, pj=None) == {"counted": 0}


def test_project_purge_refuses_its_sessions_and_older_events_but_not_new_work(wh) -> None:
    _session(wh, "s1")
    wh.ok("session.end", {"session_id": "s1"})
    out = wh.ok("project.purge", {"force": True})
    proj = _tomb(wh, out["tombstone_id"])
    assert proj["kind"] == "project" and json.loads(proj["removed"])["sessions_deleted"] == 1
    assert wh.count("SELECT count(*) FROM purge_tombstones WHERE kind = 'session' AND session_id = 's1'"
                    " AND parent_id = ?", out["tombstone_id"]) == 1
    # A late event of a purged session, and an event from before the purge of a session the
    # writer never saw (spooled while ingress was down): both refused, the project stays gone.
    assert wh.obs("s1", "stop", "Stop", "late")["skipped"] == "purged"
    assert wh.obs("s-unseen", "user-prompt", "Prompt", "old",
                  occurred_at="2020-01-01T00:00:00Z")["skipped"] == "purged"
    assert wh.count("SELECT count(*) FROM projects WHERE name = 'app'") == 0
    assert _tomb(wh, out["tombstone_id"])["refused_events"] == 1
    # New work after the purge starts a fresh project.
    assert wh.obs("s-new", "user-prompt", "Prompt", "new work")["observation_id"] is not None
    assert wh.count("SELECT count(*) FROM projects WHERE name = 'app'") == 1
    wh.ok("purge.lift", {})
    assert wh.obs("s-unseen", "user-prompt", "Prompt", "old", occurred_at="2020-01-01T00:00:00Z")["observation_id"]


def test_doubled_session_end_stores_one_event_one_page_version_one_job(wh) -> None:
    _session(wh)  # ends with a session-end observation
    first = wh.ok("session.end", {"session_id": "s1", "cwd": "/w/app"})
    # The client fires its end hook again: the same event and the same session.end.
    again = wh.obs("s1", "session-end", "Session end")
    assert again["skipped"] == "repeated_end"
    second = wh.ok("session.end", {"session_id": "s1", "cwd": "/w/app"})
    assert second["changed"] is False
    assert wh.count("SELECT count(*) FROM observations WHERE session_id = 's1' AND kind = 'session-end'") == 1
    assert wh.count("SELECT count(*) FROM pages WHERE path = 'sessions/s1.md'") == 1
    assert wh.count("SELECT count(*) FROM session_consolidation_jobs WHERE session_id = 's1'") == 1
    assert wh.count("SELECT count(*) FROM audit_log WHERE op = 'session.end'") == 1
    # Both hooks in flight together: end, end, then both session.end commands.
    _session(wh, "s2")
    assert wh.obs("s2", "session-end", "Session end")["skipped"] == "repeated_end"
    wh.ok("session.end", {"session_id": "s2"})
    assert wh.ok("session.end", {"session_id": "s2"})["changed"] is False
    assert wh.count("SELECT count(*) FROM session_consolidation_jobs WHERE session_id = 's2'") == 1
    # An end after new events updates the page and the open handoff in place.
    wh.obs("s1", "user-prompt", "Prompt: one more", "also document the ostrich flag")
    wh.obs("s1", "session-end", "Session end")
    third = wh.ok("session.end", {"session_id": "s1", "cwd": "/w/app"})
    assert third["changed"] and third["handoff_id"] == first["handoff_id"] and third["path"] == first["path"]
    assert "ostrich" in wh.page_file("sessions/s1.md").read_text()
    assert wh.count("SELECT count(*) FROM pages WHERE path = 'sessions/s1.md' AND is_latest = 1") == 1
    assert wh.count("SELECT count(*) FROM handoffs WHERE from_session_id = 's1'") == 1


def test_an_end_with_new_text_is_stored(wh) -> None:
    _session(wh)
    wh.ok("session.end", {"session_id": "s1"})
    tail = wh.obs("s1", "session-end", "Session end", "Final message:\nshipped the zebra fix")
    assert tail["observation_id"] is not None


def test_watcher_reindex_and_restore_do_not_bring_a_purged_page_back(wh, tmp_path) -> None:
    """The file put back by hand (or a sync), a rebuild from the wiki, a restore from git."""
    from aimem_common import config
    from aimem_common.db.connect import open_writer
    from aimem_writer.reindex import index_hand_edits, rebuild

    _session(wh)
    end = wh.ok("session.end", {"session_id": "s1"})
    page = wh.page_file("sessions/s1.md")
    text = page.read_text()
    wh.applier.wiki.checkpoint()
    rev = wh.applier.wiki.head()
    _purge(wh)
    wh.applier.wiki.checkpoint()
    # A sync tool writes the file back: the watcher does not index it.
    page.write_text(text)
    rel = page.relative_to(wh.wiki.root).as_posix()
    index_hand_edits(wh.applier, [rel])
    assert wh.count("SELECT count(*) FROM pages WHERE session_id = 's1'") == 0
    # A restore of the page from git history is refused as purged.
    err = wh.err("page.restore", {"path": "sessions/s1.md", "rev": rev})
    assert err["code"] == "purged", err
    # A rebuild from the wiki (the DB moved aside) restores the tombstone and skips the file.
    wh.close()
    settings = wh.settings
    settings.db_path.rename(settings.db_path.with_suffix(".aside"))
    for extra in settings.db_path.parent.glob(settings.db_path.name + "-*"):
        extra.unlink()
    report = rebuild(settings)
    assert any("sessions/s1.md" in line and "purged" in line for line in report.skipped), report.skipped
    conn = open_writer(settings.db_path)
    try:
        assert conn.execute("SELECT count(*) FROM pages WHERE session_id = 's1'").fetchone()[0] == 0
        assert [tuple(r) for r in conn.execute("SELECT kind, session_id FROM purge_tombstones WHERE lifted_at IS NULL")] == [
            ("session", "s1")]
    finally:
        conn.close()
    wh.conn = open_writer(settings.db_path)  # for the fixture's close
    assert end["page_id"]


def test_workspace_purge_leaves_tombstones_for_it_its_projects_and_sessions(wh) -> None:
    _session(wh, "s1", cwd="/w/app")
    wh.obs("s2", "user-prompt", "Prompt", "api work", ws="team", pj="api")
    wh.obs("s3", "user-prompt", "Prompt", "web work", ws="team", pj="web")
    wh.obs("s4", "user-prompt", "Prompt", "web work", ws="team", pj="web", occurred_at="2020-01-01T00:00:00Z")
    preview = wh.ok("workspace.purge", {"workspace": "team", "dry_run": True, "force": True}, pj=None)
    assert preview["projects_deleted"] == 2 and preview["observations_deleted"] == 3 and preview["dry_run"]
    out = wh.ok("workspace.purge", {"workspace": "team", "force": True}, pj=None)
    assert out["observations_deleted"] == 3 and out["sessions_deleted"] == 3 and out["projects_deleted"] == 2
    kinds = [tuple(r) for r in wh.conn.execute(
        "SELECT kind, coalesce(project, ''), coalesce(session_id, '') FROM purge_tombstones ORDER BY id")]
    assert kinds == [("workspace", "", ""), ("project", "api", ""), ("session", "api", "s2"),
                     ("project", "web", ""), ("session", "web", "s3"), ("session", "web", "s4")]
    assert wh.count("SELECT count(*) FROM workspaces WHERE name = 'team'") == 0
    assert not (wh.wiki.root / out["files_deleted"][0]).exists()
    # Late events of its sessions anywhere, and older events for any project of it: refused.
    assert wh.obs("s3", "stop", "Stop", "late", ws="team", pj="web")["skipped"] == "purged"
    assert wh.obs("s9", "stop", "Stop", "old", ws="team", pj="docs", occurred_at="2020-01-01T00:00:00Z")["skipped"] \
        == "purged"
    assert wh.count("SELECT count(*) FROM workspaces WHERE name = 'team'") == 0
    # The other workspace is untouched; new work in the purged one starts afresh.
    assert wh.count("SELECT count(*) FROM observations WHERE session_id = 's1'") == 7
    assert wh.obs("s10", "user-prompt", "Prompt", "new", ws="team", pj="web")["observation_id"] is not None
    lifted = wh.ok("purge.lift", {"workspace_only": True}, ws="team", pj="web")
    assert lifted["lifted"] == [1] and lifted["target"] == "team"
    assert wh.err("workspace.purge", {"workspace": "nope"}, pj=None)["code"] == "not_found"


def test_a_manual_handoff_naming_a_purged_session_is_refused_and_counted(wh) -> None:
    _session(wh)
    tid = _purge(wh)["tombstone_id"]
    late = wh.ok("handoff.begin", {"body": "continue the zanzibar rotation", "session_id": "s1"})
    assert late == {"handoff": None, "skipped": "purged", "session_id": "s1"}
    assert wh.count("SELECT count(*) FROM handoffs WHERE body LIKE '%zanzibar%'") == 0
    t = _tomb(wh, tid)
    assert t["refused_events"] == 1 and json.loads(t["refused"]) == {"handoff.begin": 1}
    # Without a session id, or naming another session, a manual handoff is stored as before.
    assert wh.ok("handoff.begin", {"body": "fine", "session_id": "s2"})["handoff"]["id"]
    assert wh.ok("handoff.begin", {"body": "fine too"})["handoff"]["id"]
    assert _tomb(wh, tid)["refused_events"] == 1
