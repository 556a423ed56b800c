"""What a new user met in the web interface's first hour (issue 27): the favicon, terminal
colours in captured text, the database size, purged projects, and what a delete or a
cancel did. A real stack (auth on) seeded through its public APIs."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
import uuid

import httpx
import pytest

pytestmark = [pytest.mark.integration]

CSRF_RE = re.compile(r'name="csrf" value="([0-9a-f]{64})"')


@contextmanager
def root_client(web) -> Iterator[httpx.Client]:
    """A browser-like client logged in with the root token."""
    with httpx.Client(base_url=web.query, timeout=30) as c:
        csrf = CSRF_RE.search(c.get("/web/login").text).group(1)
        r = c.post("/web/login", data={"csrf": csrf, "next": "/web/projects", "token": web.root_token})
        assert r.status_code == 303, r.text
        yield c


def wait_for(fn, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while True:
        value = fn()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_the_favicon_answers_without_credentials_and_every_screen_names_it(web_stack) -> None:
    r = httpx.get(web_stack.query + "/favicon.ico", timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml"), r.text
    assert r.content.startswith(b"<svg")
    with root_client(web_stack) as c:
        assert '<link rel="icon" href="/web/static/favicon.svg"' in c.get("/web/projects").text
        assert c.get("/web/static/favicon.svg").status_code == 200


def test_terminal_escapes_are_not_shown(web_stack) -> None:
    sid = f"ansi-{uuid.uuid4().hex[:6]}"
    web_stack.hook("ansi", sid, "UserPromptSubmit", prompt="run it: \x1b[31mFAILED\x1b[0m tests/\x1b]0;title\x07ok")
    web_stack.page("ansi", "gotchas/colours.md", "# Colours\nThe log said \x1b[1;32mPASSED\x1b[0m twice.")
    with root_client(web_stack) as c:
        timeline = wait_for(lambda: (t := c.get(f"/web/p/default/ansi/sessions/{sid}").text) and "FAILED" in t and t)
        assert "FAILED tests/ok" in timeline and "\x1b" not in timeline and "[31m" not in timeline
        page = c.get("/web/p/default/ansi/page/gotchas/colours.md").text
        assert "The log said PASSED twice." in page and "\x1b" not in page and "[1;32m" not in page


def test_the_database_size_reads_as_a_size(web_stack) -> None:
    with root_client(web_stack) as c:
        status = c.get("/web/status").text
    dd = re.search(r"<dt>Database</dt><dd>([^<]*)</dd>", status).group(1)
    assert re.fullmatch(r"\d+\.\d (KiB|MiB|GiB)", dd), dd


def test_a_purged_project_is_no_longer_listed(web_stack) -> None:
    web_stack.page("purge-me", "concepts/a.md", "# A\nto be purged")
    with root_client(web_stack) as c:
        assert "default / purge-me" in c.get("/web/projects").text
        with web_stack.admin() as a:
            r = a.post("/admin/purge-project", json={"workspace": "default", "project": "purge-me", "confirm": True})
            assert r.status_code == 200, r.text
        assert "purge-me" not in c.get("/web/projects").text


def test_a_project_emptied_by_purges_is_no_longer_listed(web_stack) -> None:
    """Purging a project's only session (and so its only page) leaves the project row: it has
    nothing to show, so the list leaves it out (it was listed with 0 pages)."""
    sid = f"only-{uuid.uuid4().hex[:6]}"
    web_stack.hook("emptied", sid, "UserPromptSubmit", prompt="the only prompt")
    with root_client(web_stack) as c:
        assert wait_for(lambda: "default / emptied" in c.get("/web/projects").text)
        with web_stack.admin() as a:
            r = a.post("/admin/purge-session", json={"workspace": "default", "project": "emptied",
                                                     "session_id": sid, "confirm": True})
            assert r.status_code == 200, r.text
        assert "emptied" not in c.get("/web/projects").text
        assert c.get("/web/p/default/emptied").status_code == 200  # the project itself is still there


def test_a_delete_asks_first_then_says_what_went(web_stack) -> None:
    web_stack.page("del", "concepts/old-idea.md", "# Old idea\nno longer true")
    with root_client(web_stack) as c:
        confirm = c.get("/web/p/default/del/delete/concepts/old-idea.md")
        assert confirm.status_code == 200 and "Delete <code>concepts/old-idea.md</code>?" in confirm.text
        r = c.post("/web/p/default/del/delete/concepts/old-idea.md",
                   data={"csrf": CSRF_RE.search(confirm.text).group(1)})
        assert r.status_code == 303 and "deleted=concepts%2Fold-idea.md" in r.headers["location"]
        after = c.get(r.headers["location"]).text
        assert 'role="status">Deleted concepts/old-idea.md.' in after
        assert 'href="/web/p/default/del/history/concepts/old-idea.md"' in after


def test_a_handoff_cancel_says_it_was_cancelled(web_stack) -> None:
    web_stack.writer_op("handoff.begin", {"body": "pick it up", "title": "flash me", "shared": True}, project="flash")
    api = f"{web_stack.query}/api/v1/workspaces/default/projects/flash/handoffs"
    hid = httpx.get(api, headers={"Authorization": f"Bearer {web_stack.root_token}"}).json()[0]["id"]
    with root_client(web_stack) as c:
        page = c.get("/web/p/default/flash/handoffs").text
        r = c.post(f"/web/p/default/flash/handoffs/{hid}/cancel", data={"csrf": CSRF_RE.search(page).group(1)})
        assert r.status_code == 303
        assert f"Handoff #{hid} cancelled" in c.get(r.headers["location"]).text
