"""The web's pictures in a real browser (Playwright + Debian's Chromium, a real writer + ingress +
query): activity bars and a session's strip, handoff chains, the link graph, the Status
sparklines. Each: its content, a link followed, hostile titles inert (no script runs, the
markup stays text), axe-core with no serious violation, Tab and Enter instead of the mouse.
Screenshots go to ``$AIMEM_WEB_SCREENSHOTS``; the README's (``docs/``) come from
``make screenshots`` (``aimem_testing.screenshots``), a larger seeded project.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from aimem_testing.browser import axe_check
from aimem_testing.browser import web_login as login

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

ANN = ("ann", "correct horse battery")
BOB = ("bob", "bob's long password")
HOSTILE = "<script>alert('t')</script></svg>\"onload=alert(1) x"
PROMPT = "<script>alert('p')</script></svg><img src=x onerror=alert(2)>"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """The whole local stack, auth on, the query service sampling metrics every second."""
    from aimem_testing.stack import LocalStack

    spec = importlib.util.spec_from_file_location("query_tests_support", Path(__file__).parents[1] / "conftest.py")
    support = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(support)  # services/query/tests/conftest.py: WebStack and its seeding helpers
    WEB_ROOT_TOKEN, WebStack = support.WEB_ROOT_TOKEN, support.WebStack

    root = tmp_path_factory.mktemp("pictures-stack")
    s = LocalStack(root / "data", root / "logs", extra_env={"AIMEM_AUTH__TOKEN": WEB_ROOT_TOKEN,
                                                           "AIMEM_QUERY__HEALTH_SAMPLE_S": "1"})
    s.start(timeout_s=120)
    try:
        yield WebStack(s.url("query"), s.url("ingress"), s.nats_url)
    finally:
        s.stop()


@pytest.fixture(scope="module")
def web(stack):
    s = stack
    s.user(*ANN, ("default", "app", True))
    s.user(*BOB, ("default", "infra", False))
    s.page("app", "concepts/hub.md", "# Retry hub\nSee [[concepts/backoff]], [[decisions/keep-id]] and [[notes/evil]].",
           frontmatter={"entities": ["retry"]})
    s.page("app", "concepts/backoff.md", "# Backoff\nDoubles up to a minute; see [[decisions/keep-id]].")
    s.page("app", "decisions/keep-id.md", "# Keep the event id\nRedelivery keeps the key.",
           frontmatter={"entities": ["retry"]})
    s.page("app", "notes/evil.md", f"# {HOSTILE}\nLinks back to [[concepts/hub]].")
    s.page("infra", "runbooks/nats.md", "# NATS runbook\nRestart JetStream.")
    s.hook("app", "sess-1", "SessionStart", source="startup")
    s.hook("app", "sess-1", "UserPromptSubmit", prompt=PROMPT)
    s.hook("app", "sess-1", "PreToolUse", tool_name="Bash", tool_input={"command": "pytest -q"})
    s.hook("app", "sess-1", "PostToolUseFailure", tool_name="Bash", tool_input={"command": "pytest -q"},
           error="Exit code 1\n1 failed")
    s.hook("app", "sess-1", "PreCompact", trigger="auto")
    s.hook("app", "sess-1", "UserPromptSubmit", prompt="fix the retry test")
    first = s.writer_op("handoff.begin", {"body": "Carry on.", "title": HOSTILE, "shared": True,
                                          "session_id": "sess-1", "from_agent": "claude-code"}, project="app")
    hid = first.get("result", first)["handoff"]["id"]
    s.writer_op("handoff.accept", {"handoff_id": hid, "agent": "codex", "session_id": "sess-2"}, project="app")
    s.hook("app", "sess-2", "UserPromptSubmit", prompt="carry on from the handoff")
    s.writer_op("handoff.begin", {"body": "Finish the docs.", "title": "Finish the docs", "shared": True,
                                  "session_id": "sess-2", "from_agent": "codex"}, project="app")
    return s


def watch(page, base: str) -> tuple[list[str], list[str]]:
    """Record dialogs (a script that ran) and requests leaving the origin."""
    dialogs: list[str] = []
    foreign: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("request", lambda r: foreign.append(r.url) if not r.url.startswith(base) else None)
    return dialogs, foreign


def inert(page) -> None:
    """No element an agent's text could have made: no script or handler inside any SVG."""
    assert page.locator("svg script, svg foreignObject, svg [onload], svg [onerror], main img").count() == 0
    assert page.evaluate("document.querySelectorAll('script').length") == 1  # /web/static/app.js only


@pytest.fixture
def ann_page(browser, web):
    ctx = browser.new_context()
    page = ctx.new_page()
    login(page, web.query, *ANN)
    yield page
    ctx.close()


def test_activity_bars_lead_to_that_days_sessions_and_the_strip_to_each_observation(ann_page, web, shots):
    page, base = ann_page, web.query
    dialogs, foreign = watch(page, base)
    page.goto(f"{base}/web/p/default/app/activity")
    bars = page.locator("svg#act-o a.bar")
    assert bars.count() == 1
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} · claude-code: 7 observations", bars.first.locator("title").text_content())
    assert page.locator("svg#act-s a.bar title").first.text_content().endswith("claude-code: 2 sessions")
    assert "claude-code" in page.locator("ul.legend").inner_text()
    page.screenshot(path=str(shots / "pictures-activity.png"), full_page=True)
    day = bars.first.get_attribute("data-day")
    page.focus("svg#act-o a.bar")  # keyboard: the bar is a focusable link
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf".*/sessions\?day={day}&agent=claude-code$"))
    assert f"Sessions active on {day}" in page.locator("h1").inner_text()
    assert sorted(a.inner_text() for a in page.locator("tbody th a").all()) == ["sess-1", "sess-2"]

    page.locator("tbody th a", has_text="sess-1").click()
    marks = page.locator("svg.strip a.mark")
    assert marks.count() == page.locator("ol.timeline > li").count() == 6
    cats = [m.get_attribute("class").split("mark-")[1] for m in marks.all()]
    assert cats == ["other", "prompt", "tool", "failure", "compaction", "prompt"]
    assert "1 failures, 1 compactions" in page.locator("#strip-cap").inner_text()
    hostile = page.locator("svg.strip a.mark-prompt title").first.text_content()
    assert "<script>alert('p')</script></svg><img" in hostile  # the title as text, never markup
    assert "&lt;script&gt;" in page.content()
    inert(page)
    page.screenshot(path=str(shots / "pictures-timeline.png"), full_page=True)
    failure = page.locator("svg.strip a.mark-failure")
    oid = failure.get_attribute("data-id")
    failure.click()
    page.wait_for_url(re.compile(rf".*#obs-{oid}$"))
    assert "Bash failed" in page.locator(f"#obs-{oid}").inner_text()
    page.wait_for_timeout(200)
    assert dialogs == [] and foreign == []


def test_handoff_chain_shows_who_handed_to_whom_and_links_to_sessions(ann_page, web, shots):
    page, base = ann_page, web.query
    dialogs, foreign = watch(page, base)
    page.goto(f"{base}/web/p/default/app/handoffs")
    page.locator("text=See the handoff chains as a picture").click()
    boxes = page.locator("svg.chains g.handoff")
    assert boxes.count() == 2 and page.locator("svg.chains line.arrow-claim").count() == 1
    first, second = boxes.nth(0), boxes.nth(1)
    assert "h-accepted" in first.get_attribute("class") and "h-open" in second.get_attribute("class")
    assert "✓ codex" in first.text_content() and "OPEN" in second.text_content()  # state in words, not colour alone
    assert HOSTILE in first.locator("a.from title").text_content()
    assert "Finish the docs" in second.text_content()
    inert(page)
    assert "1 open" in page.locator("main p.muted").first.inner_text()
    page.screenshot(path=str(shots / "pictures-chains.png"), full_page=True)
    first.locator("a.to").click()
    page.wait_for_url(re.compile(r".*/sessions/sess-2$"))
    assert "sess-2" in page.locator("h1").inner_text()
    page.go_back()
    page.locator("svg.chains g.handoff").nth(0).locator("a.from").click()
    page.wait_for_url(re.compile(r".*/sessions/sess-1$"))
    assert dialogs == [] and foreign == []


def test_link_graph_around_a_page_and_for_the_project_opens_pages(browser, ann_page, web, shots):
    page, base = ann_page, web.query
    dialogs, foreign = watch(page, base)
    page.goto(f"{base}/web/p/default/app/page/concepts/hub.md")
    page.locator("nav.actions >> text=Link graph").click()
    nodes = page.locator("svg.graph a.node")
    paths = sorted(n.get_attribute("data-path") for n in nodes.all())
    assert paths == ["concepts/backoff.md", "concepts/hub.md", "decisions/keep-id.md", "notes/evil.md"]
    assert page.locator("svg.graph a.node.center").get_attribute("data-path") == "concepts/hub.md"
    assert page.locator("svg.graph line.edge-entity").count() == 1  # hub and keep-id share "retry"
    evil = page.locator("svg.graph a.node[data-path='notes/evil.md']")
    assert evil.locator("title").text_content().startswith(HOSTILE)
    inert(page)
    page.screenshot(path=str(shots / "pictures-graph-page.png"), full_page=True)
    page.locator("svg.graph a.node[data-path='concepts/backoff.md']").click()
    page.wait_for_url(re.compile(r".*/page/concepts/backoff.md$"))
    assert page.locator("h1").inner_text() == "Backoff"

    page.goto(f"{base}/web/p/default/app/graph")
    assert page.locator("svg.graph a.node").count() == 4
    assert "4 pages and" in page.locator("#gr-count").inner_text()
    assert page.locator("table tbody th a").first.text_content() == "Retry hub"  # the most connected first
    assert page.locator("svg.graph a.node").first.get_attribute("data-path") == "concepts/hub.md"
    page.screenshot(path=str(shots / "pictures-graph-project.png"), full_page=True)
    assert dialogs == [] and foreign == []

    ctx = browser.new_context()
    bob = ctx.new_page()
    login(bob, base, *BOB)
    assert bob.goto(f"{base}/web/p/default/app/graph").status == 404  # grants: as for any app screen
    assert bob.goto(f"{base}/web/p/default/app/graph/concepts/hub.md").status == 404
    assert bob.goto(f"{base}/web/p/default/app/activity").status == 404
    assert bob.goto(f"{base}/web/p/default/app/handoffs/chains").status == 404
    ctx.close()


def test_status_sparklines_draw_the_last_hour_of_the_stacks_metrics(browser, web, shots):
    ctx = browser.new_context()
    page = ctx.new_page()
    base = web.query
    login(page, base, *ANN)
    for i in range(3):  # hooks while the sampler (every second) watches
        web.hook("app", "sess-3", "UserPromptSubmit", prompt=f"prompt {i}")
    page.wait_for_timeout(3500)
    page.goto(f"{base}/web/status")
    caps = page.locator("section.health figcaption")
    assert [c.locator("strong").inner_text() for c in caps.all()] == [
        "Hooks", "Writer lag", "Apply rate", "Dead letters", "Replication lag"]
    assert "sampled every 1 s" in page.locator("section.health p.muted").inner_text()
    for label in ("Hooks", "Writer lag", "Apply rate", "Dead letters"):
        fig = page.locator("figure.spark", has=page.locator(f"strong:text-is('{label}')"))
        assert fig.locator("polyline").count() == 1, label
        assert re.search(r"\d+ samples", fig.inner_text()), label
    assert "now 0 open" in page.locator("figure.spark", has=page.locator("strong:text-is('Dead letters')")).inner_text()
    hooks = page.locator("figure.spark", has=page.locator("strong:text-is('Hooks')")).inner_text()
    assert float(re.search(r"max ([\d.]+)", hooks).group(1)) > 0  # the prompts above show as a rise
    page.screenshot(path=str(shots / "pictures-status.png"), full_page=True)
    ctx.close()


def test_a_busy_fortnight_draws_a_bar_per_day_and_agent(browser, web, shots):
    """Hooks stamped over the last days (their own ``timestamp``) by two agents: one bar per day."""
    now = datetime.now(UTC)
    for day in range(0, 12, 2):
        for n, (agent, event) in enumerate([("claude-code", "UserPromptSubmit"), ("claude-code", "PreToolUse"),
                                            ("codex", "PreToolUse"), ("codex", "PostToolUse")][: 2 + day % 3]):
            at = (now - timedelta(days=day, minutes=n)).isoformat()
            body = {"session_id": f"busy-{agent}-{day}", "cwd": "/home/dev/demo", "hook_event_name": event,
                    "workspace": "default", "project": "demo", "timestamp": at, "prompt": "go",
                    "tool_name": "Bash", "tool_input": {"command": "make test"}, "tool_response": {"ok": True}}
            r = httpx.post(f"{web.ingress}/hook?agent={agent}", json=body, timeout=10,
                           headers={"Authorization": f"Bearer {web.root_token}"})
            assert r.status_code == 202, r.text
    ctx = browser.new_context(viewport={"width": 1000, "height": 700})
    page = ctx.new_page()
    page.goto(f"{web.query}/web/login")
    page.fill("#token", web.root_token)
    page.locator("form[aria-labelledby=key-h] button").click()
    page.wait_for_url(re.compile(r".*/web/projects$"))
    for _ in range(40):  # the writer applies the hooks
        page.goto(f"{web.query}/web/p/default/demo/activity?days=14")
        if page.locator("svg#act-o a.bar").count() >= 9:
            break
        page.wait_for_timeout(250)
    days = {b.get_attribute("data-day") for b in page.locator("svg#act-o a.bar").all()}
    agents = {b.get_attribute("data-agent") for b in page.locator("svg#act-o a.bar").all()}
    assert len(days) == 6 and agents == {"claude-code", "codex"}
    page.screenshot(path=str(shots / "pictures-activity-busy.png"), full_page=True)
    ctx.close()


def tab_to(page, selector: str, limit: int = 400) -> None:
    """Press Tab until the focused element matches ``selector`` (fails after ``limit`` presses)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("s => !!document.activeElement && document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"Tab never reached {selector}")


def focus_ring(page) -> str:
    """The stroke (or, for a text-only link, the text decoration) the focused SVG link shows."""
    return page.evaluate("""() => {
        const a = document.activeElement, shape = a.querySelector('rect, circle, path');
        return shape ? getComputedStyle(shape).stroke : getComputedStyle(a.querySelector('text')).textDecorationLine;
    }""")


def test_every_picture_is_usable_from_the_keyboard(ann_page, web):
    """Tab reaches the marks of each picture, the focused one is outlined (not by colour of its
    own), and Enter follows its link, as a click would."""
    page, base = ann_page, web.query
    amber = "rgb(242, 182, 0)"
    page.goto(f"{base}/web/p/default/app/sessions/sess-1")
    tab_to(page, "svg.strip a.mark-failure")
    assert focus_ring(page) == amber
    oid = page.evaluate("document.activeElement.dataset.id")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf".*#obs-{oid}$"))

    page.goto(f"{base}/web/p/default/app/handoffs/chains")
    tab_to(page, "svg.chains a.to")
    assert focus_ring(page) == "underline"
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/sessions/sess-2$"))

    page.goto(f"{base}/web/p/default/app/graph/concepts/hub.md")
    tab_to(page, "svg.graph a.node[data-path='concepts/backoff.md']")
    assert focus_ring(page) == amber
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/page/concepts/backoff.md$"))

    page.goto(f"{base}/web/p/default/app/graph")
    tab_to(page, "svg.graph a.node")  # the first node: the most connected page
    assert page.evaluate("document.activeElement.dataset.path") == "concepts/hub.md"
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/page/concepts/hub.md$"))
    assert page.locator("h1").inner_text() == "Retry hub"


def test_pictures_pass_axe(browser, web):
    ctx = browser.new_context(bypass_csp=True)  # only so the test can inject axe-core
    page = ctx.new_page()
    login(page, web.query, *ANN)
    for path in ["/web/p/default/app/activity", "/web/p/default/app/sessions/sess-1",
                 "/web/p/default/app/handoffs/chains", "/web/p/default/app/graph",
                 "/web/p/default/app/graph/concepts/hub.md?hops=2", "/web/status"]:
        page.goto(web.query + path)
        axe_check(page, path)
    ctx.close()


WS_RUN_A, WS_RUN_B = "a1" * 16, "b2" * 16


@pytest.fixture(scope="module")
def workstream(web) -> str:
    """A workstream of `app` with two runs: Claude's hostile prompt and answer, then Codex's turn."""
    opened = web.writer_op("workstream.lease", {"action": "open", "run_id": WS_RUN_A, "harness": "claude-code",
                                                "cwd": "/src/shop"}, project="app")
    wid = opened.get("result", opened)["run"]["workstream"]["id"]
    web.writer_op("workstream.append", {"run_id": WS_RUN_A, "native_session_id": "cc-1", "events": [
        {"role": "user", "text": PROMPT}, {"role": "assistant", "text": "Documented the okapi retry policy."},
        {"role": "tool", "text": "Bash: pytest -q\n→ 3 passed"}]}, project="app")
    web.writer_op("workstream.lease", {"action": "release", "run_id": WS_RUN_A, "exit_code": 0}, project="app")
    web.writer_op("workstream.lease", {"action": "open", "run_id": WS_RUN_B, "harness": "codex",
                                       "cwd": "/src/shop"}, project="app")
    web.writer_op("workstream.append", {"run_id": WS_RUN_B, "events": [
        {"role": "user", "text": "Continue where the last session stopped"}]}, project="app")
    return wid


def test_workstreams_list_and_one_timeline_hostile_text_inert(browser, ann_page, web, workstream, shots):
    page, base = ann_page, web.query
    dialogs, foreign = watch(page, base)
    page.goto(f"{base}/web/p/default/app")
    page.locator("nav.sub a", has_text="Workstreams").click()
    page.wait_for_url(re.compile(r".*/web/p/default/app/workstreams$"))
    row = page.locator("tbody tr")
    assert row.count() == 1
    cells = [c.inner_text() for c in row.first.locator("th, td").all()]
    assert cells[:3] == ["shop", "/src/shop", "4"]
    # Codex had not seen #1-#3, so its own #4 does not move its cursor past them.
    assert cells[3] == "codex (0), claude-code (3)" and cells[4].startswith("codex until ")
    row.first.locator("th a").click()
    page.wait_for_url(re.compile(rf".*/workstreams/{workstream}$"))
    assert page.locator("h1").inner_text() == "Workstream shop"
    events = page.locator("ol.timeline > li")
    assert events.count() == 4
    assert [e.get_attribute("id") for e in events.all()] == ["seq-1", "seq-2", "seq-3", "seq-4"]
    first = events.first.inner_text()
    assert "#1 · claude-code · user" in first and "<script>alert('p')</script></svg><img" in first  # text, not markup
    assert "okapi retry policy" in events.nth(1).inner_text()
    runs = [r.inner_text() for r in page.locator("section[aria-labelledby=r-h] tbody tr").all()]
    assert len(runs) == 2 and "codex" in runs[0] and "active" in runs[0] and "released" in runs[1]
    inert(page)
    page.screenshot(path=str(shots / "pictures-workstream.png"), full_page=True)
    assert page.goto(f"{base}/web/p/default/app/workstreams/{'0' * 32}").status == 404
    page.wait_for_timeout(200)
    assert dialogs == [] and foreign == []
    ctx = browser.new_context()
    bob = ctx.new_page()
    login(bob, base, *BOB)
    assert bob.goto(f"{base}/web/p/default/app/workstreams").status == 404  # grants: as for any app screen
    assert bob.goto(f"{base}/web/p/default/app/workstreams/{workstream}").status == 404
    ctx.close()


def test_workstream_screens_pass_axe(browser, web, workstream):
    ctx = browser.new_context(bypass_csp=True)  # only so the test can inject axe-core
    page = ctx.new_page()
    login(page, web.query, *ANN)
    for path in ["/web/p/default/app/workstreams", f"/web/p/default/app/workstreams/{workstream}"]:
        page.goto(web.query + path)
        axe_check(page, path)
    ctx.close()
