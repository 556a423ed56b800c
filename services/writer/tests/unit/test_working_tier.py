"""The working tier lives for the current session only: a session's end drops that session's
working pages and the project's working pages that name no session (in the end's
transaction), and nothing else."""

from __future__ import annotations

import json


def _work(wh, sid: str) -> None:
    wh.obs(sid, "session-start", "Session start", cwd="/w/app")
    wh.obs(sid, "user-prompt", "Prompt: fix the cache", "fix the cache", cwd="/w/app")
    wh.obs(sid, "post-tool-use", "Bash: make", json.dumps({"command": "make", "out": "ok"}), tool_name="Bash")


def _page(wh, path: str, **fm) -> None:
    wh.ok("page.write", {"path": path, "body": f"# {path}\nscratch", "frontmatter": fm})


def test_session_end_drops_its_working_pages_and_unowned_ones(wh) -> None:
    _work(wh, "s1")
    _work(wh, "s2")
    _page(wh, "notes/scratch-s1.md", tier="working", session_id="s1")
    _page(wh, "notes/scratch-s2.md", tier="working", session_id="s2")
    _page(wh, "notes/unowned.md", tier="working")  # names no session: lasts to the next end
    _page(wh, "notes/kept.md", session_id="s1")  # episodic, not working
    end = wh.ok("session.end", {"session_id": "s1", "cwd": "/w/app"})
    assert end["working_dropped"] == ["notes/scratch-s1.md", "notes/unowned.md"]
    live = {r[0] for r in wh.conn.execute("SELECT path FROM pages WHERE is_latest = 1 AND path LIKE 'notes/%'")}
    assert live == {"notes/scratch-s2.md", "notes/kept.md"}
    assert not wh.page_file("notes/unowned.md").exists()
    assert not wh.page_file("notes/scratch-s1.md").exists() and wh.page_file("notes/scratch-s2.md").exists()
    assert wh.count("SELECT count(*) FROM pages WHERE path = 'notes/scratch-s1.md' AND retired_reason = 'deleted'") == 1
    assert wh.count("SELECT count(*) FROM observations WHERE session_id = 's1'") == 3  # kept for forensics
    ev = [e for e in wh.events if e.kind == "page.changed" and e.data.get("path") == "notes/scratch-s1.md"]
    assert ev and ev[-1].data["action"] == "deleted"


def test_an_imported_end_drops_nothing(wh) -> None:
    _work(wh, "old")
    _page(wh, "notes/scratch-old.md", tier="working", session_id="old")
    end = wh.ok("session.end", {"session_id": "old", "cwd": "/w/app", "historical": True})
    assert end.get("working_dropped", []) == []
    assert wh.page_file("notes/scratch-old.md").exists()


def test_an_unowned_working_page_lasts_until_the_next_session_end_in_its_project(wh) -> None:
    _work(wh, "s1")
    _work(wh, "t1")
    wh.obs("o1", "session-start", "Session start", pj="other")
    _page(wh, "notes/draft.md", tier="working", session_id="")  # an empty session id names none
    wh.ok("page.write", {"path": "notes/elsewhere.md", "body": "x", "frontmatter": {"tier": "working"}}, pj="other")
    _page(wh, "notes/episodic.md")  # no tier: not working, never dropped by an end
    assert wh.ok("session.end", {"session_id": "o1"}, pj="other")["working_dropped"] == ["notes/elsewhere.md"]
    assert wh.page_file("notes/draft.md").exists()  # another project's end leaves it
    assert wh.ok("session.end", {"session_id": "s1", "cwd": "/w/app"})["working_dropped"] == ["notes/draft.md"]
    _page(wh, "notes/draft2.md", tier="working")  # written after that end: lasts to the next one
    assert wh.page_file("notes/draft2.md").exists()
    assert wh.ok("session.end", {"session_id": "t1", "cwd": "/w/app"})["working_dropped"] == ["notes/draft2.md"]
    assert wh.page_file("notes/episodic.md").exists()
