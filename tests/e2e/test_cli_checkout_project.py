"""The CLI reads the project the hooks write: two checkouts sharing a folder name never read
each other's memory.

The real stack (``live``), real git repositories, every event through ``aimem hook`` as an
agent calls it, and every read through the ``aimem`` CLI as a subprocess in the checkout:

* two repositories named ``api`` with different origins are ``api`` and ``api-2``; in the
  second one ``search``, ``handoffs`` and ``read-page`` answer its own memory, never the
  first one's (``--project`` still names any project); ``bootstrap`` and a maintainer job
  (``lint``) work on its own project;
* a repository re-created at the same path (a new ``.git/aimem-id``) is ``<name>-2``; after
  ``aimem run`` there, ``workstreams`` and ``show`` list its workstream;
* a checkout the server has never seen reads nothing of another repository with its name;
* ``GET /api/v1/projects/resolve`` (what the CLI asks) with bad keys is a 400.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from aimem_testing.gitrepo import git, make_repo, wait_for
from aimem_testing.stack import LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

AIMEM = str(Path(sys.executable).with_name("aimem"))


def cli_env(live: LocalStack, client_dir: Path, **extra: str) -> dict[str, str]:
    """A developer shell: the stack's URLs and token, its own hook spool and HOME."""
    client_dir.mkdir(parents=True, exist_ok=True)
    return live.client_env(AIMEM_DATA_DIR=str(client_dir), HOME=str(client_dir), AIMEM_HOOK_BUDGET_MS="5000",
                           **extra)


def aimem(env: dict[str, str], cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([AIMEM, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc


def hook(env: dict[str, str], cwd: Path, event: str, sid: str, **fields: Any) -> None:
    payload = {"session_id": sid, "transcript_path": f"/home/dev/.claude/projects/x/{sid}.jsonl", "cwd": str(cwd),
               "hook_event_name": event, "permission_mode": "default", **fields}
    proc = subprocess.run([AIMEM, "hook", "--agent", "claude-code", "--event", event], input=json.dumps(payload),
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def session(env: dict[str, str], cwd: Path, sid: str, prompt: str) -> None:
    """A whole short session: start, one prompt, one edit, the answer, the end (a handoff)."""
    hook(env, cwd, "SessionStart", sid, source="startup")
    hook(env, cwd, "UserPromptSubmit", sid, prompt=prompt)
    hook(env, cwd, "PostToolUse", sid, tool_name="Edit",
         tool_input={"file_path": str(cwd / "app.py"), "old_string": "a", "new_string": "b"},
         tool_response={"filePath": str(cwd / "app.py")})
    hook(env, cwd, "Stop", sid, last_assistant_message=f"done: {prompt}")
    hook(env, cwd, "SessionEnd", sid, reason="exit")


def rows(live: LocalStack, sql: str, *args: Any) -> list[sqlite3.Row]:
    conn = sqlite3.connect(f"file:{live.data_dir / 'db' / 'memory.sqlite'}?mode=ro", uri=True, timeout=10)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def project_of(live: LocalStack, sid: str) -> str | None:
    """The project name of session ``sid``'s page once the writer wrote it, else None."""
    r = rows(live, "SELECT p.name FROM pages g JOIN projects p ON p.id = g.project_id"
                   " WHERE g.session_id = ? AND g.is_latest = 1", sid)
    return r[0][0] if r else None


def open_handoff_sessions(live: LocalStack, sid: str) -> bool:
    return bool(rows(live, "SELECT 1 FROM handoffs WHERE from_session_id = ?", sid))


def hits(env: dict[str, str], cwd: Path, query: str, *extra: str) -> list[dict]:
    return json.loads(aimem(env, cwd, "search", query, "--json", *extra).stdout)["hits"]


@pytest.fixture(scope="module")
def twins(live: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two repositories named ``api`` (origins client A and client B), one session each."""
    base = tmp_path_factory.mktemp("twins")
    tag = uuid.uuid4().hex[:6]
    out: dict[str, Any] = {"env": cli_env(live, base / "client"), "tag": tag}
    for side in ("A", "B"):
        repo = make_repo(base / side / "api", origin=f"https://example.com/client{side}/api.git")
        sid = f"cl{side}-{tag}"
        session(out["env"], repo, sid, f"remember the marmot{side}{tag} migration plan")
        out[side] = (repo, sid)
    for side in ("A", "B"):
        sid = out[side][1]
        wait_for(lambda: project_of(live, sid), what=f"the page of session {sid}")
        wait_for(lambda: open_handoff_sessions(live, sid), what=f"the handoff of session {sid}")
    assert (project_of(live, out["A"][1]), project_of(live, out["B"][1])) == ("api", "api-2")
    return out


def test_second_checkout_searches_its_own_memory(live, twins):
    env, tag = twins["env"], twins["tag"]
    repo_b, sid_b = twins["B"]
    mine = hits(env, repo_b, f"marmotB{tag}")
    assert mine and {h["project"] for h in mine} == {"api-2"}, mine
    assert hits(env, repo_b, f"marmotA{tag}") == []  # client A's memory is not this checkout's
    human = aimem(env, repo_b, "search", f"marmotA{tag}").stdout
    assert human.strip() == "no hits"
    # From a subdirectory of the checkout too (the repository's identity, not the folder's).
    sub = repo_b / "src" / "deep"
    sub.mkdir(parents=True, exist_ok=True)
    assert {h["project"] for h in hits(env, sub, f"marmotB{tag}")} == {"api-2"}
    # The first checkout still reads its own, and --project still names any project.
    repo_a, _ = twins["A"]
    assert {h["project"] for h in hits(env, repo_a, f"marmotA{tag}")} == {"api"}
    assert {h["project"] for h in hits(env, repo_b, f"marmotA{tag}", "--project", "api")} == {"api"}


def test_second_checkout_lists_its_own_handoffs_and_pages(live, twins):
    env = twins["env"]
    (repo_a, sid_a), (repo_b, sid_b) = twins["A"], twins["B"]
    listed = json.loads(aimem(env, repo_b, "handoffs", "--json").stdout)
    assert [h["from_session_id"] for h in listed] == [sid_b], listed
    listed_a = json.loads(aimem(env, repo_a, "handoffs", "--json").stdout)
    assert [h["from_session_id"] for h in listed_a] == [sid_a], listed_a

    page_b = aimem(env, repo_b, "read-page", f"sessions/{sid_b}.md").stdout
    assert f"marmotB{twins['tag']}" in page_b
    other = aimem(env, repo_b, "read-page", f"sessions/{sid_a}.md", check=False)
    assert other.returncode == 1 and f"marmotA{twins['tag']}" not in other.stdout + other.stderr
    assert len(other.stderr.strip().splitlines()) == 1 and other.stderr.startswith("aimem: "), other.stderr
    named = aimem(env, repo_b, "read-page", f"sessions/{sid_a}.md", "--project", "api").stdout
    assert f"marmotA{twins['tag']}" in named


def test_second_checkout_writes_and_maintains_its_own_project(live, twins):
    """``bootstrap`` writes its overview page into the checkout's project, and a maintainer
    job (``lint``) runs on it: neither touches client A's ``api``."""
    env = twins["env"]
    repo_b, _ = twins["B"]
    (repo_b / "README.md").write_text("# api of client B\n\nThe billing API.\n")
    out = aimem(env, repo_b, "bootstrap", "--no-llm", "--json")
    assert json.loads(out.stdout)["created"] is True
    placed = rows(live, "SELECT p.name FROM pages g JOIN projects p ON p.id = g.project_id"
                        " WHERE g.path = 'bootstrap.md' AND g.is_latest = 1")
    assert [r[0] for r in placed] == ["api-2"]
    lint = json.loads(aimem({**env, "AIMEM_BUS__NATS_URL": live.nats_url}, repo_b, "lint", "--json").stdout)
    assert lint["project"] == "api-2", lint


def test_unseen_checkout_reads_nothing_of_a_namesake(live, twins, tmp_path):
    """A third ``api`` the server has never seen: not client A's memory, and no project made."""
    env, tag = twins["env"], twins["tag"]
    repo_c = make_repo(tmp_path / "C" / "api", origin="https://example.com/clientC/api.git")
    before = rows(live, "SELECT count(*) FROM projects")[0][0]
    got = aimem(env, repo_c, "search", f"marmotA{tag}", "--json", check=False)
    assert f"marmotA{tag}" not in got.stdout
    ws = aimem(env, repo_c, "workstreams")
    assert ws.stdout.strip() == "no workstreams in default/api-3 yet (start one with `aimem run HARNESS`)"
    boot = aimem(env, repo_c, "bootstrap", "--no-llm", check=False)
    assert boot.returncode == 1 and boot.stderr.strip() == (
        f"aimem: {repo_c} has no project yet (default/api is another repository's): run an agent session there "
        "first, or pass --project"), boot.stderr
    assert rows(live, "SELECT count(*) FROM projects")[0][0] == before  # asking created nothing
    # A plain folder named like a project (no repository: no keys) keeps its name.
    plain = tmp_path / "plain" / "api"
    plain.mkdir(parents=True)
    assert {h["project"] for h in hits(env, plain, f"marmotA{tag}")} == {"api"}


def test_recreated_repository_lists_its_workstream(live, tmp_path):
    """The same path re-created (``rm -rf; git init``): a new repository id → ``<name>-2``;
    ``aimem run`` there, then ``workstreams`` and ``show`` answer that run's workstream."""
    tag = uuid.uuid4().hex[:6]
    env = cli_env(live, tmp_path / "client")
    name = f"t3repo{tag}"
    repo = make_repo(tmp_path / name)
    session(env, repo, f"old-{tag}", "the first repository here")
    wait_for(lambda: project_of(live, f"old-{tag}"), what="the first repository's page")
    shutil.rmtree(repo)
    repo = make_repo(tmp_path / name)
    (repo / "README.md").write_text("again\n")
    git(repo, "add", ".")
    git(repo, "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "init")
    session(env, repo, f"new-{tag}", "the second repository here")
    wait_for(lambda: project_of(live, f"new-{tag}"), what="the second repository's page")
    assert (project_of(live, f"old-{tag}"), project_of(live, f"new-{tag}")) == (name, f"{name}-2")

    # `aimem run` with a stand-in harness binary (it exits at once; the run still records its
    # git checkpoint in the checkout's workstream).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "claude"
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    run_env = {**env, "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"}
    aimem(run_env, repo, "run", "claude-code", "--no-autowire")
    [ws] = rows(live, "SELECT w.id, p.name FROM workstreams w JOIN projects p ON p.id = w.project_id"
                      " WHERE w.checkout_root = ?", str(repo.resolve()))
    assert ws["name"] == f"{name}-2"

    listed = json.loads(aimem(env, repo, "workstreams", "--json").stdout)
    assert [w["id"] for w in listed] == [ws["id"]], listed
    shown = aimem(env, repo, "show").stdout
    assert ws["id"] in shown and "Git checkpoint after the claude-code run" in shown, shown


def test_resolve_route_refuses_bad_keys(live, twins):
    url = live.url("query") + "/api/v1/projects/resolve"
    with httpx.Client(headers=live.headers, timeout=10) as c:
        for params, code in (({"project": "api", "repo_id": "XYZ"}, "invalid_field"),
                             ({"project": "api", "root": "/a\x00b"}, "invalid_field"),
                             ({"project": "bad name!"}, "invalid_name")):
            r = c.get(url, params=params)
            assert r.status_code == 400 and r.json()["error"]["code"] == code, (params, r.text)
        r = c.get(url, params={"project": "api", "origin": "example.com/clientA/api"})
        assert r.status_code == 200 and r.json()["project"] == "api" and r.json()["exists"] is True, r.text
        r = c.get(url, params={"project": "api", "origin": "example.com/nobody/api"})
        assert r.status_code == 200 and r.json()["exists"] is False and r.json()["project_id"] is None, r.text
        r = c.get(url, params={"project": "api"}, headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401


def test_scoped_key_resolves_only_what_it_may_read(live, twins):
    """A user key granted ``api-2`` only: the route names ``api-2`` for checkout B and the same
    404 as an unknown project for checkout A (it never learns A's project); the CLI with that
    key reads B's memory in B, and in A gets one line and exit 1."""
    tag = twins["tag"]
    user = f"reader{tag}"
    with httpx.Client(base_url=live.url("query"), headers=live.headers, timeout=30) as admin:
        admin.post("/admin/users", json={"name": user}).raise_for_status()
        admin.put("/admin/grants", json={"user": user, "workspace": "default", "project": "api-2",
                                         "can_write": False}).raise_for_status()
        key = admin.post("/admin/api-keys", json={"user": user, "name": "cli"}).json()["key"]
        missing = admin.get("/api/v1/projects/resolve")
        assert missing.status_code == 400, missing.text
    url = live.url("query") + "/api/v1/projects/resolve"
    with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=10) as c:
        r = c.get(url, params={"project": "api", "origin": "example.com/clientB/api"})
        assert r.status_code == 200 and r.json()["project"] == "api-2", r.text
        r = c.get(url, params={"project": "api", "origin": "example.com/clientA/api"})
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", r.text
    env = {**twins["env"], "AIMEM_AUTH__TOKEN": key}
    (repo_a, _), (repo_b, _) = twins["A"], twins["B"]
    assert {h["project"] for h in hits(env, repo_b, f"marmotB{tag}")} == {"api-2"}
    denied = aimem(env, repo_a, "search", f"marmotA{tag}", check=False)
    assert denied.returncode == 1 and f"marmotA{tag}" not in denied.stdout
    assert len(denied.stderr.strip().splitlines()) == 1 and denied.stderr.startswith("aimem: "), denied.stderr
