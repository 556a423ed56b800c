"""Continuity off the happy path, through the real hook client → ingress → JetStream → writer.

Real git repositories made by the test (a subdirectory, ``git worktree add``, a submodule,
two repositories sharing a folder name, a ``.aimem.toml`` marker), a real nats-server and
the real service processes; every event goes through ``aimem hook`` exactly as Claude Code
calls it (payload on stdin, context on stdout).

* identity: subdirectory → the repository's project; two repositories named ``api`` → ``api``
  and ``api-2`` (pages and handoffs never mixed, keys shown by ``/api/v1/workspaces``); two
  worktrees → one project, one handoff chain; a submodule → its own project; a marker wins;
  a subdirectory session receives the root's handoff exactly once;
* capture rules: ``capture = false`` and excluded globs leave no trace in the DB files, the
  wiki and its git history, the NATS store, the spool or the logs;
* lifecycle: compact / resume / clear starts never claim; an empty session gives the
  handoff back; an idle session is finalised (short quiet period) and a later event
  resumes it, the re-end updating the page.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from aimem_testing.gitrepo import git, make_repo, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


# -- helpers -------------------------------------------------------------------------------------
class Client:
    """One developer machine: ``aimem hook`` with its own data dir (spool) against ``url``."""

    def __init__(self, url: str, data_dir: Path):
        self.url, self.data_dir = url, data_dir

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
        env.update(AIMEM_DATA_DIR=str(self.data_dir), AIMEM_INGRESS_URL=self.url,
                   AIMEM_HOOK_BUDGET_MS="5000")  # a loaded box: the budget grows, not the behaviour
        return env

    def hook(self, event: str, sid: str, cwd: Path, **fields: Any) -> subprocess.CompletedProcess:
        payload = {"session_id": sid, "transcript_path": f"/home/dev/.claude/projects/x/{sid}.jsonl",
                   "cwd": str(cwd), "hook_event_name": event, "permission_mode": "default", **fields}
        proc = subprocess.run([str(Path(sys.executable).with_name("aimem")), "hook", "--agent", "claude-code",
                               "--event", event], input=json.dumps(payload).encode(), env=self.env(),
                              capture_output=True, timeout=60, cwd=cwd)
        assert proc.returncode == 0, proc.stderr
        return proc

    def start(self, sid: str, cwd: Path, source: str = "startup") -> str:
        """Session start; return the injected context ('' when none)."""
        out = self.hook("SessionStart", sid, cwd, source=source).stdout
        return json.loads(out)["hookSpecificOutput"]["additionalContext"] if out.strip() else ""

    def work(self, sid: str, cwd: Path, prompt: str, file: str = "src/app.py") -> None:
        self.hook("UserPromptSubmit", sid, cwd, prompt=prompt)
        self.hook("PostToolUse", sid, cwd, tool_name="Edit",
                  tool_input={"file_path": str(cwd / file), "old_string": "a", "new_string": "b"},
                  tool_response={"filePath": str(cwd / file)})
        self.hook("Stop", sid, cwd, last_assistant_message=f"done: {prompt}")

    def end(self, sid: str, cwd: Path) -> None:
        self.hook("SessionEnd", sid, cwd, reason="exit")

    def drain(self) -> None:
        subprocess.run([sys.executable, "-m", "aimem_cli.hookclient", "--drain"], env=self.env(), timeout=120,
                       check=True)

    def session(self, sid: str, cwd: Path, prompt: str) -> str:
        """A whole session: start (returns its context), work, end."""
        ctx = self.start(sid, cwd)
        self.work(sid, cwd, prompt)
        self.end(sid, cwd)
        return ctx


class Store:
    """Read-only look at the writer's SQLite file."""

    def __init__(self, db_path: Path):
        self.db_path = db_path

    def rows(self, sql: str, *args: Any) -> list[sqlite3.Row]:
        if not self.db_path.exists():
            return []
        conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=10)
        conn.row_factory = sqlite3.Row
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()

    def project_of(self, sid: str) -> str | None:
        r = self.rows("SELECT w.name || '/' || p.name FROM sessions s JOIN projects p ON p.id = s.project_id"
                      " JOIN workspaces w ON w.id = p.workspace_id WHERE s.session_id = ?", sid)
        return r[0][0] if r else None

    def handoff(self, sid: str) -> sqlite3.Row | None:
        r = self.rows("SELECT h.*, p.name AS project FROM handoffs h JOIN projects p ON p.id = h.project_id"
                      " WHERE from_session_id = ?", sid)
        return r[0] if r else None

    def page_project(self, sid: str) -> list[str]:
        return [r[0] for r in self.rows("SELECT p.name FROM pages g JOIN projects p ON p.id = g.project_id"
                                        " WHERE g.session_id = ? AND g.is_latest = 1", sid)]


def sid(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


# -- identity ------------------------------------------------------------------------------------
@pytest.mark.timeout(600)
def test_project_identity_through_the_hook_client(services, settings, tmp_path: Path) -> None:
    procs = services("writer", "ingress", "query")
    client = Client(procs["ingress"].url, tmp_path / "client")
    store = Store(settings.db_path)
    work = tmp_path / "work"
    api = make_repo(work / "acme-api", "git@github.com:acme/acme-api.git")
    web = api / "services" / "web"
    web.mkdir(parents=True)
    git(api, "worktree", "add", "-q", str(work / "acme-api-feature"))
    feature = work / "acme-api-feature"
    payments_src = make_repo(work / "payments-src")
    git(api, "submodule", "add", "-q", str(payments_src), "libs/payments")
    payments = api / "libs" / "payments"
    client_a = make_repo(tmp_path / "clientA" / "api", "https://github.com/clientA/api.git")
    client_b = make_repo(tmp_path / "clientB" / "api", "https://github.com/clientB/api.git")
    mono = make_repo(work / "mono")
    (mono / "tools").mkdir()
    (mono / "tools" / ".aimem.toml").write_text('workspace = "team"\nproject = "mono-tools"\n')

    # 1. A session in a subdirectory lands in the repository's project, not `web`.
    s1 = sid("sub")
    assert client.session(s1, web, "paginate the invoices endpoint") == ""
    h1 = wait_for(lambda: store.handoff(s1), what="the handoff of the subdirectory session")
    assert store.project_of(s1) == "default/acme-api" and h1["project"] == "acme-api"
    assert h1["root"] == str(api) and store.page_project(s1) == ["acme-api"]

    # 2. A linked worktree is the same project and continues the same handoff chain.
    s2 = sid("wt")
    ctx = client.start(s2, feature)
    assert s1 in ctx and "paginate the invoices endpoint" in ctx
    client.work(s2, feature, "add cursor tests on the feature branch")
    client.end(s2, feature)
    h2 = wait_for(lambda: store.handoff(s2), what="the worktree session's handoff")
    assert store.project_of(s2) == "default/acme-api" and h2["root"] == str(api)

    # 3. The root's handoff reaches a subdirectory session exactly once.
    s3 = sid("root")
    assert s2 in client.session(s3, api, "release 1.4")
    wait_for(lambda: store.handoff(s3), what="the root session's handoff")
    assert s3 in client.start(sid("sub2"), web)
    assert client.start(sid("sub3"), api / "services") == ""

    # 4. A submodule is its own project and never takes the parent repository's handoffs.
    s4 = sid("submodule")
    assert client.session(s4, payments, "fix rounding in payments") == ""
    wait_for(lambda: store.handoff(s4), what="the submodule session's handoff")
    assert store.project_of(s4) == "default/payments"

    # 5. Two repositories named `api`: two projects, pages and handoffs never mixed.
    s5 = sid("clientA")
    assert client.session(s5, client_a, "clientA: rotate the webhook secret") == ""
    wait_for(lambda: store.handoff(s5), what="client A's handoff")
    s6 = sid("clientB")
    assert client.start(s6, client_b) == ""  # client A's handoff is not client B's
    client.work(s6, client_b, "clientB: upgrade the ORM")
    client.end(s6, client_b)
    wait_for(lambda: store.handoff(s6), what="client B's handoff")
    assert (store.project_of(s5), store.project_of(s6)) == ("default/api", "default/api-2")
    assert store.page_project(s5) == ["api"] and store.page_project(s6) == ["api-2"]
    ctx = client.start(sid("clientA2"), client_a)
    assert s5 in ctx and s6 not in ctx and "upgrade the ORM" not in ctx
    assert store.handoff(s6)["status"] == "open"

    # 6. A marker names the project (and workspace) whatever the repository is called.
    s7 = sid("marker")
    client.hook("UserPromptSubmit", s7, mono / "tools", prompt="lint the tools")
    wait_for(lambda: store.project_of(s7), what="the marker session")
    assert store.project_of(s7) == "team/mono-tools"

    # The keys are readable: `api` and `api-2` say which repository each is.
    listing = httpx.get(procs["query"].url + "/api/v1/workspaces", timeout=10).json()
    by_name = {p["project"]: p for ws in listing if ws["workspace"] == "default" for p in ws["projects"]}
    assert by_name["api"]["root"] == str(client_a) and by_name["api"]["origin"] == "github.com/clientA/api"
    assert by_name["api-2"]["root"] == str(client_b) and by_name["api-2"]["origin"] == "github.com/clientB/api"
    assert by_name["acme-api"]["origin"] == "github.com/acme/acme-api"
    assert "web" not in by_name and "acme-api-feature" not in by_name


# -- capture rules -------------------------------------------------------------------------------
def _all_bytes_under(root: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in root.rglob("*") if p.is_file()]


def _git_objects(wiki: Path) -> bytes:
    """Every object of the wiki repository, decompressed (its whole history)."""
    proc = subprocess.run(["git", "-C", str(wiki), "cat-file", "--batch-all-objects", "--batch"],
                          capture_output=True, check=True)
    return proc.stdout


@pytest.mark.timeout(600)
def test_capture_rules_leave_no_trace_anywhere(services, settings, tmp_path: Path) -> None:
    procs = services("writer", "ingress")
    client = Client(procs["ingress"].url, tmp_path / "client")
    store = Store(settings.db_path)
    tokens = {name: f"NOTRACE{name}{uuid.uuid4().hex[:10]}" for name in ("prompt", "path", "pem", "content")}
    visible = f"VISIBLE{uuid.uuid4().hex[:10]}"

    private = make_repo(tmp_path / "work" / "private-repo")
    (private / ".aimem.toml").write_text("capture = false\n")
    hidden = sid("private")
    client.start(hidden, private)
    client.work(hidden, private, f"deploy with {tokens['prompt']}")
    client.end(hidden, private)

    open_repo = make_repo(tmp_path / "work" / "open-repo")
    (open_repo / ".aimem.toml").write_text('project = "open-repo"\nexclude = ["secrets/**", "*.pem"]\n')
    s = sid("open")
    client.start(s, open_repo)
    client.hook("UserPromptSubmit", s, open_repo, prompt=f"refactor {visible}")
    client.hook("PreToolUse", s, open_repo, tool_name="Read",
                tool_input={"file_path": str(open_repo / "secrets" / f"{tokens['path']}.txt")})
    client.hook("PostToolUse", s, open_repo, tool_name="Read",
                tool_input={"file_path": str(open_repo / "secrets" / f"{tokens['path']}.txt")},
                tool_response={"file": {"content": tokens["content"]}})
    client.hook("PostToolUse", s, open_repo, tool_name="Write",
                tool_input={"file_path": str(open_repo / "certs" / f"{tokens['pem']}.pem"),
                            "content": tokens["content"]}, tool_response={"success": True})
    client.hook("PostToolUse", s, open_repo, tool_name="Edit",
                tool_input={"file_path": str(open_repo / "src" / "app.py"), "old_string": "a",
                            "new_string": visible}, tool_response={"filePath": str(open_repo / "src" / "app.py")})
    client.end(s, open_repo)
    wait_for(lambda: store.handoff(s), what="the open repository's session end")
    page = wait_for(lambda: store.rows("SELECT path FROM pages WHERE session_id = ?", s), what="the session page")
    wiki = settings.wiki_dir
    wait_for(lambda: page[0]["path"].encode() in subprocess.run(
        ["git", "-C", str(wiki), "log", "--name-only", "--format="], capture_output=True).stdout,
        what="the session page in git")
    client.drain()
    assert [r[0] for r in store.rows("SELECT kind FROM observations WHERE session_id = ? ORDER BY id", s)] == [
        "session-start", "user-prompt", "post-tool-use", "session-end"]
    assert store.project_of(hidden) is None
    for proc in procs.values():  # flush WAL, checkpoints and logs before looking
        proc.stop()

    places = {
        "db": _all_bytes_under(settings.db_path.parent),
        "wiki": _all_bytes_under(wiki) + [(wiki / ".git" / "objects", _git_objects(wiki))],
        "nats": _all_bytes_under(tmp_path / "nats-store"),
        "spool": _all_bytes_under(tmp_path / "client"),
        "logs": _all_bytes_under(tmp_path / "logs"),
    }
    assert places["db"] and places["wiki"] and places["nats"] and places["logs"]
    for name, files in places.items():
        for path, data in files:
            for token in tokens.values():
                assert token.encode() not in data, f"{token} found in {name}: {path}"
            assert b"private-repo" not in data, f"the private repository is named in {name}: {path}"
    # The grep can see: what was allowed is in the DB and in the wiki's history.
    assert any(visible.encode() in d for _, d in places["db"])
    assert any(visible.encode() in d for _, d in places["wiki"])


# -- lifecycle -----------------------------------------------------------------------------------
def write_rule(settings, project: str, text: str) -> None:
    """Write ``_rules/house.md`` into ``project`` through the bus (as an MCP write would)."""
    from aimem_common.bus import Bus, connect
    from aimem_common.commands import make_envelope

    async def go() -> None:
        nc = await connect(settings.bus, name="test", reconnect=False)
        try:
            env = make_envelope("page.write", {"path": "_rules/house.md", "body": f"# House rule\n\n{text}\n"},
                                project=project, actor="test")
            await Bus(nc, settings.bus).request(env, timeout_s=30)
        finally:
            await nc.close()

    asyncio.run(go())


@pytest.mark.timeout(600)
def test_start_sources_and_empty_sessions_never_consume_the_handoff(services, settings, tmp_path: Path) -> None:
    procs = services("writer", "ingress")
    client = Client(procs["ingress"].url, tmp_path / "client")
    store = Store(settings.db_path)
    repo = make_repo(tmp_path / "work" / "billing")
    first = sid("first")
    client.session(first, repo, "split the invoice table")
    hid = wait_for(lambda: store.handoff(first), what="the automatic handoff")["id"]

    def status() -> str:
        return store.rows("SELECT status FROM handoffs WHERE id = ?", hid)[0][0]

    write_rule(settings, "billing", "Money is integer cents: never use floats for amounts.")
    # compact continues a session: no claim, the project brief again; resume: nothing new;
    # clear starts a new task: the brief, but not the handoff the cleared session just left.
    contexts = {source: client.start(sid(source), repo, source=source) for source in ("compact", "resume", "clear")}
    assert status() == "open"
    assert all(first not in ctx for ctx in contexts.values())
    assert "integer cents" in contexts["compact"] and "integer cents" in contexts["clear"]
    assert contexts["resume"] == ""
    # A session that only starts and ends gives the handoff back ...
    empty = sid("empty")
    assert first in client.start(empty, repo)
    assert status() == "accepted"
    client.end(empty, repo)
    wait_for(lambda: status() == "open", what="the handoff given back")
    assert store.rows("SELECT end_reason FROM sessions WHERE session_id = ?", empty)[0][0] == "exit"
    # ... so the next real session gets it, exactly once.
    real = sid("real")
    assert first in client.start(real, repo)
    assert first not in client.start(sid("after"), repo)
    assert store.rows("SELECT accepted_session_id FROM handoffs WHERE id = ?", hid)[0][0] == real


@pytest.mark.timeout(600)
def test_an_idle_session_is_finalised_and_a_later_event_resumes_it(services, settings, tmp_path: Path) -> None:
    idle_env = {"AIMEM_MAINTENANCE__SESSION_IDLE_AFTER_S": "6", "AIMEM_MAINTENANCE__IDLE_CHECK_INTERVAL_S": "0.5"}
    procs = services("writer", "ingress", "maintainer", extra_env=idle_env)
    client = Client(procs["ingress"].url, tmp_path / "client")
    store = Store(settings.db_path)
    repo = make_repo(tmp_path / "work" / "ledger")
    s = sid("killed")
    client.start(s, repo)
    client.work(s, repo, "migrate the ledger to UUIDs")  # ... then the terminal is closed: no session end

    def session() -> sqlite3.Row:
        return store.rows("SELECT * FROM sessions WHERE session_id = ?", s)[0]

    wait_for(lambda: session()["ended_at"] is not None, 90, "the idle finalisation")
    assert session()["end_reason"] == "idle"
    page = store.rows("SELECT body, frontmatter FROM pages WHERE session_id = ? AND is_latest = 1", s)[0]
    assert json.loads(page["frontmatter"])["end_reason"] == "idle" and "Ended: idle" in page["body"]
    assert "migrate the ledger to UUIDs" in page["body"]
    assert store.handoff(s)["status"] == "open" and store.handoff(s)["root"] == str(repo)

    # The agent was only suspended: its next event reopens the session ...
    client.hook("UserPromptSubmit", s, repo, prompt="and backfill the old rows")
    wait_for(lambda: session()["observation_count"] == 5, 30, "the resumed event")
    assert session()["ended_at"] is None and session()["end_reason"] is None
    # ... and its end re-renders the same page with how it ended this time.
    client.end(s, repo)
    wait_for(lambda: session()["end_reason"] == "exit", 60, "the re-end")
    page = store.rows("SELECT body, frontmatter FROM pages WHERE session_id = ? AND is_latest = 1", s)[0]
    assert "and backfill the old rows" in page["body"] and "Ended: idle" not in page["body"]
    assert json.loads(page["frontmatter"])["end_reason"] == "exit"
    assert len(store.rows("SELECT id FROM handoffs WHERE from_session_id = ?", s)) == 1

    # On demand: `aimem finalize-idle` asks the maintainer (aimem.maint.finalize_idle) now.
    s2 = sid("manual")
    client.work(s2, repo, "rename the ledger table")
    wait_for(lambda: store.rows("SELECT 1 FROM sessions WHERE session_id = ? AND observation_count = 3", s2),
             30, "the second session's events")
    out = subprocess.run([str(Path(sys.executable).with_name("aimem")), "finalize-idle", "--idle-after-s", "0.001",
                          "--nats", settings.bus.nats_url, "--json"], capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")})
    assert out.returncode == 0, out.stderr
    assert s2 in [f["session_id"] for f in json.loads(out.stdout)["finalized"]]
    assert store.rows("SELECT end_reason FROM sessions WHERE session_id = ?", s2)[0][0] == "idle"
