"""The web interface over plain HTTP: login, cookies, CSRF, rate limit, grants, errors.

A real writer, ingress and query (auth on) per test; every change goes through the writer.
"""

from __future__ import annotations

import re
import time

import httpx
import pytest

pytestmark = [pytest.mark.integration]

CSRF_RE = re.compile(r'name="csrf" value="([0-9a-f]{64})"')


def csrf_of(html: str) -> str:
    m = CSRF_RE.search(html)
    assert m, "no csrf field on the page"
    return m.group(1)


def login(client: httpx.Client, **fields) -> httpx.Response:
    csrf = csrf_of(client.get("/web/login").text)
    return client.post("/web/login", data={"csrf": csrf, "next": "/web/projects", **fields})


@pytest.fixture(scope="module")
def web(web_stack):
    """One stack for the module; tests that lock, delete or re-password a user have their own."""
    web_stack.user("ann", "correct horse battery", ("default", "app", True))
    web_stack.user("bob", "bob's long password", ("default", "infra", False))
    web_stack.user("carl", "carl's long password", ("default", "app", False))
    web_stack.user("dora", "dora's long password", ("default", "app", False))
    web_stack.user("eve", "eve's long password", ("default", "app", False))
    # gil reads app and is never locked out (carl is, by the rate-limit test, for login_window_s)
    web_stack.user("gil", "gil's long password", ("default", "app", False))
    web_stack.page("app", "concepts/retry.md", "# Retry\nKeep the id. See [[decisions/keep-id]].")
    web_stack.page("app", "decisions/keep-id.md", "# Keep the id\nRetries keep the event id.")
    web_stack.page("infra", "runbooks/nats.md", "# NATS\nRestart with the store kept.")
    return web_stack


def client(web) -> httpx.Client:
    return httpx.Client(base_url=web.query, timeout=30)


def test_password_login_sets_a_strict_httponly_cookie_and_grants_apply(web):
    with client(web) as c:
        assert c.get("/web/projects").headers["location"].startswith("/web/login?next=")
        r = login(c, name="ann", password="correct horse battery")
        assert r.status_code == 303 and r.headers["location"] == "/web/projects"
        cookie = r.headers["set-cookie"]
        assert "aimem_session=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert "Path=/web" in cookie and "Max-Age=43200" in cookie
        projects = c.get("/web/projects").text
        assert "default / app" in projects and "infra" not in projects
        assert c.get("/web/p/default/infra").status_code == 404  # not readable: the same as unknown
        assert c.get("/web/p/default/infra/page/runbooks/nats.md").status_code == 404
        assert c.get("/web/p/default/no-such").status_code == 404
        assert c.get("/web/pending").status_code == 403  # root screens need root, as /admin
        r = c.get("/web/search", params={"q": "restart store"})  # global search: only granted projects
        assert r.status_code == 200 and "runbooks/nats.md" not in r.text


def test_api_key_and_root_token_log_in(web):
    with web.admin() as a:
        key = a.post("/admin/api-keys", json={"user": "bob"}).json()
    with client(web) as c:
        assert login(c, token=key["key"]).status_code == 303
        assert "default / infra" in c.get("/web/projects").text
        with web.admin() as a:  # revoking the key ends the session that it opened
            a.delete(f"/admin/api-keys/{key['id']}").raise_for_status()
        r = c.get("/web/projects")
        assert r.status_code == 303 and "ended=1" in r.headers["location"]
    with client(web) as c:
        assert login(c, token=web.root_token).status_code == 303
        assert c.get("/web/audit").status_code == 200
        assert "web.login" in c.get("/web/audit").text


def test_status_shows_services_writer_lag_and_store_counts_to_root_only(web):
    with client(web) as c:
        assert login(c, token=web.root_token).status_code == 303
        html = c.get("/web/status").text
        for name in ("writer", "ingress", "query"):
            assert re.search(rf'<th scope="row">{name}</th><td class="ok">up', html), name
        assert re.search(r"<dt>Writer lag</dt><dd>\d+ commands not yet applied", html)
        assert re.search(r"<dt>pages</dt><dd>[1-9]\d*</dd>", html)  # the store section
    with client(web) as c:
        login(c, name="carl", password="carl's long password")
        html = c.get("/web/status").text
        assert "Writer lag" in html and "<dt>pages</dt>" not in html


def test_wrong_password_is_401_then_rate_limited_with_retry_after(web):
    with client(web) as c:
        for _ in range(5):
            r = login(c, name="carl", password="wrong")
            assert r.status_code == 401 and "Wrong user name or password" in r.text
        r = login(c, name="carl", password="carl's long password")  # locked even with the right one
        assert r.status_code == 429 and int(r.headers["retry-after"]) > 0
        r = login(c, name="bob", password="bob's long password")  # another name still logs in
        assert r.status_code == 303


def test_forged_or_missing_csrf_token_is_403_and_changes_nothing(web):
    with client(web) as c:
        login(c, name="ann", password="correct horse battery")
        page = c.get("/web/p/default/app/edit/concepts/retry.md").text
        expected = re.search(r'name="expected_page_id" value="(\d+)"', page).group(1)
        data = {"path": "concepts/retry.md", "text": "# Retry\nhijacked", "expected_page_id": expected,
                "action": "save"}
        for forged in ({"csrf": "0" * 64}, {}):
            r = c.post("/web/p/default/app/edit", data={**data, **forged})
            assert r.status_code == 403 and "security token" in r.text
        assert c.post("/web/logout", data={"csrf": "f" * 64}).status_code == 403
        assert "hijacked" not in c.get("/web/p/default/app/page/concepts/retry.md").text
        # and a cross-origin post is refused even with the right token
        r = c.post("/web/logout", data={"csrf": csrf_of(page)}, headers={"Origin": "http://evil.example"})
        assert r.status_code == 403


def test_unknown_page_is_a_404_page(web):
    with client(web) as c:
        login(c, name="ann", password="correct horse battery")
        r = c.get("/web/p/default/app/page/concepts/nope.md")
        assert r.status_code == 404 and "text/html" in r.headers["content-type"]
        assert "<h1>Not found</h1>" in r.text and "concepts/nope.md" in r.text
        assert c.get("/web/no/such/screen").status_code == 404
        assert c.get("/web/p/default/app/history/concepts/nope.md").status_code == 404


def test_deleted_user_and_changed_password_end_the_session(web):
    with client(web) as c, client(web) as d:
        assert login(c, name="dora", password="dora's long password").status_code == 303
        assert login(d, name="eve", password="eve's long password").status_code == 303
        with web.admin() as a:
            a.delete("/admin/users/dora").raise_for_status()
            a.put("/admin/users/eve/password", json={"password": "a new password"}).raise_for_status()
        for x in (c, d):
            r = x.get("/web/projects")
            assert r.status_code == 303 and r.headers["location"].startswith("/web/login?next=")
            assert "ended=1" in r.headers["location"]
            assert 'aimem_session=""' in r.headers["set-cookie"]  # the cookie is dropped too
        assert login(d, name="eve", password="eve's long password").status_code == 401
        assert login(d, name="eve", password="a new password").status_code == 303


def test_logout_ends_the_session_server_side(web):
    with client(web) as c:
        login(c, name="ann", password="correct horse battery")
        token = c.cookies.get("aimem_session")
        csrf = csrf_of(c.get("/web/projects").text)
        r = c.post("/web/logout", data={"csrf": csrf})
        assert r.status_code == 303 and r.headers["location"] == "/web/login?bye=1"
    with client(web) as replay:  # the old cookie no longer opens anything
        replay.cookies.set("aimem_session", token, path="/web")
        assert replay.get("/web/projects").status_code == 303


def test_untrusted_page_renders_inert_under_a_strict_csp(web):
    web.page("app", "notes/xss.md", "# Notes\n<script>alert(1)</script>\n[click](javascript:alert(2))\n"
             "<img src=x onerror=alert(3)> ![i](http://evil.example/x.png)")
    with client(web) as c:
        login(c, name="ann", password="correct horse battery")
        r = c.get("/web/p/default/app/page/notes/xss.md")
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp
        body = r.text.split('<div class="md">', 1)[1].split("</div>", 1)[0]
        assert "<script" not in body and "&lt;script&gt;" in body
        assert "javascript:" not in body.replace("[click](javascript:alert(2))", "")
        assert "<img src=\"x\"" not in body and "onerror=alert(3)&gt;" in body
        assert r.text.count("<script") == 1  # only /web/static/app.js


def test_edit_conflict_is_409_and_keeps_your_text(web):
    with client(web) as c:
        login(c, name="ann", password="correct horse battery")
        page = c.get("/web/p/default/app/edit/concepts/retry.md").text
        expected = re.search(r'name="expected_page_id" value="(\d+)"', page).group(1)
        web.page("app", "concepts/retry.md", "# Retry\nA concurrent edit.")
        r = c.post("/web/p/default/app/edit", data={"csrf": csrf_of(page), "path": "concepts/retry.md",
                                                    "text": "# Retry\nMy edit.", "expected_page_id": expected,
                                                    "action": "save"})
        assert r.status_code == 409 and "Conflict" in r.text
        assert "My edit." in r.text and "A concurrent edit." in r.text
        assert "A concurrent edit." in c.get("/web/p/default/app/page/concepts/retry.md").text


def test_handoff_cancel_needs_the_write_grant_and_viewing_claims_nothing(web):
    web.writer_op("handoff.begin", {"body": "pick up the retry work", "title": "cancel me", "shared": True},
                  project="app")
    api = f"{web.query}/api/v1/workspaces/default/projects/app/handoffs"
    auth = {"Authorization": f"Bearer {web.root_token}"}
    hid = next(h["id"] for h in httpx.get(api, headers=auth).json() if h["title"] == "cancel me")
    with client(web) as c:
        login(c, name="ann", password="correct horse battery")
        page = c.get("/web/p/default/app/handoffs").text
        assert "cancel me" in page and f"Cancel handoff #{hid}" in page
        assert [h["status"] for h in httpx.get(api, headers=auth).json() if h["id"] == hid] == ["open"]
        r = c.post(f"/web/p/default/app/handoffs/{hid}/cancel", data={"csrf": csrf_of(page)})
        assert r.status_code == 303
        assert httpx.get(api, params={"status": "any"}, headers=auth).json()[-1]["status"] == "expired"
    with client(web) as ro:  # bob reads infra only: app is 403 for him, cancel included
        login(ro, name="bob", password="bob's long password")
        page = ro.get("/web/projects").text
        assert ro.post(f"/web/p/default/app/handoffs/{hid}/cancel", data={"csrf": csrf_of(page)}).status_code == 403


def test_live_events_reach_only_readers_of_the_project(web):
    with client(web) as ann, client(web) as bob:
        login(ann, name="ann", password="correct horse battery")
        login(bob, name="bob", password="bob's long password")
        got: dict[str, list[str]] = {"ann": [], "bob": []}
        with ann.stream("GET", "/web/events") as sa, bob.stream("GET", "/web/events") as sb:
            assert sa.headers["content-type"].startswith("text/event-stream")
            web.page("app", "concepts/live-http.md", "# Live\nover SSE")
            web.page("infra", "runbooks/live-http.md", "# Live infra\nover SSE")
            for name, stream, want in (("ann", sa, "concepts/live-http.md"), ("bob", sb, "runbooks/live-http.md")):
                for line in stream.iter_lines():
                    if line.startswith("data: "):
                        got[name].append(line)
                        if want in line:
                            break
        assert any("concepts/live-http.md" in x for x in got["ann"])
        assert all('"project": "app"' not in x for x in got["bob"])  # the app event came first
        assert all('"project": "infra"' not in x for x in got["ann"])
        assert any("runbooks/live-http.md" in x for x in got["bob"])


def test_out_of_range_version_cursor_and_offset_are_400_not_500(web):
    """Version ids, the audit cursor and the timeline offset reach SQLite: the 64-bit bound."""
    huge = str(2**64)
    with client(web) as c:
        login(c, name="ann", password="correct horse battery")
        for url in (f"/web/p/default/app/page/concepts/retry.md?v={huge}",
                    f"/web/p/default/app/history/concepts/retry.md?a={huge}&b=1",
                    f"/web/p/default/app/sessions/s1?offset={huge}",
                    f"/web/audit?before={huge}"):
            assert c.get(url).status_code == 400, url


def test_aimem_user_passwd_sets_a_password_that_logs_in(web, tmp_path):
    import subprocess
    import sys

    with web.admin() as a:
        a.post("/admin/users", json={"name": "fay"}).raise_for_status()
    env = {"PATH": "/usr/bin:/bin", "AIMEM_DATA_DIR": str(tmp_path)}
    cmd = [sys.executable, "-m", "aimem_cli", "user", "passwd", "fay", "--password-stdin", "--server", web.query,
           "--token", web.root_token]
    done = subprocess.run(cmd, input="fay's long password\n", capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "set the password of fay" in done.stdout
    short = subprocess.run(cmd, input="short\n", capture_output=True, text=True, env=env, timeout=60)
    assert short.returncode != 0 and short.stderr.strip().count("\n") == 0  # one line, non-zero exit
    with client(web) as c:
        assert login(c, name="fay", password="fay's long password").status_code == 303


def test_a_running_sessions_turns_show_inert_beside_the_page_hits(web):
    """A session still running has no page; its matching turn is listed under the page hits,
    escaped like every other agent text."""
    web.hook("app", "sess-run", "UserPromptSubmit", prompt="<b>ERR_7311</b> while retries keep the id")
    with client(web) as c:
        assert login(c, name="gil", password="gil's long password").status_code == 303
        deadline = time.monotonic() + 20
        while True:
            html = c.get("/web/p/default/app/search", params={"q": "ERR_7311 keep the id"}).text
            if "sess-run" in html or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        hits, _, raw = html.partition('<h2 id="raw-h">')
        assert "decisions/keep-id.md" in hits  # the page hits are still there
        assert raw.startswith("In sessions still running</h2>"), raw[:200]
        assert "sess-run" in raw and "&lt;b&gt;ERR_7311&lt;/b&gt;" in raw and "<b>ERR_7311" not in raw


def test_a_session_whose_id_holds_a_slash_opens_its_timeline(web):
    web.hook("app", "team/agent-7", "UserPromptSubmit", prompt="a prompt from a slashed session id")
    with client(web) as c:
        assert login(c, name="gil", password="gil's long password").status_code == 303
        deadline = time.monotonic() + 20
        while "team/agent-7" not in c.get("/web/p/default/app/sessions").text and time.monotonic() < deadline:
            time.sleep(0.2)
        r = c.get("/web/p/default/app/sessions/team/agent-7")
        assert r.status_code == 200 and "a prompt from a slashed session id" in r.text


def test_rejected_patches_stay_visible_with_their_reason(web):
    res = web.writer_op("proposal.stage", {
        "proposals": [{"path": "decisions/keep-id.md", "title": "Keep the id", "confidence": 0.9,
                       "body": "# Keep the id\nRetries keep the event id and its key.",
                       "patch": [{"find": "event id.", "replace": "event id and its key."}]}],
        "rejected": [{"path": "../escape.md", "title": "Escape", "stage": "validation",
                      "reason": "invalid: bad path", "patch": [{"find": "", "replace": "x"}]},
                     {"path": "_rules/never.md", "title": "Never", "stage": "eval", "reason": "eval got worse: 2 → 1",
                      "body": "# Never\n<script>alert(1)</script>",
                      "patch": [{"find": "", "replace": "# Never\n<script>alert(1)</script>"}],
                      "eval": {"accept": False, "reason": "eval got worse: 2 → 1", "score_before": 2.0,
                               "score_after": 1.0}}]}, project="app")
    bad, worse = res["rejected"]
    with client(web) as c:
        assert login(c, token=web.root_token).status_code == 303
        listing = c.get("/web/pending?status=rejected").text
        assert "(eval: eval got worse: 2 → 1)" in listing and "(validation: invalid: bad path)" in listing
        detail = c.get(f"/web/pending/{worse['id']}")
        assert detail.status_code == 200
        assert "By eval: eval got worse: 2 → 1" in detail.text and "Patch (1 edit)" in detail.text
        assert "<script>alert" not in detail.text and "&lt;script&gt;alert" in detail.text
        assert c.get(f"/web/pending/{bad['id']}").status_code == 200  # a path that can never exist still shows
        pending = c.get("/web/pending").text
        assert f"#{res['proposals'][0]['id']} Keep the id" in pending


def test_the_search_form_takes_every_search_parameter(web):
    """The form's fields are ``SearchParams``'s: a limit, sibling scopes, the flags; a bad value
    is a 400 page that names the field, never a 5xx."""
    with client(web) as c:
        login(c, name="gil", password="gil's long password")  # reads app only
        page = c.get("/web/p/default/app/search", params={"query": "keep id retries", "limit": "1"})
        assert page.status_code == 200
        assert page.text.count('class="hit"') == 1 and 'name="include_superseded"' in page.text
        assert 'name="workspace"' not in page.text  # the URL names the project
        both = c.get("/web/search", params={"q": "keep id retries"})
        assert both.status_code == 200 and both.text.count('class="hit"') == 2
        assert 'name="project"' in both.text and 'name="scopes"' in both.text
        bad = c.get("/web/search", params={"query": "retry", "limit": "0"})
        assert bad.status_code == 400 and "limit" in bad.text and 'class="hit"' not in bad.text
        other = c.get("/web/search", params={"query": "restart store", "project": "infra"})
        assert other.status_code == 404  # a project gil may not read is the same as an unknown one
