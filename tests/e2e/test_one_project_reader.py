"""The one-project reader walk: a user who may read ``alpha`` only walks every REST route
(from the query service's ``/openapi.json``), every MCP tool (from ``tools/list`` through the
official client) and every web screen (from the web router; the page screen also in real
Chromium), with ``alpha``'s, ``bravo``'s and an unknown project's ids, and nothing of
``bravo`` may show: no title, path, snippet, session, handoff or count.

``bravo`` is seeded with one marker word (``MARK``) in every title, path, body, session id,
cwd and handoff of its own; ``alpha``'s pages link into ``bravo`` and ``bravo``'s into
``alpha``, both share an entity and a session id, and messages cross both ways. A marker
the request itself carried (a ``bravo`` path asked for by name) may be echoed; any other
occurrence is a leak. Routes asked with ``bravo`` and with an unknown project must answer
the same (status, error code, message up to the name).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import httpx
import pytest

from aimem_testing.stack import LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

ROOT = "walk-root-token"
MARK = "quokkazeb"
A, B, C = "alpha", "bravo", "no-such-project"
READER = ("rita", "rita's long password")
A_PAGE, B_PAGE = "concepts/retry.md", f"decisions/{MARK}-plan.md"
B_SESSION = f"sess-{MARK}"
SHARED_SESSION = "sess-shared"


# -- the stack and its seed ------------------------------------------------------------------
@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    root = tmp_path_factory.mktemp("walk")
    stack = LocalStack(root / "data", root / "logs",
                       extra_env={"AIMEM_AUTH__TOKEN": ROOT, "AIMEM_MCP__SESSION_IDLE_TIMEOUT_S": "900"})
    stack.start(timeout_s=120)
    try:
        yield seed(stack)
    finally:
        stack.stop()


def admin(stack: LocalStack) -> httpx.Client:
    return httpx.Client(base_url=stack.url("query"), timeout=60, headers={"Authorization": f"Bearer {ROOT}"})


def hook(stack: LocalStack, project: str, session_id: str, event: str, cwd: str, **fields: Any) -> None:
    body = {"session_id": session_id, "cwd": cwd, "hook_event_name": event, "workspace": "default",
            "project": project, **fields}
    r = httpx.post(stack.url("ingress") + "/hook?agent=claude-code", json=body, timeout=30,
                   headers={"Authorization": f"Bearer {ROOT}"})
    assert r.status_code == 202, r.text


async def mcp_as(url: str, token: str, calls: list[tuple[str, dict]]) -> list[Any]:
    """Call tools in order with the official client; return each result (or the MCPError)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    out: list[Any] = []
    transport = streamable_http_client(url, http_client=httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=60))
    async with Client(transport, mode="legacy") as c:
        for name, args in calls:
            if name == "tools/list":
                out.append((await c.list_tools()).tools)
                continue
            try:
                out.append(await c.call_tool(name, args))
            except MCPError as exc:
                out.append(exc)
    return out


def seed(stack: LocalStack) -> dict[str, Any]:
    """Seed both projects through the public interfaces (admin API, hooks, MCP as root)."""
    a_cwd, b_cwd = "/home/dev/alpha", f"/home/dev/{MARK}-bravo"
    with admin(stack) as a:
        def page(project: str, path: str, body: str, entities: list[str]) -> int:
            r = a.post("/admin/pages", json={"project": project, "path": path, "body": body,
                                              "frontmatter": {"entities": entities}})
            assert r.status_code == 200, r.text
            return r.json()["page_id"]

        page(B, "concepts/shared.md", f"# {MARK.title()} shared concept\nRetry {MARK} details on JetStream.",
             ["JetStream"])
        a_id = page(A, A_PAGE, "# Retry policy\nRetry with the same event id on JetStream. See "
                    "[[bravo:concepts/shared.md]] and [[notes/local.md]].", ["JetStream"])
        page(A, "notes/local.md", "# Local note\nAlpha keeps its retry notes here.", ["JetStream"])
        b_id = page(B, B_PAGE, f"# {MARK.title()} plan\nThe {MARK} retry plan builds on "
                    "[[alpha:concepts/retry.md]] and [[concepts/shared.md]].", ["JetStream"])
        for project, sid, cwd, prompt in ((A, SHARED_SESSION, a_cwd, "Fix the retry loop in alpha"),
                                          (B, SHARED_SESSION, b_cwd, f"Tune the {MARK} retry budget"),
                                          (B, B_SESSION, b_cwd, f"Write the {MARK} retry plan")):
            hook(stack, project, sid, "SessionStart", cwd, source="startup")
            hook(stack, project, sid, "UserPromptSubmit", cwd, prompt=prompt)
            hook(stack, project, sid, "SessionEnd", cwd, reason="exit")
        for r in (a.post("/admin/users", json={"name": READER[0]}),
                  a.put(f"/admin/users/{READER[0]}/password", json={"password": READER[1]}),
                  a.put("/admin/grants", json={"user": READER[0], "workspace": "default", "project": A,
                                               "can_write": False})):
            assert r.status_code == 200, r.text
        key = a.post("/admin/api-keys", json={"user": READER[0], "name": "walk"}).json()["key"]
    mcp_url = stack.url("mcp-gateway") + "/mcp"
    results = asyncio.run(mcp_as(mcp_url, ROOT, [
        ("memory_handoff_begin", {"project": B, "title": f"{MARK} handoff", "summary": f"Continue the {MARK} plan."}),
        ("memory_handoff_begin", {"project": A, "title": "alpha handoff", "summary": "Continue alpha's retries.",
                                  "shared": True}),
        ("memory_message_send", {"project": B, "to_project": A, "subject": "hello alpha",
                                 "body": "please re-run the retry tests"}),
        ("memory_message_send", {"project": A, "to_project": B, "subject": "status", "body": "done"}),
    ]))
    assert all(not isinstance(r, Exception) and not r.is_error for r in results), results
    base = f"/api/v1/workspaces/default/projects"
    with admin(stack) as a:  # hooks are asynchronous: wait until the three sessions ended
        deadline = time.monotonic() + 60
        while True:
            ended = [len(a.get(f"{base}/{p}/sessions", params={"ended_only": True}).json()) for p in (A, B)]
            if ended == [1, 2]:
                break
            assert time.monotonic() < deadline, ended
            time.sleep(0.5)
        # as root the cross-project data is there: what the reader must not see exists
        root_page = a.get(f"{base}/{A}/page", params={"path": A_PAGE}).json()
        assert [b["path"] for b in root_page["backlinks"]] == [B_PAGE]
        assert MARK in json.dumps(a.get(f"{base}/{A}/graph").json())
        obs = a.get(f"{base}/{A}/sessions/{SHARED_SESSION}/observations").json()
        assert obs["elided_other_scope"] > 0
        assert a.get(f"{base}/{A}/messages").json()[0]["from_project"] == B
    return {"stack": stack, "key": key, "a_page_id": a_id, "b_page_id": b_id, "mcp": mcp_url}


# -- what the reader may not see --------------------------------------------------------------
def leaks(text: str, asked: str) -> bool:
    """True when ``text`` holds the marker and the request (``asked``) did not carry it."""
    return MARK in text.lower() and MARK not in asked.lower()


def same_answer(b: tuple[int, str], c: tuple[int, str]) -> bool:
    """``bravo``'s and the unknown project's answers agree (status and body up to the name)."""
    return b[0] == c[0] and b[1].replace(B, "<p>") == c[1].replace(C, "<p>")


def params_for(project: str, w: dict[str, Any]) -> dict[str, Any]:
    """Path/query values of a route asked about ``project`` (``alpha``, ``bravo`` or unknown)."""
    own = {A: (w["a_page_id"], A_PAGE, SHARED_SESSION), B: (w["b_page_id"], B_PAGE, B_SESSION),
           C: (987654321, "concepts/none.md", "sess-none")}[project]
    return {"workspace": "default", "project": project, "page_id": own[0], "path": own[1], "session_id": own[2],
            "part": "pages", "q": "retry JetStream shared plan", "name": READER[0], "user": READER[0]}


# -- REST -------------------------------------------------------------------------------------
def test_rest_routes_show_nothing_of_another_project(walk):
    q = walk["stack"].url("query")
    spec = httpx.get(q + "/openapi.json", timeout=30).json()
    auth = {"Authorization": f"Bearer {walk['key']}"}
    walked, problems, requests, shown = [], [], 0, 0
    with httpx.Client(base_url=q, timeout=60, headers=auth) as c:
        for route, ops in spec["paths"].items():
            for method, op in ops.items():
                names = [p["name"] for p in op.get("parameters", [])]
                scoped = "project" in names
                answers: dict[str, tuple[int, str]] = {}
                for project in (A, B, C) if scoped else (A,):
                    v = params_for(project, walk)
                    url = re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: str(v.get(m.group(1), "1")), route)
                    query = {p["name"]: v.get(p["name"], "1") for p in op.get("parameters", [])
                             if p["in"] == "query" and (p.get("required") or p["name"] in ("project", "q"))}
                    body = {"query": v["q"], "project": project} if "requestBody" in op else None
                    r = c.request(method.upper(), url, params=query, json=body)
                    requests += 1
                    asked = url + json.dumps(query) + json.dumps(body)
                    if r.status_code >= 500 or leaks(r.text, asked):
                        problems.append((method, url, query, r.status_code, r.text[:300]))
                    if route.startswith("/admin") and r.status_code not in (401, 403):
                        problems.append(("admin not refused", method, url, r.status_code))
                    answers[project] = (r.status_code, r.text)
                    if project == A and r.status_code == 200:
                        shown += 1
                if scoped and not same_answer(answers[B], answers[C]):
                    problems.append(("bravo differs from unknown", method, route, answers[B], answers[C]))
                walked.append(f"{method.upper()} {route}")
        extra = [("/api/v1/search", {"q": "retry JetStream shared plan", "global": "true", "explain": "true"}),
                 ("/api/v1/search", {"q": "retry JetStream", "project": A, "explain": "true"}),
                 ("/api/v1/search", {"q": "retry", "scopes": f"{A},{B}"}),
                 ("/api/v1/status", {}), ("/api/v1/workspaces", {})]
        for url, query in extra:
            r = c.get(url, params=query)
            requests += 1
            if r.status_code >= 500 or leaks(r.text, url + json.dumps(query)):
                problems.append(("extra", url, query, r.status_code, r.text[:300]))
        print(f"\nREST: {len(walked)} routes walked ({requests} requests, {shown} answered 200 for alpha)")
        assert not problems, problems
        st = c.get("/api/v1/status").json()
        assert st["counts"]["projects"] == 1 and st["db_bytes"] is None, st
        pst = c.get(f"/api/v1/workspaces/default/projects/{A}/status").json()
        assert pst["db_bytes"] is None and pst["counts"]["pages"] == 2 + 1, pst  # two pages + the session page
        page = c.get(f"/api/v1/workspaces/default/projects/{A}/page", params={"path": A_PAGE}).json()
        assert page["backlinks"] == [] and [(l["to_project"], l["resolved"]) for l in page["links"]] == [
            (B, False), (None, True)]
        graph = c.get(f"/api/v1/workspaces/default/projects/{A}/graph").json()
        assert {n["project"] for n in graph["nodes"]} == {A}
        obs = c.get(f"/api/v1/workspaces/default/projects/{A}/sessions/{SHARED_SESSION}/observations").json()
        assert obs["elided_other_scope"] == 0
        inbox = c.get(f"/api/v1/workspaces/default/projects/{A}/messages").json()
        assert [(m["from_project"], m["body"]) for m in inbox] == [(None, "please re-run the retry tests")]
        r = c.get("/api/v1/search", params={"q": "retry", "scopes": f"{A},{B}"})
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", r.text
    assert shown >= 12, shown  # the reader's own project really was read
    assert len(walked) >= 30, walked  # the openapi listing really was walked


# -- MCP --------------------------------------------------------------------------------------
def tool_args(tool: Any, project: str, w: dict[str, Any]) -> dict[str, Any]:
    """Arguments for ``tool`` about ``project``: its schema's required fields plus the scope."""
    v = params_for(project, w)
    fill = {"workspace": "default", "project": project, "query": v["q"], "path": v["path"],
            "page_id": v["page_id"], "session_id": v["session_id"], "to_project": A, "body": "x",
            "summary": "x", "handoff_id": 1, "message_id": 1, "explain": True}
    props = tool.input_schema.get("properties", {})
    args: dict[str, Any] = {}
    for name in props:
        if name in ("workspace", "project", "explain") or name in tool.input_schema.get("required", []):
            if name in fill:
                args[name] = fill[name]
            else:
                args[name] = {"string": "x", "integer": 1, "number": 1, "boolean": False, "array": [],
                              "object": {}}.get(props[name].get("type", "string"), "x")
    if tool.name == "memory_read_page":  # path or page_id, not both
        args.pop("page_id", None)
        args["path"] = v["path"]
    if tool.name == "memory_read_session_observations":
        args["session_id"] = v["session_id"]
    return args


def outcome(res: Any) -> tuple[str, str]:
    """``(kind, text)`` of a tool result or its JSON-RPC error."""
    if isinstance(res, Exception):
        data = getattr(res, "data", None) or {}
        return (f"error {getattr(res, 'code', '?')} {data.get('code') if isinstance(data, dict) else ''}",
                f"{res} {json.dumps(data, default=str)}")
    return ("error-result" if res.is_error else "ok", res.content[0].text if res.content else "")


def normal(text: str, project: str, path: str, session: str) -> str:
    """``text`` with the names asked for (and every number) written alike."""
    text = text.replace(path, "<path>").replace(session, "<session>").replace(project, "<project>")
    return re.sub(r"\b\d+\b", "<n>", text)


def test_mcp_tools_show_nothing_of_another_project(walk):
    tools = asyncio.run(mcp_as(walk["mcp"], walk["key"], [("tools/list", {})]))[0]
    calls: list[tuple[str, dict]] = []
    for t in tools:
        for project in (A, B, C):
            calls.append((t.name, tool_args(t, project, walk)))
    calls += [("memory_query", {"query": "retry JetStream shared plan", "global": True, "explain": True}),
              ("memory_status", {})]
    results = asyncio.run(mcp_as(walk["mcp"], walk["key"], calls))
    problems, table = [], {}
    for (name, args), res in zip(calls, results):
        kind, text = outcome(res)
        table.setdefault(name, []).append(kind)
        if leaks(text, json.dumps(args)):
            problems.append((name, args, text[:400]))
        if "-32603" in kind:
            problems.append(("crash", name, args, text[:300]))
    for i in range(0, 3 * len(tools), 3):
        (name, _), rb, rc = calls[i], results[i + 1], results[i + 2]
        b, c = outcome(rb), outcome(rc)
        if b[0] != c[0] or normal(b[1], B, B_PAGE, B_SESSION) != normal(c[1], C, "concepts/none.md", "sess-none"):
            problems.append(("bravo differs from unknown", name, b, c))
    ok_on_a = sorted(n for n, kinds in table.items() if kinds[0] == "ok")
    print(f"\nMCP: {len(tools)} tools walked ({len(calls)} calls); answered for alpha: {ok_on_a}")
    assert not problems, problems
    assert len(tools) == 29 and {"memory_query", "memory_read_page", "memory_recent", "memory_briefing",
                                 "memory_status", "memory_message_list", "memory_handoff_list",
                                 "memory_read_session_observations"} <= set(ok_on_a), table
    page = json.loads(outcome(results[[c[0] for c in calls].index("memory_read_page")])[1])
    assert page["path"] == A_PAGE and page["backlinks"] == []


# -- web --------------------------------------------------------------------------------------
def web_screens() -> list[str]:
    """The GET screens of the web router (``aimem_query.web.site``), live events excluded."""
    from aimem_query.web.site import PREFIX, router

    def walk_routes(routes: list[Any], prefix: str) -> list[str]:
        out = []
        for r in routes:
            inner = getattr(r, "original_router", None)  # an included router (FastAPI keeps it whole)
            if inner is not None:
                out += walk_routes(inner.routes, prefix)  # its routes' paths hold its own prefix
            elif "GET" in getattr(r, "methods", set()):
                out.append(prefix + r.path)
        return out

    return [p for p in walk_routes(router.routes, PREFIX) if p != "/web/events"]


def web_login(base: str) -> httpx.Client:
    """An httpx client logged in to the web interface as the reader (password and cookie)."""
    c = httpx.Client(base_url=base, timeout=60)
    page = c.get("/web/login").text
    csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', page).group(1)
    r = c.post("/web/login", data={"csrf": csrf, "next": "/web/projects", "name": READER[0], "password": READER[1]})
    assert r.status_code == 303, r.text
    return c


def test_web_screens_show_nothing_of_another_project(walk):
    base = walk["stack"].url("query")
    screens = web_screens()
    problems, requests, seen = [], 0, {}
    c = web_login(base)
    try:
        for route in screens:
            scoped = "{project}" in route
            answers = {}
            for project in (A, B, C) if scoped else (A,):
                v = params_for(project, walk)
                url = re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: str(v.get(m.group(1), "1")), route)
                r = c.get(url, params={"q": v["q"]} if "search" in route else None)
                requests += 1
                if r.status_code >= 500 or leaks(r.text, url):
                    problems.append((url, r.status_code, r.text[:300]))
                answers[project] = (r.status_code, re.sub(r'value="[0-9a-f]{64}"', "", r.text))
                if project == A:
                    seen[route] = r.status_code
                    if route.endswith("/page/{path:path}"):
                        assert "Retry policy" in r.text and "backlinks" in r.text.lower(), r.text[:2000]
            if scoped and answers[B][0] != answers[C][0]:
                problems.append(("bravo differs from unknown", route, answers[B][0], answers[C][0]))
    finally:
        c.close()
    print(f"\nweb: {len(screens)} screens walked ({requests} requests): {seen}")
    assert sum(status == 200 for status in seen.values()) >= 10, seen  # logged in: the screens were shown
    assert not problems, problems
    assert len(screens) >= 10, screens


def test_page_screen_in_chromium(walk, tmp_path):
    """The page screen of alpha's page that bravo links to, in a real browser."""
    from aimem_testing.browser import chromium

    base = walk["stack"].url("query")
    with chromium() as browser:
        ctx = browser.new_context()
        page = ctx.new_page()
        page.goto(f"{base}/web/login")
        page.fill("#name", READER[0])
        page.fill("#password", READER[1])
        page.locator("form[aria-labelledby=pw-h] button").click()
        page.wait_for_url(re.compile(r".*/web/projects$"))
        for path in (f"/web/p/default/{A}/page/{A_PAGE}", f"/web/p/default/{A}", f"/web/p/default/{A}/handoffs",
                     f"/web/p/default/{A}/sessions/{SHARED_SESSION}", f"/web/p/default/{A}/search?q=retry+shared+plan",
                     "/web/projects", "/web/search?q=retry+shared+plan"):
            resp = page.goto(base + path)
            assert resp.status == 200, path
            text = page.content().lower()
            assert MARK not in text, path
        page.goto(f"{base}/web/p/default/{A}/page/{A_PAGE}")
        body = page.locator("main").inner_text()
        assert "Retry policy" in body and MARK not in body.lower()
        page.screenshot(path=str(tmp_path / "alpha-page.png"), full_page=True)
        resp = page.goto(f"{base}/web/p/default/{B}/page/{B_PAGE}")
        assert resp.status == 404 and MARK not in page.locator("p.error").inner_text().lower().replace(B_PAGE, "")
        ctx.close()


def test_a_writer_of_alpha_pops_mail_without_learning_the_sender(walk):
    """Popping (a write) returns the message addressed to alpha, its sender unnamed (last: it
    takes the message out of alpha's inbox)."""
    with admin(walk["stack"]) as a:
        for r in (a.post("/admin/users", json={"name": "wanda"}),
                  a.put("/admin/grants", json={"user": "wanda", "workspace": "default", "project": A,
                                               "can_write": True})):
            assert r.status_code == 200, r.text
        key = a.post("/admin/api-keys", json={"user": "wanda", "name": "pop"}).json()["key"]
    res = asyncio.run(mcp_as(walk["mcp"], key, [("memory_message_pop", {"project": A})]))[0]
    kind, text = outcome(res)
    assert kind == "ok", text
    msg = json.loads(text)["message"]
    assert (msg["from_workspace"], msg["from_project"], msg["body"]) == (None, None, "please re-run the retry tests")
    assert 'from="another project"' in msg["fenced"] and B not in msg["fenced"]


def test_the_mcp_idle_timeout_is_shown_where_operators_look(walk):
    """``[mcp] session_idle_timeout_s`` (set by env for the whole ``aimem up``) in the gateway's
    /healthz and in /admin/status."""
    stack = walk["stack"]
    health = httpx.get(stack.url("mcp-gateway") + "/healthz", timeout=30).json()
    assert health["checks"]["mcp_sessions"] == {"idle_timeout_s": 900.0}
    with admin(stack) as a:
        assert a.get("/admin/status").json()["mcp"] == {"session_idle_timeout_s": 900.0}
