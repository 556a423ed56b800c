"""The profile screen in a real browser (Playwright + Debian's Chromium) against a real
writer + ingress + query: a user lists, adds and removes their own preferences, never sees
another's, hostile text stays inert, an admin picks a user; axe-core finds nothing serious."""

from __future__ import annotations

import re

import httpx
import pytest

from aimem_testing.browser import axe_check, web_login, web_login_root

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

CAROL = ("carol", "carol's long password")
DAVE = ("dave", "dave's long password")
ERIN = ("erin", "erin's long password")  # no grant: no profile
HOSTILE = "<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\"> always use pnpm"
CSRF_RE = re.compile(r'name="csrf" value="([0-9a-f]{64})"')


@pytest.fixture(scope="module")
def web(web_stack):
    web_stack.user(*CAROL, ("default", "app", True))
    web_stack.user(*DAVE, ("default", "app", True))
    web_stack.user(*ERIN)
    return web_stack


def test_a_user_keeps_their_own_profile_and_an_admin_picks_one(browser, web, tmp_path):
    base = web.query
    ctx = browser.new_context(bypass_csp=True)  # only so the test can inject axe-core
    page = ctx.new_page()
    web_login(page, base, *CAROL)
    page.locator("header nav >> text=Profile").click()
    page.wait_for_url(re.compile(r".*/web/profile$"))
    assert page.locator("h1").inner_text() == "Profile"
    assert "No preference yet." in page.locator("main").inner_text()
    for text in ("Answer in British English.", HOSTILE):
        page.fill("#profile-text", text)
        page.locator("form[action='/web/profile/add'] button").click()
        page.wait_for_url(re.compile(r".*/web/profile\?notice=added$"))
    cells = page.locator("td.profile-entry").all_inner_texts()
    assert cells == ["Answer in British English.", HOSTILE]  # shown as text, not markup
    assert page.evaluate("window.__pwned") is None and page.locator("main img").count() == 0
    assert "Preference added" in page.locator("p.notice").inner_text()
    page.screenshot(path=str(tmp_path / "profile.png"), full_page=True)
    axe_check(page, "/web/profile")
    page.locator("button[aria-label^='Remove preference']").first.click()
    page.wait_for_url(re.compile(r".*/web/profile\?notice=removed$"))
    assert page.locator("td.profile-entry").all_inner_texts() == [HOSTILE]
    # A picked user is an admin's view only.
    resp = page.goto(f"{base}/web/profile?user=dave")
    assert resp.status == 403 and "only an admin" in page.locator("main").inner_text()
    ctx.close()

    ctx = browser.new_context()
    page = ctx.new_page()
    web_login(page, base, *DAVE)
    page.goto(f"{base}/web/profile")
    assert page.locator("td.profile-entry").count() == 0 and "pnpm" not in page.content()
    page.fill("#profile-text", "Dave prefers tabs.")
    page.locator("form[action='/web/profile/add'] button").click()
    page.wait_for_url(re.compile(r".*notice=added$"))
    # Removing carol's entry by its id from dave's session: not in dave's profile, nothing removed.
    with httpx.Client(base_url=base, timeout=30) as admin:
        admin.headers["Authorization"] = f"Bearer {web.root_token}"
        carol_entries = admin.get("/admin/profile", params={"user": "carol"}).json()["entries"]
    assert [e["body"] for e in carol_entries] == [HOSTILE]
    csrf = CSRF_RE.search(page.content()).group(1)
    resp = page.request.post(f"{base}/web/profile/remove", form={"csrf": csrf, "entry_id": str(carol_entries[0]["id"])},
                             max_redirects=0)
    assert resp.status == 404
    resp = page.request.post(f"{base}/web/profile/add", form={"csrf": "0" * 64, "text": "forged"}, max_redirects=0)
    assert resp.status == 403  # a wrong CSRF token changes nothing
    resp = page.request.post(f"{base}/web/profile/add", form={"csrf": csrf, "text": "t" * 600}, max_redirects=0)
    assert resp.status == 400 and "a preference is at most 500 characters; this one has 600" in resp.text()
    assert "payload" not in resp.text()  # the form's words, not the writer op's
    ctx.close()

    ctx = browser.new_context()
    page = ctx.new_page()
    web_login(page, base, *ERIN)
    resp = page.goto(f"{base}/web/profile")
    assert resp.status == 403 and "no grant, so no profile memory" in page.locator("main").inner_text()
    ctx.close()

    ctx = browser.new_context(bypass_csp=True)
    page = ctx.new_page()
    web_login_root(page, base, web.root_token)
    page.goto(f"{base}/web/profile")
    page.select_option("#profile-user", "carol")
    page.locator("form[action='/web/profile'] button").click()
    page.wait_for_url(re.compile(r".*/web/profile\?user=carol$"))
    assert page.locator("h1").inner_text() == "Profile of carol"
    assert page.locator("td.profile-entry").all_inner_texts() == [HOSTILE]
    assert page.evaluate("window.__pwned") is None
    axe_check(page, "/web/profile?user=carol")
    page.fill("#profile-text", "Carol reviews on Fridays.")
    page.locator("form[action='/web/profile/add'] button").click()
    page.wait_for_url(re.compile(r".*/web/profile\?user=carol&notice=added$"))
    assert page.locator("td.profile-entry").all_inner_texts() == [HOSTILE, "Carol reviews on Fridays."]
    page.locator("button[aria-label^='Remove preference']").first.click()
    page.wait_for_url(re.compile(r".*user=carol&notice=removed$"))
    assert page.locator("td.profile-entry").all_inner_texts() == ["Carol reviews on Fridays."]
    ctx.close()

    with httpx.Client(base_url=base, timeout=30, headers={"Authorization": f"Bearer {web.root_token}"}) as admin:
        dave = admin.get("/admin/profile", params={"user": "dave"}).json()["entries"]
        carol = admin.get("/admin/profile", params={"user": "carol"}).json()["entries"]
    assert [e["body"] for e in dave] == ["Dave prefers tabs."]
    assert [e["body"] for e in carol] == ["Carol reviews on Fridays."]
