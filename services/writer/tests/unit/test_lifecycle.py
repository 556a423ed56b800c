"""The session and handoff lifecycle on the writer alone (docs/lifecycle.md, issue 26).

Each test pins one class of issue 26 against the real batch path (``Applier``) on a tmp
data dir: ownership by place, ordering by event time, chains vs parallel sessions, child
sessions, and claims that only a new session makes.
"""

from __future__ import annotations

PLACE = {"root": "/w/app"}


def _session(wh, sid: str, start: str, end: str, *, actor: str = "hook", parent: str | None = None,
             reason: str = "exit") -> dict:
    """A session with real work between ``start`` and ``end`` (ISO event times); its end's result."""
    extra = {"parent_session_id": parent} if parent else {}
    wh.obs(sid, "session-start", "Session start", cwd="/w/app", occurred_at=start, **PLACE, **extra)
    wh.obs(sid, "user-prompt", f"Prompt: work of {sid}", f"work of {sid}", cwd="/w/app", occurred_at=start,
           **PLACE, **extra)
    wh.obs(sid, "session-end", "Session end", cwd="/w/app", occurred_at=end, **PLACE)
    return wh.ok("session.end", {"session_id": sid, "cwd": "/w/app", "ended_at": end, "reason": reason},
                 actor=actor, **PLACE)


def _claim(wh, sid: str, actor: str = "hook", **kw) -> dict:
    return wh.ok("handoff.accept", {"cwd": "/w/app", "session_id": sid, "agent": "codex", **kw}, actor=actor, **PLACE)


def _status(wh, hid: int) -> str:
    return wh.conn.execute("SELECT status FROM handoffs WHERE id = ?", (hid,)).fetchone()[0]


def _open_count(wh) -> int:
    return wh.count("SELECT count(*) FROM handoffs WHERE status = 'open'")


# -- 1. ownership by place -----------------------------------------------------------------------
def test_an_idle_finalised_session_is_handed_on_to_the_next_session(wh) -> None:
    # The maintainer's idle pass ends a crashed session: its handoff belongs to the place.
    hid = _session(wh, "crashed", "2026-12-01T09:00:00.000Z", "2026-12-01T10:00:00.000Z",
                   actor="maintainer", reason="idle")["handoff_id"]
    assert hid is not None and _open_count(wh) == 1
    got = _claim(wh, "next")
    assert got["handoff"]["id"] == hid and got["handoff"]["from_session_id"] == "crashed"
    assert _status(wh, hid) == "accepted" and _open_count(wh) == 0


def test_root_accepts_an_automatic_handoff_whoever_wrote_it(wh) -> None:
    hid = _session(wh, "crashed", "2026-12-01T09:00:00.000Z", "2026-12-01T10:00:00.000Z",
                   actor="maintainer", reason="idle")["handoff_id"]
    got = wh.ok("handoff.accept", {"cwd": "/w/app"}, actor="root")
    assert got["handoff"]["id"] == hid
    # And by its exact id too (a second claim conflicts: it is no longer open).
    assert wh.err("handoff.accept", {"handoff_id": hid}, actor="root")["code"] == "handoff_not_open"


def test_an_automatic_handoff_has_no_owner(wh) -> None:
    hid = _session(wh, "a", "2026-12-01T09:00:00.000Z", "2026-12-01T10:00:00.000Z")["handoff_id"]
    assert wh.conn.execute("SELECT owner FROM handoffs WHERE id = ?", (hid,)).fetchone()[0] is None


# -- 3. event order, not arrival order -------------------------------------------------------
def test_a_late_old_session_end_does_not_supersede_newer_work(wh) -> None:
    new = _session(wh, "new", "2026-12-01T10:30:00.000Z", "2026-12-01T11:00:00.000Z")["handoff_id"]
    # The spool drains after an outage: a session that ended at 10:00 arrives last.
    old = _session(wh, "old", "2026-12-01T09:00:00.000Z", "2026-12-01T10:00:00.000Z")["handoff_id"]
    got = _claim(wh, "next")
    assert got["handoff"]["id"] == new
    assert got["superseded"] == [old]  # the old one was an earlier link of the chain
    assert _status(wh, new) == "accepted" and _status(wh, old) == "superseded"
    # The dates shown are the events' own, not arrival.
    assert got["handoff"]["event_at"] == "2026-12-01T11:00:00.000000Z"  # one fixed-width form
    assert got["handoff"]["folded"][0]["event_at"] == "2026-12-01T10:00:00.000000Z"


def test_a_late_old_end_after_newer_work_was_claimed_is_born_superseded(wh) -> None:
    new = _session(wh, "new", "2026-12-01T10:30:00.000Z", "2026-12-01T11:00:00.000Z")["handoff_id"]
    assert _claim(wh, "later")["handoff"]["id"] == new
    old = _session(wh, "old", "2026-12-01T09:00:00.000Z", "2026-12-01T10:00:00.000Z")["handoff_id"]
    assert _status(wh, old) == "superseded"
    assert wh.conn.execute("SELECT superseded_by FROM handoffs WHERE id = ?", (old,)).fetchone()[0] == new
    assert _claim(wh, "next")["handoff"] is None and _open_count(wh) == 0


# -- 10. parallel is not a chain -----------------------------------------------------------------
def test_parallel_sessions_are_delivered_together_not_folded(wh) -> None:
    a = _session(wh, "a", "2026-12-01T09:00:00.000Z", "2026-12-01T10:00:00.000Z")["handoff_id"]
    b = _session(wh, "b", "2026-12-01T09:30:00.000Z", "2026-12-01T10:30:00.000Z")["handoff_id"]
    got = _claim(wh, "next")
    assert got["handoff"]["id"] == b  # the newest by event time leads
    assert got["superseded"] == [] and got["handoff"]["folded"] == []
    assert [p["id"] for p in got["handoff"]["parallel"]] == [a]
    assert "work of a" in got["handoff"]["parallel"][0]["body"]
    assert _status(wh, a) == _status(wh, b) == "accepted"
    # Both were claimed by that session: if it does nothing, it gives both back.
    wh.obs("next", "session-end", "Session end", cwd="/w/app", **PLACE)
    res = wh.ok("session.end", {"session_id": "next", "cwd": "/w/app"}, actor="hook", **PLACE)
    assert sorted(res["returned_handoffs"]) == sorted([a, b])
    assert _status(wh, a) == _status(wh, b) == "open"


def test_a_chain_supersedes_only_its_own_earlier_links(wh) -> None:
    # a → b is a chain (b began after a ended); p ran beside b.
    a = _session(wh, "a", "2026-12-01T08:00:00.000Z", "2026-12-01T09:00:00.000Z")["handoff_id"]
    p = _session(wh, "p", "2026-12-01T09:10:00.000Z", "2026-12-01T10:10:00.000Z")["handoff_id"]
    b = _session(wh, "b", "2026-12-01T09:30:00.000Z", "2026-12-01T10:30:00.000Z")["handoff_id"]
    got = _claim(wh, "next")
    assert got["handoff"]["id"] == b and got["superseded"] == [a]
    assert [x["id"] for x in got["handoff"]["parallel"]] == [p]
    assert _status(wh, a) == "superseded" and _status(wh, p) == "accepted"


# -- 4. child sessions ---------------------------------------------------------------------------
def test_a_child_session_opens_no_handoff_even_when_idle_finalised(wh) -> None:
    parent = _session(wh, "parent", "2026-12-01T09:00:00.000Z", "2026-12-01T10:00:00.000Z")["handoff_id"]
    # The child's later events carry no parent id (OpenCode's session.idle): the session remembers it.
    wh.obs("child", "session-start", "Session start", cwd="/w/app", parent_session_id="parent", **PLACE)
    wh.obs("child", "pre-tool-use", "Read", "tool: Read", cwd="/w/app", **PLACE)
    res = wh.ok("session.end", {"session_id": "child", "cwd": "/w/app", "reason": "idle"}, actor="maintainer",
                **PLACE)
    assert res["handoff_id"] is None and res["path"] is not None  # a page, but nothing to hand on
    assert wh.count("SELECT count(*) FROM handoffs WHERE from_session_id = 'child'") == 0
    assert _status(wh, parent) == "open"


def test_a_child_session_never_claims(wh) -> None:
    hid = _session(wh, "a", "2026-12-01T09:00:00.000Z", "2026-12-01T10:00:00.000Z")["handoff_id"]
    wh.obs("child", "session-start", "Session start", cwd="/w/app", parent_session_id="a2", **PLACE)
    got = _claim(wh, "child", only_new_session=True)
    assert got["handoff"] is None and got["skipped"] == "child_session"
    assert _status(wh, hid) == "open"


# -- 5. only a new session claims ----------------------------------------------------------------
def test_a_start_for_an_open_session_claims_nothing(wh) -> None:
    hid = _session(wh, "a", "2026-12-01T09:00:00.000Z", "2026-12-01T10:00:00.000Z")["handoff_id"]
    wh.obs("mid", "session-start", "Session start", cwd="/w/app", **PLACE)
    wh.obs("mid", "user-prompt", "Prompt: x", "x", cwd="/w/app", **PLACE)
    wh.obs("mid", "session-start", "Session start", cwd="/w/app", **PLACE)  # again, no `source`
    got = _claim(wh, "mid", only_new_session=True)
    assert got["handoff"] is None and got["skipped"] == "session_known"
    assert _status(wh, hid) == "open"
    # A new session (only its start stored so far) claims it.
    wh.obs("fresh", "session-start", "Session start", cwd="/w/app", **PLACE)
    assert _claim(wh, "fresh", only_new_session=True)["handoff"]["id"] == hid


# -- new classes the model-based test found --------------------------------------------------------
def test_an_imported_end_does_not_end_a_session_captured_live(wh) -> None:
    # start · prompt live, then `aimem import` of the same session: live capture wins.
    wh.obs("live", "session-start", "Session start", cwd="/w/app", occurred_at="2026-12-01T09:00:00Z", **PLACE)
    wh.obs("live", "user-prompt", "Prompt: x", "x", cwd="/w/app", occurred_at="2026-12-01T09:00:01Z", **PLACE)
    res = wh.ok("session.end", {"session_id": "live", "cwd": "/w/app", "ended_at": "2026-12-01T09:00:00Z",
                                "historical": True}, **PLACE)
    assert res["ended"] is False and res["skipped"] == "captured_live"
    row = wh.conn.execute("SELECT ended_at FROM sessions WHERE session_id = 'live'").fetchone()
    assert row["ended_at"] is None  # still open: the idle finaliser (or its own end) hands it on
    # The idle finaliser then ends it with a handoff.
    res = wh.ok("session.end", {"session_id": "live", "cwd": "/w/app", "ended_at": "2026-12-01T09:00:01Z",
                                "reason": "idle"}, actor="maintainer", **PLACE)
    assert res["handoff_id"] is not None and _open_count(wh) == 1


def test_event_times_are_stored_in_one_fixed_width_form(wh) -> None:
    # A whole second and a fraction of that second: as text "…:35Z" sorted after "…:35.839Z".
    wh.obs("s", "session-start", "Session start", cwd="/w/app", occurred_at="2026-12-01T09:00:35Z", **PLACE)
    wh.obs("t", "session-start", "Session start", cwd="/w/app", occurred_at="2026-12-01T09:00:35.839+00:00", **PLACE)
    rows = dict(wh.conn.execute("SELECT session_id, last_event_at FROM sessions").fetchall())
    assert rows == {"s": "2026-12-01T09:00:35.000000Z", "t": "2026-12-01T09:00:35.839000Z"}
    # The idle query compares instants: a cutoff later in the same second finds the session.
    from aimem_common.read.sessions import idle_sessions
    wh.conn.execute("UPDATE sessions SET last_event_at = '2026-12-01T09:00:35Z' WHERE session_id = 's'")  # old row
    assert {r["session_id"] for r in idle_sessions(wh.conn, quiet_before="2026-12-01T09:00:35.500000Z")} == {"s"}


def test_a_give_back_never_leaves_two_open_handoffs_of_one_session(wh) -> None:
    # x1 works and ends; x1 is resumed and works again; x2 (new) claims x1's handoff meanwhile;
    # x1 re-ends (a new handoff: the old one is claimed); x2 ends without work and gives back.
    first = _session(wh, "x1", "2026-12-01T09:00:00Z", "2026-12-01T09:10:00Z")["handoff_id"]
    wh.obs("x1", "session-start", "Session start", cwd="/w/app", occurred_at="2026-12-01T09:20:00Z", **PLACE)
    wh.obs("x1", "user-prompt", "Prompt: more", "more", cwd="/w/app", occurred_at="2026-12-01T09:20:01Z", **PLACE)
    wh.obs("x2", "session-start", "Session start", cwd="/w/app", occurred_at="2026-12-01T09:21:00Z", **PLACE)
    assert _claim(wh, "x2", only_new_session=True)["handoff"]["id"] == first
    second = wh.ok("session.end", {"session_id": "x1", "cwd": "/w/app", "ended_at": "2026-12-01T09:22:00Z",
                                   "reason": "idle"}, actor="maintainer", **PLACE)["handoff_id"]
    assert second not in (None, first)
    wh.ok("session.end", {"session_id": "x2", "cwd": "/w/app", "ended_at": "2026-12-01T09:23:00Z",
                          "reason": "idle"}, actor="maintainer", **PLACE)
    rows = wh.conn.execute("SELECT id, status, superseded_by FROM handoffs WHERE from_session_id = 'x1'"
                           " ORDER BY id").fetchall()
    assert [(r["id"], r["status"], r["superseded_by"]) for r in rows] == [
        (first, "superseded", second), (second, "open", None)]


def test_a_claim_never_takes_two_handoffs_of_one_session(wh) -> None:
    # Two open automatic handoffs of one session (what the model's long run reached through a
    # restart, a foreign claim and idle passes): its newest is the head, the older one an
    # earlier link of the same chain, never a "parallel" session.
    old = _session(wh, "s", "2026-12-01T09:00:00.000Z", "2026-12-01T10:00:00.000Z")["handoff_id"]
    wh.conn.execute("INSERT INTO handoffs(workspace_id, project_id, automatic, shared, owner, from_agent,"
                    " from_session_id, cwd, root, title, body, status, created_at, event_at, started_at)"
                    " SELECT workspace_id, project_id, 1, 0, NULL, from_agent, from_session_id, cwd, root,"
                    " 'Continue: later work', 'later', 'open', created_at, '2026-12-01T11:00:00.000000Z',"
                    " started_at FROM handoffs WHERE id = ?", (old,))
    new = wh.conn.execute("SELECT max(id) FROM handoffs").fetchone()[0]
    got = _claim(wh, "next")
    assert got["handoff"]["id"] == new and got["handoff"]["parallel"] == []
    assert got["superseded"] == [old] and _status(wh, old) == "superseded" and _open_count(wh) == 0
