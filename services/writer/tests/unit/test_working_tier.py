"""The working tier lives for its session only: a session's end drops that session's working
pages (in the end's transaction), and nothing else."""

from __future__ import annotations

import json


def _work(wh, sid: str) -> None:
    wh.obs(sid, "session-start", "Session start", cwd="/w/app")
    wh.obs(sid, "user-prompt", "Prompt: fix the cache", "fix the cache", cwd="/w/app")
    wh.obs(sid, "post-tool-use", "Bash: make", json.dumps({"command": "make", "out": "ok"}), tool_name="Bash")


def _page(wh, path: str, **fm) -> None:
    wh.ok("page.write", {"path": path, "body": f"# {path}\nscratch", "frontmatter": fm})


def test_session_end_drops_its_working_pages_only(wh) -> None:
    _work(wh, "s1")
    _work(wh, "s2")
    _page(wh, "notes/scratch-s1.md", tier="working", session_id="s1")
    _page(wh, "notes/scratch-s2.md", tier="working", session_id="s2")
    _page(wh, "notes/unowned.md", tier="working")  # names no session: left alone
    _page(wh, "notes/kept.md", session_id="s1")  # episodic, not working
    end = wh.ok("session.end", {"session_id": "s1", "cwd": "/w/app"})
    assert end["working_dropped"] == ["notes/scratch-s1.md"]
    live = {r[0] for r in wh.conn.execute("SELECT path FROM pages WHERE is_latest = 1 AND path LIKE 'notes/%'")}
    assert live == {"notes/scratch-s2.md", "notes/unowned.md", "notes/kept.md"}
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
