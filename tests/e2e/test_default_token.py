"""A fresh ``aimem up`` is never open, and its clients need no manual step.

* the first start writes ``<data_dir>/auth/token`` (0600, in a 0700 folder); without it
  ``/hook``, ``/api/v1/...`` and ``/mcp`` answer 401;
* the CLI run on the server's data dir, and the installers pointed at it, find the token by
  themselves: ``install-hooks`` gives the hook client its own copy (0600) and ``install-mcp``
  writes it as the MCP entry's ``Authorization`` header, which the official MCP client sends;
  the hook command then posts with no ``AIMEM_*`` token in its environment;
* user API keys on the hook routes: a write grant on project A posts hooks for A (stored),
  403 for project B; a read-only key gets 403; an unknown ``aim_`` key 401; the root token
  still works; ``install-hooks --api-key`` makes the hook client send the key.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from aimem_testing.stack import LocalStack

pytestmark = [pytest.mark.e2e]
AIMEM = str(Path(sys.executable).with_name("aimem"))


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> LocalStack:
    """One stack started the way a new user starts it: no token configured anywhere."""
    base = tmp_path_factory.mktemp("fresh")
    with LocalStack(base / "data", base / "logs") as stack:
        yield stack


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without any ``AIMEM_*`` setting (so no token), plus ``extra``."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")} | extra


def aimem(env: dict[str, str], *args: str, stdin: str | None = None,
          cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([AIMEM, *args], capture_output=True, text=True, env=env, timeout=60, input=stdin, cwd=cwd)


def prompt(project: str, text: str) -> dict:
    sid = f"s-{uuid.uuid4().hex[:8]}"
    return {"session_id": sid, "transcript_path": f"/tmp/{sid}.jsonl", "cwd": f"/home/dev/{project}",
            "hook_event_name": "UserPromptSubmit", "prompt": text}


def stored(stack: LocalStack, text: str, timeout_s: float = 30.0) -> list[str]:
    """Project names of the observations whose body holds ``text`` (waits until there is one)."""
    db = stack.data_dir / "db" / "memory.sqlite"
    deadline = time.monotonic() + timeout_s
    while True:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = [r[0] for r in conn.execute(
                "SELECT p.name FROM observations o JOIN projects p ON p.id = o.project_id WHERE o.body LIKE ?",
                (f"%{text}%",))]
        finally:
            conn.close()
        if rows or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


async def mcp_tools(url: str, headers: dict[str, str]) -> list[str]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            return [t.name for t in (await client.list_tools()).tools]


def test_first_start_writes_a_private_token_and_every_service_wants_it(fresh) -> None:
    path = fresh.data_dir / "auth" / "token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert fresh.token == path.read_text().strip() and len(fresh.token) >= 40
    # the memory itself is the owner's only: data dir 0700, DB and wiki files 0600
    assert stat.S_IMODE(fresh.data_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((fresh.data_dir / "db" / "memory.sqlite").stat().st_mode) == 0o600
    assert stat.S_IMODE((fresh.data_dir / "wiki").stat().st_mode) == 0o700
    assert f"root token created in {path}" in (fresh.log_dir / "up.log").read_text()

    hook = fresh.url("ingress") + "/hook?agent=claude-code"
    api = fresh.url("query") + "/api/v1/status"
    mcp = fresh.url("mcp-gateway") + "/mcp"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers in ({}, {"Authorization": "Bearer not-the-token"}):
        r = httpx.post(hook, json=prompt("acme", "no token"), headers=headers, timeout=10)
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", r.text
        r = httpx.post(fresh.url("ingress") + "/hook/session-start-context?agent=claude-code",
                       json=prompt("acme", "no token"), headers=headers, timeout=10)
        assert r.status_code == 401, r.text
        r = httpx.get(api, headers=headers, timeout=10)
        assert r.status_code == 401, r.text
        r = httpx.post(mcp, json=init, headers={**accept, **headers}, timeout=10)
        assert r.status_code == 401, r.text
    assert httpx.post(hook, json=prompt("acme", "with the token"), headers=fresh.headers,
                      timeout=10).status_code == 202
    assert httpx.get(api, headers=fresh.headers, timeout=10).status_code == 200
    assert "memory_query" in asyncio.run(mcp_tools(mcp, fresh.headers))
    assert stored(fresh, "with the token") == ["acme"]
    assert stored(fresh, "no token", timeout_s=0) == []

    # The CLI on the server's data dir: no token in its environment, none on its command line.
    out = aimem(clean_env(AIMEM_DATA_DIR=str(fresh.data_dir), AIMEM_SERVER_URL=fresh.url("query")),
                "status", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["data_dir"] == str(fresh.data_dir)


def test_the_bus_wants_the_token_too(fresh) -> None:
    """A local process without the token cannot publish commands to the writer over NATS."""
    import nats
    from nats.errors import Error as NatsError

    async def attempt(token: str | None) -> str:
        try:
            nc = await nats.connect(fresh.nats_url, token=token, allow_reconnect=False, connect_timeout=2,
                                    max_reconnect_attempts=0)
        except (NatsError, OSError, asyncio.TimeoutError) as exc:
            return f"refused: {exc!r}"
        try:
            await nc.jetstream().stream_info("AIMEM_MUT")
            return "connected"
        finally:
            await nc.close()

    for bad in (None, "not-the-token"):
        assert asyncio.run(attempt(bad)).startswith("refused"), bad
    assert asyncio.run(attempt(fresh.token)) == "connected"
    conf = fresh.data_dir / "nats.conf"
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600 and fresh.token in conf.read_text()


def test_installers_carry_the_token_to_the_hook_client_and_the_mcp_client(fresh, tmp_path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(HOME=str(home))
    env.pop("XDG_DATA_HOME", None)
    for args in (("install-hooks", "--client", "claude-code"), ("install-mcp", "--client", "claude-code",
                                                                "--url", fresh.url("mcp-gateway") + "/mcp")):
        out = aimem(env, *args, "--home", str(home), "--data-dir", str(fresh.data_dir))
        assert out.returncode == 0, out.stderr
        assert fresh.token not in out.stdout + out.stderr  # never printed

    # The hook client's own copy, owner-only; the hook commands carry no secret.
    copy = home / ".local" / "share" / "aimem" / "auth" / "client-token"
    assert copy.read_text().strip() == fresh.token and stat.S_IMODE(copy.stat().st_mode) == 0o600
    settings = (home / ".claude" / "settings.json").read_text()
    assert fresh.token not in settings and " hook --agent claude-code" in settings

    # The MCP entry sends it, and the official client gets in with exactly what was written.
    claude = home / ".claude.json"
    entry = json.loads(claude.read_text())["mcpServers"]["aimem"]
    assert entry["headers"] == {"Authorization": f"Bearer {fresh.token}"}
    assert stat.S_IMODE(claude.stat().st_mode) == 0o600
    assert "memory_query" in asyncio.run(mcp_tools(entry["url"], entry["headers"]))

    # The hook command as Claude Code runs it: HOME only, no AIMEM_* token or data dir.
    event = prompt("installed", "sent by the installed hook")
    out = subprocess.run([AIMEM, "hook", "--agent", "claude-code"], input=json.dumps(event), text=True,
                         capture_output=True, timeout=30,
                         env=env | {"AIMEM_INGRESS_URL": fresh.url("ingress"), "AIMEM_HOOK_BUDGET_MS": "3000"})
    assert out.returncode == 0, out.stderr
    assert stored(fresh, "sent by the installed hook") == ["installed"]

    # The CLI outside any data dir falls back to the hook client's token. "Outside" is a
    # folder of its own: the repository may hold the ./data (and token) `make up` left there.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = aimem(env | {"AIMEM_SERVER_URL": fresh.url("query")}, "status", "--json", cwd=elsewhere)
    assert out.returncode == 0, out.stderr


def _admin(stack: LocalStack, method: str, path: str, body: dict) -> dict:
    r = httpx.request(method, stack.url("query") + path, json=body, headers=stack.headers, timeout=30)
    assert r.status_code in (200, 201), r.text
    return r.json()


def test_hook_takes_user_keys_with_a_write_grant_on_the_events_project(fresh, tmp_path) -> None:
    for user, write in (("writer-a", True), ("reader-a", False)):
        _admin(fresh, "POST", "/admin/users", {"name": user})
        _admin(fresh, "PUT", "/admin/grants", {"user": user, "workspace": "*", "project": "proj-a",
                                                "can_read": True, "can_write": write})
    writer_key = _admin(fresh, "POST", "/admin/api-keys", {"user": "writer-a"})["key"]
    reader_key = _admin(fresh, "POST", "/admin/api-keys", {"user": "reader-a"})["key"]
    hook = fresh.url("ingress") + "/hook?agent=claude-code"
    start = fresh.url("ingress") + "/hook/session-start-context?agent=claude-code"

    def post(url: str, key: str, project: str, text: str) -> httpx.Response:
        return httpx.post(url, json=prompt(project, text), headers={"Authorization": f"Bearer {key}"}, timeout=10)

    r = post(hook, writer_key, "proj-a", "alpha by key")
    assert r.status_code == 202, r.text
    assert stored(fresh, "alpha by key") == ["proj-a"]
    r = post(hook, writer_key, "proj-b", "beta by key")
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", r.text
    assert post(start, writer_key, "proj-b", "beta start").status_code == 403
    assert post(start, writer_key, "proj-a", "alpha start").status_code == 200
    # An explicit ?project= naming A does not let B's key holder past the check either way.
    r = httpx.post(hook + "&project=proj-b", json=prompt("proj-a", "beta by query"),
                   headers={"Authorization": f"Bearer {writer_key}"}, timeout=10)
    assert r.status_code == 403, r.text
    # The grant is checked on the project the event lands in: identity keys naming B's
    # repository take it to B whatever the cwd's name says.
    b_root = {"root": "/home/dev/repos/proj-b", "origin": "https://git.example/team/proj-b"}
    assert httpx.post(hook, params=b_root, json=prompt("proj-b", "keyed by root"), headers=fresh.headers,
                      timeout=10).status_code == 202
    assert stored(fresh, "keyed by root") == ["proj-b"]
    r = httpx.post(hook, params=b_root, json=prompt("proj-a", "into b by its keys"),
                   headers={"Authorization": f"Bearer {writer_key}"}, timeout=10)
    assert r.status_code == 403, r.text
    r = post(hook, reader_key, "proj-a", "read-only key")
    assert r.status_code == 403, r.text
    r = post(hook, "aim_" + "x" * 43, "proj-a", "unknown key")
    assert r.status_code == 401, r.text
    r = httpx.post(fresh.url("ingress") + "/hook/import", headers={"Authorization": f"Bearer {writer_key}"},
                   json={"agent": "claude-code", "project": "proj-b", "events": []}, timeout=10)
    assert r.status_code == 403, r.text
    assert post(hook, fresh.token, "proj-b", "beta by root").status_code == 202
    assert stored(fresh, "beta by root") == ["proj-b"]
    assert stored(fresh, "beta by key", timeout_s=0) == stored(fresh, "read-only key", timeout_s=0) == []
    assert stored(fresh, "into b by its keys", timeout_s=0) == []

    # `install-hooks --api-key`: the hook client sends the user's key, not the root token.
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(HOME=str(home))
    env.pop("XDG_DATA_HOME", None)
    out = aimem(env, "install-hooks", "--client", "claude-code", "--home", str(home), "--api-key", writer_key)
    assert out.returncode == 0, out.stderr
    assert (home / ".local/share/aimem/auth/client-token").read_text().strip() == writer_key
    for project, text in (("proj-a", "alpha via installed key"), ("proj-b", "beta via installed key")):
        subprocess.run([AIMEM, "hook", "--agent", "claude-code"], input=json.dumps(prompt(project, text)), text=True,
                       capture_output=True, timeout=30, check=True,
                       env=env | {"AIMEM_INGRESS_URL": fresh.url("ingress"), "AIMEM_HOOK_BUDGET_MS": "3000"})
    assert stored(fresh, "alpha via installed key") == ["proj-a"]
    assert stored(fresh, "beta via installed key", timeout_s=1) == []  # 403: kept in the spool, not stored


def _projects(stack: LocalStack) -> dict[str, str | None]:
    """``{project name: origin}`` of every project of the default workspace."""
    conn = sqlite3.connect(f"file:{stack.data_dir / 'db' / 'memory.sqlite'}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT p.name, p.origin FROM projects p JOIN workspaces w ON w.id = p.workspace_id"
                                 " WHERE w.name = 'default'"))
    finally:
        conn.close()


def test_a_user_key_never_creates_a_project_under_another_name(fresh) -> None:
    """A key granted ``acme-api`` cannot post another repository's identity keys under that
    name: the writer would create ``acme-api-2`` keyed to that repository, a project no grant
    names, and the repository's own key (granted ``payments``) would be shut out for good."""
    keys = {}
    for user, project in (("acme-dev", "acme-api"), ("carol", "payments")):
        _admin(fresh, "POST", "/admin/users", {"name": user})
        _admin(fresh, "PUT", "/admin/grants", {"user": user, "workspace": "*", "project": project,
                                                "can_read": True, "can_write": True})
        keys[user] = _admin(fresh, "POST", "/admin/api-keys", {"user": user})["key"]
    hook = fresh.url("ingress") + "/hook?agent=claude-code"
    acme = {"project": "acme-api", "root": "/home/dev/acme-api", "origin": "github.com/acme/api"}
    carol = {"root": "/home/carol/payments", "origin": "github.com/acme/payments"}

    def post(user: str, params: dict, text: str) -> httpx.Response:
        return httpx.post(hook, params=params, json=prompt(str(params.get("project", "payments")), text),
                          headers={"Authorization": f"Bearer {keys[user]}"}, timeout=10)

    # A new repository under a granted name that does not exist yet: created under that name.
    assert post("acme-dev", acme, "acme first").status_code == 202
    assert stored(fresh, "acme first") == ["acme-api"]
    # Another repository's keys under the key's granted name: refused, nothing published.
    r = post("acme-dev", {**carol, "project": "acme-api"}, "capture payments")
    assert r.status_code == 403, r.text
    err = r.json()["error"]
    assert err["code"] == "forbidden" and "belongs to another repository" in err["message"], err
    assert err["data"]["would_create"] == "acme-api-2"
    start = fresh.url("ingress") + "/hook/session-start-context?agent=claude-code"
    assert httpx.post(start, params={**carol, "project": "acme-api"}, json=prompt("acme-api", "start"),
                      headers={"Authorization": f"Bearer {keys['acme-dev']}"}, timeout=10).status_code == 403
    # The key's own repository still lands in its project, whatever name the cwd gives.
    assert post("acme-dev", {**acme, "project": "acme-api-clone"}, "acme again").status_code == 202
    assert stored(fresh, "acme again") == ["acme-api"]
    # The other repository's own key still gets its project, keyed to its repository.
    assert post("carol", {**carol, "project": "payments"}, "carol first").status_code == 202
    assert stored(fresh, "carol first") == ["payments"]
    assert stored(fresh, "capture payments", timeout_s=0) == []
    projects = _projects(fresh)
    assert projects["payments"] == "github.com/acme/payments" and projects["acme-api"] == "github.com/acme/api"
    assert not any(name.startswith("acme-api-") for name in projects), projects
    # The root token keeps its behaviour: a second repository under a taken name gets `name-2`.
    assert httpx.post(hook, params={"project": "acme-api", "root": "/srv/other", "origin": "github.com/other/api"},
                      json=prompt("acme-api", "root second repo"), headers=fresh.headers, timeout=10).status_code == 202
    assert stored(fresh, "root second repo") == ["acme-api-2"]


def test_a_project_the_server_has_not_seen_lists_no_workstreams(fresh, tmp_path) -> None:
    """``aimem workstreams`` in a brand-new checkout is an empty list (``--json``: ``[]``) or one
    line saying how to start one, exit 0: not the server's 404 for a project it has not seen."""
    env = clean_env(AIMEM_DATA_DIR=str(fresh.data_dir), AIMEM_SERVER_URL=fresh.url("query"))
    repo = tmp_path / "brand-new-checkout"
    repo.mkdir()
    out = aimem(env, "workstreams", "--json", cwd=repo)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []
    out = aimem(env, "workstreams", cwd=repo)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "no workstreams in default/brand-new-checkout yet (start one with `aimem run HARNESS`)"
    out = aimem(env, "workstreams", "--workspace", "no-such-space", "--json", cwd=repo)
    assert out.returncode == 0 and json.loads(out.stdout) == [], out.stderr
