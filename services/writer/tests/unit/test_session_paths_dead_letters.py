"""Nothing acknowledged may be lost: one session page per distinct session id, and a
dead letter whose replay fails again stays visible (the real batch path, no NATS)."""

from __future__ import annotations

from aimem_common.bus import REPLAY_HEADER
from aimem_common.commands import Envelope, ScopeRef

from aimem_writer.commands import Incoming
from aimem_common.models import windows_unsafe

from aimem_writer.ops.sessions import session_slug


def _work(wh, sid: str, prompt: str) -> dict:
    wh.obs(sid, "user-prompt", f"Prompt: {prompt}", prompt, cwd="/w/app")
    return wh.ok("session.end", {"session_id": sid, "agent": "claude-code", "cwd": "/w/app"})


def test_a_safe_session_id_keeps_its_path() -> None:
    for sid in ("s1", "0b1e2c3d-4f5a-6b7c-8d9e-0f1a2b3c4d5e", "ses_01JX.abc", "a-b"):
        assert session_slug(sid) == sid


def test_a_session_id_windows_cannot_name_gets_a_hashed_path(wh) -> None:
    """The wiki is a git repository a Windows user may clone: no session page is named like a
    device (``CON``, ``nul``, ``COM1``, ``con.x``: the name before the first dot counts)."""
    for sid in ("CON", "nul", "COM1", "con.x", "Aux", "LPT9"):
        stem = session_slug(sid)
        assert stem != sid and stem.startswith("session-") and not windows_unsafe(stem + ".md"), (sid, stem)
    assert _work(wh, "CON", "device-named session")["path"] == f"sessions/{session_slug('CON')}.md"
    assert session_slug("console") == "console" and session_slug("LPT10") == "LPT10"  # not device names


def test_distinct_session_ids_get_distinct_pages(wh) -> None:
    ids = ["a-b", "a b", "a\nb", "a/b", "../../etc/passwd", "etc-passwd", ".", "-a-b-", "A" * 256]
    paths = {sid: _work(wh, sid, f"task of {sid!r}")["path"] for sid in ids}
    assert len(set(paths.values())) == len(ids), paths
    assert paths["a-b"] == "sessions/a-b.md" and paths["etc-passwd"] == "sessions/etc-passwd.md"
    for sid, path in paths.items():
        assert path.startswith("sessions/") and path.count("/") == 1 and ".." not in path, path
        page = wh.conn.execute("SELECT session_id, body FROM pages WHERE path = ? AND is_latest = 1",
                               (path,)).fetchone()
        assert page["session_id"] == sid and f"task of {sid!r}" in page["body"], (sid, path)
        assert wh.count("SELECT count(*) FROM pages WHERE path = ?", path) == 1  # never superseded by another id
    # stable: the same id always gets the same path (a re-end rewrites its own page)
    again = _work(wh, "a b", "more work")
    assert again["path"] == paths["a b"] and again["changed"]
    assert wh.count("SELECT count(*) FROM pages WHERE path = ?", paths["a b"]) == 2


def test_an_observation_stored_with_nul_still_ends_its_session(wh) -> None:
    """Rows stored before ingress removed NUL: the session ends, its page and handoff without it."""
    wh.obs("old", "user-prompt", "Prompt: fix a\x00b", "fix a\x00b", cwd="/w/app")
    wh.obs("old", "stop", "Stop", "done\x00")
    res = wh.ok("session.end", {"session_id": "old", "agent": "claude-code", "cwd": "/w/app"})
    assert res["path"] == "sessions/old.md" and res["handoff_id"]
    body = wh.conn.execute("SELECT body FROM pages WHERE id = ?", (res["page_id"],)).fetchone()[0]
    assert "fix ab" in body and "\x00" not in body
    handoff = wh.conn.execute("SELECT title, body FROM handoffs WHERE id = ?", (res["handoff_id"],)).fetchone()
    assert "\x00" not in handoff["title"] + handoff["body"]
    assert wh.count("SELECT count(*) FROM dead_letters") == 0


def test_a_page_written_under_the_old_stem_is_retired_on_the_next_end(wh) -> None:
    """A session whose id is no safe stem and whose page predates the hash: its next end writes
    the hashed path and retires the old page (history kept); another session's page is kept."""
    first = _work(wh, "a b", "first part")
    # as the old writer left it: the page at the unhashed stem, the session's summary pointing there
    wh.ok("page.write", {"path": "sessions/a-b.md", "body": "old digest", "frontmatter": {"session_id": "a b"}})
    old_id = wh.conn.execute("SELECT id FROM pages WHERE path = 'sessions/a-b.md' AND is_latest = 1").fetchone()[0]
    wh.conn.execute("UPDATE pages SET session_id = 'a b' WHERE id = ?", (old_id,))
    wh.conn.execute("UPDATE sessions SET summary_page_id = ? WHERE session_id = 'a b'", (old_id,))
    wh.conn.commit()
    again = _work(wh, "a b", "second part")
    assert again["path"] == first["path"] != "sessions/a-b.md"
    assert wh.count("SELECT count(*) FROM pages WHERE path = 'sessions/a-b.md' AND is_latest = 1") == 0
    assert wh.count("SELECT count(*) FROM pages WHERE session_id = 'a b' AND is_latest = 1") == 1
    # the old collision: "a b"'s summary is the old version, and the safe id "a-b" wrote over
    # sessions/a-b.md since; "a b" ending again leaves that page to "a-b"
    wh.conn.execute("UPDATE sessions SET summary_page_id = ? WHERE session_id = 'a b'", (old_id,))
    wh.conn.commit()
    _work(wh, "a-b", "the other session")
    _work(wh, "a b", "third part")
    assert wh.count("SELECT count(*) FROM pages WHERE path = 'sessions/a-b.md' AND is_latest = 1") == 1


def _doomed() -> Envelope:
    """A command that fails on every delivery, nobody waiting for its answer."""
    return Envelope(op="page.write", payload={"path": "concepts/x.md", "body": "a\x00b"},
                    scope=ScopeRef(workspace="default", project="app"), actor="tester")


def _open_dead_letters(wh) -> list:
    return wh.conn.execute("SELECT * FROM dead_letters WHERE replayed_at IS NULL ORDER BY id").fetchall()


def test_a_replay_that_fails_again_stays_an_open_dead_letter(wh) -> None:
    env = _doomed()
    data = env.model_dump_json().encode()
    wh.applier.apply([Incoming(data)])
    [dead] = _open_dead_letters(wh)
    assert dead["error_code"] == "invalid_payload"
    # /admin/dead-letters/replay: the command again (marked as a replay of its row), then the resolve
    wh.applier.apply([Incoming(data, {REPLAY_HEADER: str(dead["id"])})])
    assert wh.ok("dead_letter.resolve", {"ids": [dead["id"]]})["resolved"] == [dead["id"]]
    [again] = _open_dead_letters(wh)
    assert again["id"] != dead["id"] and again["cmd_id"] == env.cmd_id and again["error_code"] == "invalid_payload"
    # a redelivery of that replay (a bundle re-sent for a sibling's sake) adds no third row
    wh.applier.apply([Incoming(data, {REPLAY_HEADER: str(dead["id"])})])
    assert [r["id"] for r in _open_dead_letters(wh)] == [again["id"]]
    # replayed once more, after the resolve this time: still visible
    wh.ok("dead_letter.resolve", {"ids": [again["id"]]})
    wh.applier.apply([Incoming(data, {REPLAY_HEADER: str(again["id"])})])
    assert len(_open_dead_letters(wh)) == 1


def test_a_replay_that_succeeds_leaves_nothing_open(wh, patch_handler) -> None:
    env = Envelope(op="page.write", payload={"path": "concepts/y.md", "body": "fine"},
                   scope=ScopeRef(workspace="default", project="app"), actor="tester")
    data = env.model_dump_json().encode()

    def broken(tx, env, cmd):
        raise ValueError("a bug, fixed before the replay")

    original = patch_handler("page.write", broken)
    wh.applier.apply([Incoming(data)])
    [dead] = _open_dead_letters(wh)
    patch_handler("page.write", original)
    wh.applier.apply([Incoming(data, {REPLAY_HEADER: str(dead["id"])})])
    wh.ok("dead_letter.resolve", {"ids": [dead["id"]]})
    assert _open_dead_letters(wh) == []
    assert wh.count("SELECT count(*) FROM pages WHERE path = 'concepts/y.md'") == 1
