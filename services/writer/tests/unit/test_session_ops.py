"""observation.append and session.end: sessions, ledger, summary page, automatic handoff."""

from __future__ import annotations

import json


def tool_body(tool: str, inp: dict, out: str | None = None) -> str:
    body = f"tool: {tool}\ninput: {json.dumps(inp)}"
    return body + (f"\noutput: {out}" if out is not None else "")


def test_observation_append_stores_session_and_ledger(wh) -> None:
    r = wh.obs("s1", "session-start", "Session start", cwd="/w/app", occurred_at="2026-03-04T05:06:07Z")
    assert r["session_id"] == "s1" and r["observation_id"] > 0
    wh.obs("s1", "user-prompt", "Prompt: fix the flaky test", "fix the flaky test", cwd="/w/app")
    row = wh.conn.execute("SELECT * FROM sessions WHERE session_id = 's1'").fetchone()
    assert row["observation_count"] == 2 and row["started_at"] == "2026-03-04T05:06:07.000000Z" and row["cwd"] == "/w/app"
    assert wh.count("SELECT count(*) FROM observations_fts WHERE observations_fts MATCH 'flaky'") == 1
    ledger = wh.scope_dir() / "log-2026-03.md"
    assert ledger.read_text().startswith("## [2026-03-04T05:06:07Z] session-start · claude-code · session s1")
    wh.applier.checkpoint()
    assert not any(p.endswith(".md") and "/log-" in p for p in wh.wiki.head_tree_paths())
    assert ".gitignore" in wh.wiki.head_tree_paths()


def test_unsanitized_observation_is_refused(wh) -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    for field in ("body", "title", "cwd"):
        payload = {"session_id": "s", "kind": "user-prompt", "sanitized": True, field: f"token {secret}"}
        err = wh.err("observation.append", payload)
        assert err["code"] == "unsanitized" and err["data"]["field"] == field
    assert wh.err("observation.append", {"session_id": "s", "kind": "user-prompt", "sanitized": False,
                                         "body": "x"})["code"] == "invalid_payload"
    assert wh.count("SELECT count(*) FROM observations") == 0
    assert wh.count("SELECT count(*) FROM projects") == 0


def test_observation_bad_inputs(wh) -> None:
    assert wh.err("observation.append", {"session_id": "s", "kind": "nope", "sanitized": True})["code"] == \
        "invalid_payload"
    assert wh.err("observation.append", {"session_id": "s", "kind": "stop", "sanitized": True,
                                         "body": "x" * (16 * 1024 + 1)})["code"] == "invalid_payload"
    assert wh.err("observation.append", {"session_id": "s", "kind": "stop", "sanitized": True},
                  pj=None)["code"] == "missing_scope"


def _session(wh, sid="s1", cwd="/w/app") -> None:
    wh.obs(sid, "session-start", "Session start", cwd=cwd)
    wh.obs(sid, "user-prompt", "Prompt: make retries idempotent", "make retries idempotent in the zebra queue",
           cwd=cwd)
    wh.obs(sid, "pre-tool-use", "Bash: pytest -x", tool_body("Bash", {"command": "pytest -x"}), tool_name="Bash")
    wh.obs(sid, "post-tool-use", "Bash: pytest -x",
           tool_body("Bash", {"command": "pytest -x"}, "FAILED test_q.py - AssertionError: boom"), tool_name="Bash")
    wh.obs(sid, "post-tool-use", "Edit: src/q.py", tool_body("Edit", {"file_path": "/w/app/src/q.py"}, "ok"),
           tool_name="Edit")
    wh.obs(sid, "stop", "Stop: done", "Retries now carry an idempotency key.")
    wh.obs(sid, "session-end", "Session end")


def test_session_end_writes_summary_page_handoff_and_watermark(wh) -> None:
    _session(wh)
    res = wh.ok("session.end", {"session_id": "s1", "agent": "claude-code", "cwd": "/w/app"})
    assert res["changed"] and res["observation_count"] == 7 and res["path"] == "sessions/s1.md"
    page = wh.conn.execute("SELECT * FROM pages WHERE id = ?", (res["page_id"],)).fetchone()
    assert page["session_id"] == "s1" and page["kind"] == "session" and page["tier"] == "episodic"
    body = page["body"]
    for needle in ("## Task\n\nmake retries idempotent in the zebra queue", "`pytest -x` — failed",
                   "## Files changed\n\n- src/q.py", "AssertionError: boom",
                   "## Final message\n\nRetries now carry an idempotency key."):
        assert needle in body, needle
    assert "/w/app/src/q.py" not in body  # paths relative to the repository
    text = wh.page_file("sessions/s1.md").read_text()
    assert len(text.encode()) <= 16 * 1024 and "session_id: s1" in text and "ended_at:" in text
    sess = wh.conn.execute("SELECT * FROM sessions WHERE session_id = 's1'").fetchone()
    assert sess["ended_observation_count"] == 7 and sess["summary_page_id"] == res["page_id"] and sess["ended_at"]
    h = wh.conn.execute("SELECT * FROM handoffs WHERE id = ?", (res["handoff_id"],)).fetchone()
    assert h["automatic"] == 1 and h["cwd"] == "/w/app" and h["status"] == "open" and "sessions/s1.md" in h["body"]
    assert wh.count("SELECT count(*) FROM page_evidence WHERE source_kind='session' AND source_id='s1'") == 1
    assert wh.count("SELECT count(*) FROM session_consolidation_jobs WHERE generation = 7") == 1
    assert "session.ended" in [e.kind for e in wh.events]
    assert "session-end · claude-code · session s1" in next(wh.scope_dir().glob("log-*.md")).read_text()


def test_re_end_only_when_count_advanced(wh) -> None:
    _session(wh)
    first = wh.ok("session.end", {"session_id": "s1"})
    again = wh.ok("session.end", {"session_id": "s1"})
    assert again["changed"] is False and again["page_id"] == first["page_id"]
    assert wh.count("SELECT count(*) FROM pages WHERE path = 'sessions/s1.md'") == 1
    wh.obs("s1", "user-prompt", "Prompt: one more thing", "also document the ostrich flag")
    third = wh.ok("session.end", {"session_id": "s1"})
    assert third["changed"] and third["observation_count"] == 8 and third["page_id"] != first["page_id"]
    assert "ostrich" in wh.page_file("sessions/s1.md").read_text()
    assert third["handoff_id"] == first["handoff_id"]  # the open automatic handoff is refreshed
    assert wh.count("SELECT count(*) FROM handoffs") == 1


def test_start_end_only_session_creates_no_page_and_no_handoff(wh) -> None:
    wh.obs("s2", "session-start", "Session start", cwd="/w/app")
    wh.obs("s2", "session-end", "Session end")
    res = wh.ok("session.end", {"session_id": "s2"})
    assert res["page_id"] is None and res["handoff_id"] is None and res["changed"]
    assert wh.count("SELECT count(*) FROM pages") == 0 and wh.count("SELECT count(*) FROM handoffs") == 0
    assert wh.count("SELECT ended_observation_count FROM sessions WHERE session_id='s2'") == 2


def test_page_paths_are_relative_to_the_repository_root(wh) -> None:
    """A session in a subdirectory: files relative to the repository root, not to its cwd."""
    cwd, root = "/w/app/api", "/w/app"
    wh.obs("s3", "user-prompt", "Prompt: document retries", "document retries", cwd=cwd, root=root)
    wh.obs("s3", "post-tool-use", "Write: retry.md", tool_body("Write", {"file_path": "/w/app/api/retry.md"}, "ok"),
           tool_name="Write", cwd=cwd, root=root)
    res = wh.ok("session.end", {"session_id": "s3", "cwd": cwd}, root=root)
    body = wh.conn.execute("SELECT body FROM pages WHERE id = ?", (res["page_id"],)).fetchone()["body"]
    assert "## Files changed\n\n- api/retry.md" in body and "`api`" in body
    h = wh.conn.execute("SELECT root, body FROM handoffs WHERE id = ?", (res["handoff_id"],)).fetchone()
    assert h["root"] == root and "api/retry.md" in h["body"]


def test_a_start_carrying_the_initial_prompt_is_real_work(wh) -> None:
    """Copilot CLI sends its first prompt on the session start: a page and a handoff."""
    wh.obs("s4", "session-start", "Session start", "fix the flaky zebra test", cwd="/w/app")
    wh.obs("s4", "session-end", "Session end")
    res = wh.ok("session.end", {"session_id": "s4"})
    assert res["page_id"] is not None and res["handoff_id"] is not None


def test_session_end_bad_inputs(wh) -> None:
    assert wh.err("session.end", {"session_id": "ghost"})["code"] == "session_not_found"
    assert wh.err("session.end", {"session_id": ""})["code"] == "invalid_payload"
    assert wh.err("session.end", {"session_id": "s", "extra": 1})["code"] == "invalid_payload"


def test_summary_page_is_bounded(wh) -> None:
    wh.obs("big", "session-start", "Session start", cwd="/w/app")
    for i in range(60):
        wh.obs("big", "user-prompt", f"Prompt {i}", f"prompt {i} " + "lorem ipsum " * 1300)
        wh.obs("big", "post-tool-use", "Bash", tool_body("Bash", {"command": f"make target{i} " + "x" * 400},
                                                         "error: " + "y" * 3000), tool_name="Bash")
    wh.obs("big", "stop", "Stop", "final words " * 1000)
    res = wh.ok("session.end", {"session_id": "big"})
    text = wh.page_file(res["path"]).read_text()
    assert len(text.encode()) <= 16 * 1024
    assert "prompt 0" in text and "more prompts; the last: prompt 59" in text and "## Final message" in text


def test_sessions_are_per_project(wh) -> None:
    _session(wh, "same", cwd="/w/app")
    wh.obs("same", "user-prompt", "Prompt: elsewhere", "lib work only", pj="lib")
    a = wh.ok("session.end", {"session_id": "same"})
    b = wh.ok("session.end", {"session_id": "same"}, pj="lib")
    assert a["observation_count"] == 7 and b["observation_count"] == 1
    assert "lib work only" not in wh.page_file("sessions/same.md").read_text()
    assert "lib work only" in wh.page_file("sessions/same.md", pj="lib").read_text()


def test_imported_observations_and_historical_end(wh) -> None:
    """An import: the page with the transcript's times, no handoff; a hook-captured session
    is never doubled by its transcript; a transcript-first session still takes live events."""
    for i, kind in enumerate(("user-prompt", "post-tool-use", "stop")):
        wh.obs("old", kind, f"{kind} {i}", f"body {i}", cwd="/w/app", imported=True,
               occurred_at=f"2026-01-05T10:00:0{i}Z", tool_name="Bash" if kind == "post-tool-use" else None)
    res = wh.ok("session.end", {"session_id": "old", "cwd": "/w/app", "ended_at": "2026-01-05T10:00:09Z",
                                "historical": True})
    assert res["changed"] and res["handoff_id"] is None and res["page_id"]
    row = wh.conn.execute("SELECT * FROM sessions WHERE session_id = 'old'").fetchone()
    assert (row["started_at"], row["ended_at"]) == ("2026-01-05T10:00:00.000000Z", "2026-01-05T10:00:09.000000Z")
    assert (row["observation_count"], row["imported_count"]) == (3, 3)
    fm = json.loads(wh.conn.execute("SELECT frontmatter FROM pages WHERE id = ?", (res["page_id"],)).fetchone()[0])
    assert fm["imported"] is True
    assert wh.count("SELECT count(*) FROM handoffs") == 0

    wh.obs("live", "user-prompt", "Prompt: x", "x", cwd="/w/app")  # captured by hooks
    skipped = wh.ok("observation.append", {"session_id": "live", "kind": "user-prompt", "title": "Prompt: x",
                                           "body": "x", "sanitized": True, "imported": True})
    assert skipped["skipped"] == "captured_live" and skipped["observation_id"] is None
    assert wh.count("SELECT count(*) FROM observations WHERE session_id = 'live'") == 1
    wh.obs("old", "user-prompt", "Prompt: resumed live", "resumed", cwd="/w/app")  # hooks after an import
    assert wh.count("SELECT observation_count - imported_count FROM sessions WHERE session_id = 'old'") == 1


def test_historical_end_stamps_a_restored_session_page_written_before_it(wh, tmp_path) -> None:
    """A restore's ``/admin/pages`` (live lane) may write a session page before that session's
    historical end (bulk lane) with the very same text: the end still stamps ``pages.session_id``
    (the turns stream folds the session's observations onto its page through it)."""
    def replay(h) -> dict:
        for i, kind in enumerate(("user-prompt", "post-tool-use", "stop")):
            h.obs("rs", kind, f"{kind} {i}", f"retry backoff {i}", cwd="/w/app", imported=True,
                  occurred_at=f"2026-01-05T10:00:0{i}Z", tool_name="Bash" if kind == "post-tool-use" else None)
        return h.ok("session.end", {"session_id": "rs", "cwd": "/w/app", "ended_at": "2026-01-05T10:00:09Z",
                                    "historical": True})

    origin, restored = type(wh)(tmp_path / "origin"), wh
    try:
        page = origin.conn.execute("SELECT path, title, body, frontmatter FROM pages WHERE id = ?",
                                   (replay(origin)["page_id"],)).fetchone()
        fm = {k: v for k, v in json.loads(page["frontmatter"]).items() if k not in ("created_at", "updated_at")}
        restored.ok("page.write", {"path": page["path"], "title": page["title"], "body": page["body"],
                                   "frontmatter": fm})
        replay(restored)
        rows = restored.conn.execute("SELECT session_id FROM pages WHERE path = ?", (page["path"],)).fetchall()
        assert [r["session_id"] for r in rows] == ["rs"]  # one version, stamped
    finally:
        origin.close()
