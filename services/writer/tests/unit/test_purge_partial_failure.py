"""A purge whose files cannot all be removed says so (``partial_failure``) and never holds
the writer: the rows stay purged, the reply lists ``files_failed``, the events carry the same
fields (mirrors and other observers learn it), and the next command is applied as usual.

The failure is real: the project's wiki directory is bind-mounted read-only, so removing
its files fails with EROFS as it would on a read-only or foreign mount (needs root; skipped
where ``mount`` is not allowed)."""

from __future__ import annotations

import json
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def read_only(path: Path):
    """Bind-mount ``path`` read-only over itself for the block (unmounted after)."""
    mounted = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {mounted.stderr.decode().strip()}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], capture_output=True)
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {ro.stderr.decode().strip()}")
        yield
    finally:
        subprocess.run(["umount", str(path)], check=True)


def _session_with_page(wh, sid: str) -> None:
    """A session with real work, ended: the writer writes its ``sessions/<id>.md`` page."""
    wh.obs(sid, "session-start", "Session start", cwd="/w/app")
    wh.obs(sid, "user-prompt", "Prompt: rotate the key", "rotate the zanzibar key", cwd="/w/app")
    wh.obs(sid, "post-tool-use", "Bash: make rotate", json.dumps({"command": "make rotate", "out": "ok"}),
           tool_name="Bash")
    wh.obs(sid, "stop", "Stop: done", "The key is rotated.")
    wh.obs(sid, "session-end", "Session end")
    wh.ok("session.end", {"session_id": sid, "cwd": "/w/app"})


def test_project_purge_with_files_it_cannot_remove_reports_partial_failure(wh) -> None:
    wh.ok("page.write", {"path": "concepts/keep.md", "body": "# Keep\nsome text"})
    sessions = wh.scope_dir() / "sessions"
    _session_with_page(wh, "s1")
    assert sessions.is_dir()
    project_dir = wh.scope_dir()
    rel = f"{project_dir.parent.name}/{project_dir.name}"
    with read_only(sessions):
        res = wh.ok("project.purge", {})
    assert res["partial_failure"] is True
    assert res["files_failed"] == [{"file": rel, "error": "Read-only file system"}]
    assert res["files_deleted"] == []
    assert res["sessions_deleted"] == 1 and res["pages_deleted"] == 2  # the rows are gone all the same
    assert wh.count("SELECT count(*) FROM pages") == 0 and wh.count("SELECT count(*) FROM projects") == 0
    ev = [e for e in wh.events if e.kind == "project.purged"][-1]
    assert ev.data["partial_failure"] is True and ev.data["files_failed"] == res["files_failed"]
    # Not a store fault: nothing is owed, the writer is not held, the next command applies.
    assert not wh.applier.outbox_owed and wh.count("SELECT count(*) FROM wiki_outbox") == 0
    assert wh.ok("page.write", {"path": "notes/after.md", "body": "after"}, pj="other")["page_id"]
    assert (sessions / "s1.md").exists()  # the file that could not go is still there, as reported


def test_session_purge_partial_failure_names_the_page_left(wh) -> None:
    _session_with_page(wh, "s1")
    sessions = wh.scope_dir() / "sessions"
    with read_only(sessions):
        res = wh.ok("session.purge", {"session_id": "s1"})
    assert res["partial_failure"] is True and res["files_deleted"] == []
    assert [f["file"].rsplit("/", 2)[-2:] for f in res["files_failed"]] == [["sessions", "s1.md"]]
    assert wh.count("SELECT count(*) FROM sessions") == 0


def test_a_clean_purge_has_no_partial_failure(wh) -> None:
    _session_with_page(wh, "s1")
    res = wh.ok("session.purge", {"session_id": "s1"})
    assert "partial_failure" not in res and res["files_failed"] == [] and res["files_deleted"] == ["sessions/s1.md"]
    ev = [e for e in wh.events if e.kind == "session.purged"][-1]
    assert "partial_failure" not in ev.data


def test_a_resent_purge_is_answered_with_its_partial_failure(wh) -> None:
    """The same purge sent again (its idempotency key) gets the original outcome, files_failed
    included — not the reply stored before the files were touched."""
    _session_with_page(wh, "s1")
    sessions = wh.scope_dir() / "sessions"
    with read_only(sessions):
        first = wh.ok("session.purge", {"session_id": "s1"}, key="purge-s1")
    assert first["partial_failure"] is True
    again = wh.run("session.purge", {"session_id": "s1"}, key="purge-s1")
    assert again["ok"] and again["duplicate"] is True
    assert again["result"]["partial_failure"] is True
    assert again["result"]["files_failed"] == first["files_failed"] and again["result"]["files_deleted"] == []
    assert (sessions / "s1.md").exists()
