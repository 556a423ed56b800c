"""Forgetting that lasts (issue 34), on the real stack: nats-server, writer, ingress, query,
maintainer with the fake LLM over HTTP, the real ``aimem hook`` client and its spool.

1. ``test_purge_survives_late_events``: a session S that mentions ``zanzibar`` ends while the
   maintainer is away (its consolidation job and ``session.ended`` event wait), then more of S
   arrives from every late path — hooks spooled while ingress was down (drained after the
   purge), events acknowledged while the writer was stopped and published *after* the purge
   command (the backlog behind it), a hook a paused (SIGSTOP) ingress answers only after the
   purge. After ``aimem purge-session`` nothing of S comes back (no session row, observation,
   page, handoff, job, wiki file, FTS hit), the next session start injects nothing of it, the
   fake LLM never sees its text (a control session T is consolidated, so the LLM path is
   live), ingress answers 410 once it sees the tombstone and the spool drops such events, and
   the tombstone counts what it refused (``aimem purges --json``, ``/admin/status``).
2. ``test_doubled_session_end_is_one_event_one_version_one_run``: a client firing its end hook
   twice → one session-end event, one page version, one git commit of the page, one job, one
   LLM run.
3. ``test_import_with_a_revoked_key_exits_non_zero``.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pygit2
import pytest

from aimem_testing.probe import db_rows, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]

AIMEM = str(Path(sys.executable).with_name("aimem"))
SECRET_WORD = "zanzibar"  # the purged session's text; appears in nothing that survives


def rows(settings, sql: str, *args) -> list[sqlite3.Row]:
    """``sql``'s rows on the stack's DB, read-only."""
    return db_rows(settings.db_path, sql, args)


def client_env(client_dir: Path, url: str, budget_ms: int = 3000) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_DATA_DIR=str(client_dir), AIMEM_INGRESS_URL=url, AIMEM_HOOK_BUDGET_MS=str(budget_ms),
               AIMEM_HOOK_IDENTITY="off")
    return env


def hook(client_dir: Path, url: str, sid: str, cwd: Path, event: str, budget_ms: int = 3000, **fields) -> str:
    """Run ``aimem hook --agent claude-code`` as Claude Code does; return its stdout."""
    payload = {"session_id": sid, "cwd": str(cwd), "hook_event_name": event, **fields}
    proc = subprocess.run([AIMEM, "hook", "--agent", "claude-code"], input=json.dumps(payload).encode(),
                          capture_output=True, env=client_env(client_dir, url, budget_ms), timeout=60)
    assert proc.returncode == 0
    return proc.stdout.decode()


def post(url: str, sid: str, cwd: Path, event: str, **fields) -> httpx.Response:
    """POST one Claude Code payload straight to ``/hook`` (a client without the spool)."""
    payload = {"session_id": sid, "cwd": str(cwd), "hook_event_name": event, **fields}
    return httpx.post(f"{url}/hook", params={"agent": "claude-code"}, json=payload, timeout=30)


def spool(client_dir: Path) -> list[dict]:
    from aimem_cli.hookspool import Spool

    return Spool(client_dir / "spool").pending()


def drain(client_dir: Path, url: str) -> None:
    """Deliver the whole spool (what the detached drain of a session end runs)."""
    subprocess.run([sys.executable, "-m", "aimem_cli.hookclient", "--drain"], env=client_env(client_dir, url),
                   timeout=120, check=True)


def settle(settings, url: str, cwd: Path) -> None:
    """Wait until the writer applied everything published so far (a sentinel sent last is stored)."""
    sid = f"sentinel-{time.monotonic_ns()}"
    wait_for(lambda: post(url, sid, cwd, "Notification", message="sentinel").status_code == 202,
             what="the sentinel accepted (429 while a restarted writer reports its lag)")
    wait_for(lambda: rows(settings, "SELECT 1 FROM observations WHERE session_id = ?", sid), what="the writer")


def consolidation_answer(req) -> dict:
    """A valid consolidation answer: one concept page named after the prompt's session."""
    sid = next((w for w in ("t-1", "d-1", "s-1") if f'"{w}"' in req["messages"][1]["content"]), "x")
    return {"language": "en", "pages": [{"path": f"concepts/from-{sid}.md", "title": f"From {sid}",
                                         "body": f"What session {sid} taught.", "entities": []}]}


def maint_config(settings, fake_llm) -> None:
    fake_llm.answers["consolidation"] = consolidation_answer
    (settings.data_dir / "config.toml").write_text(f"""
[llm]
provider = "openai-compat"
model = "fake"
base_url = "{fake_llm.url}"
timeout_s = 10

[consolidation]
retry_base_s = 0.3

[maintenance]
consolidation_poll_s = 0.2
""")


def nothing_of(settings, sid: str) -> None:
    """Assert no row, page, file or index entry of session ``sid`` (or its text) exists."""
    for table, col in (("sessions", "session_id"), ("observations", "session_id"), ("pages", "session_id"),
                       ("handoffs", "from_session_id"), ("session_consolidation_jobs", "session_id"),
                       ("auto_improve_runs", "session_id")):
        assert rows(settings, f"SELECT count(*) FROM {table} WHERE {col} = ?", sid)[0][0] == 0, table
    for table, col in (("pages", "body"), ("observations", "body"), ("observations", "title"),
                       ("handoffs", "body")):
        assert rows(settings, f"SELECT count(*) FROM {table} WHERE {col} LIKE ?", f"%{SECRET_WORD}%")[0][0] == 0, table
    assert rows(settings, "SELECT count(*) FROM observations_fts WHERE observations_fts MATCH ?", SECRET_WORD)[0][0] == 0
    assert rows(settings, "SELECT count(*) FROM pages_fts WHERE pages_fts MATCH ?", SECRET_WORD)[0][0] == 0
    wiki = settings.wiki_dir
    assert not list(wiki.rglob(f"sessions/{sid}.md"))
    for md in wiki.rglob("*.md"):
        assert SECRET_WORD not in md.read_text("utf-8"), md  # the ledger too

    def head_paths() -> list[str]:
        paths: list[str] = []

        def walk(tree, prefix=""):
            for e in tree:
                if e.type_str == "tree":
                    walk(e, prefix + e.name + "/")
                else:
                    paths.append(prefix + e.name)
        walk(pygit2.Repository(str(wiki)).head.peel(pygit2.Tree))
        return paths
    # The deletion reaches git with the next (debounced) checkpoint.
    wait_for(lambda: not [p for p in head_paths() if p.endswith(f"sessions/{sid}.md")], timeout_s=60,
             what="the page's deletion checkpointed")


@pytest.mark.timeout(600)
def test_purge_survives_late_events(settings, services, fake_llm, tmp_path):
    maint_config(settings, fake_llm)
    procs = services("writer", "ingress", "query", "maintainer")
    ingress, query = procs["ingress"].url, procs["query"].url
    cwd = tmp_path / "acme"
    cwd.mkdir()
    client = tmp_path / "client"

    # A control session T: consolidated through the fake LLM (the path is live).
    hook(client, ingress, "t-1", cwd, "SessionStart", source="startup")
    hook(client, ingress, "t-1", cwd, "UserPromptSubmit", prompt="document the ostrich retry budget")
    hook(client, ingress, "t-1", cwd, "Stop", last_assistant_message="The ostrich budget is 3 retries.")
    post(ingress, "t-1", cwd, "SessionEnd", reason="exit")
    wait_for(lambda: any("ostrich" in json.dumps(r["body"]) for r in fake_llm.chat_requests()), what="T consolidated")

    # S ends while the maintainer is away: its job and its session.ended event wait.
    procs["maintainer"].stop()
    hook(client, ingress, "s-1", cwd, "SessionStart", source="startup")
    hook(client, ingress, "s-1", cwd, "UserPromptSubmit", prompt=f"rotate the {SECRET_WORD} key")
    hook(client, ingress, "s-1", cwd, "Stop", last_assistant_message=f"Rotated {SECRET_WORD}.")
    assert post(ingress, "s-1", cwd, "SessionEnd", reason="exit").status_code == 202
    wait_for(lambda: rows(settings, "SELECT 1 FROM session_consolidation_jobs WHERE session_id = 's-1'"),
             what="S's job queued")
    assert rows(settings, "SELECT count(*) FROM handoffs WHERE from_session_id = 's-1'")[0][0] == 1

    # Late path 1: hooks spooled while ingress is down (drained after the purge).
    procs["ingress"].stop()
    hook(client, ingress, "s-1", cwd, "UserPromptSubmit", budget_ms=300, prompt=f"spooled {SECRET_WORD} 1")
    hook(client, ingress, "s-1", cwd, "SessionEnd", budget_ms=300, reason="exit")
    assert len([e for e in spool(client) if e["p"]["session_id"] == "s-1"]) == 2
    procs["ingress"].start()

    # Late path 2: the writer stops; an event acknowledged before the purge command is
    # applied before it; events acknowledged after it wait behind it in the backlog.
    procs["writer"].stop()
    assert post(ingress, "s-1", cwd, "UserPromptSubmit", prompt=f"before the purge {SECRET_WORD}").status_code == 202
    purge: dict = {}
    th = threading.Thread(target=lambda: purge.update(r=httpx.post(
        f"{query}/admin/purge-session", json={"project": "acme", "session_id": "s-1", "confirm": True},
        timeout=300)))
    th.start()
    time.sleep(2.0)  # the purge command is in the stream (query published it and waits for the reply)
    for i in range(3):
        assert post(ingress, "s-1", cwd, "UserPromptSubmit", prompt=f"backlog {SECRET_WORD} {i}").status_code == 202
    assert post(ingress, "s-1", cwd, "SessionEnd", reason="exit").status_code == 202
    procs["writer"].start()
    th.join(120)
    res = purge["r"]
    assert res.status_code == 200, res.text
    report = res.json()
    assert report["observations_deleted"] >= 5 and report["handoffs_deleted"] == 1 and report["pages_deleted"] == 1
    assert report["consolidation_jobs_deleted"] == 1 and report["tombstone_id"]
    settle(settings, ingress, cwd)
    nothing_of(settings, "s-1")

    # Late path 3: a paused ingress holds a hook and answers it after the purge.
    os.kill(procs["ingress"].proc.pid, signal.SIGSTOP)
    try:
        hook(client, ingress, "s-1", cwd, "UserPromptSubmit", budget_ms=500, prompt=f"paused {SECRET_WORD}")
    finally:
        os.kill(procs["ingress"].proc.pid, signal.SIGCONT)
    # Ingress sees the tombstone within its refresh: a 410, final for every client.
    wait_for(lambda: post(ingress, "s-1", cwd, "UserPromptSubmit", prompt="x").status_code == 410,
             timeout_s=30, what="ingress 410")
    gone = post(ingress, "s-1", cwd, "Stop", last_assistant_message=f"{SECRET_WORD}")
    assert gone.status_code == 410 and gone.json()["error"]["code"] == "purged"
    # An import of the purged session: dropped and counted, the batch's other sessions stored.
    batch = {"agent": "claude-code", "project": "acme", "events": [
        {"key": "imp:s-1:0", "payload": {"hook_event_name": "user-prompt", "session_id": "s-1",
                                         "cwd": str(cwd), "prompt": f"imported {SECRET_WORD}"}},
        {"key": "imp:s-1:end", "end": True, "payload": {"session_id": "s-1", "cwd": str(cwd)}},
        {"key": "imp:w-1:0", "payload": {"hook_event_name": "user-prompt", "session_id": "w-1",
                                         "cwd": str(cwd), "prompt": "imported walrus"}}]}
    imported = httpx.post(f"{ingress}/hook/import", json=batch, timeout=30)
    assert imported.status_code == 202 and imported.json()["purged"] == 2 and imported.json()["accepted"] == 1
    # The spool drains: refused for good, nothing left, nothing stored.
    assert len([e for e in spool(client) if e["p"]["session_id"] == "s-1"]) >= 2
    drain(client, ingress)
    assert [e for e in spool(client) if e["p"]["session_id"] == "s-1"] == []

    # The maintainer comes back: S's waiting session.ended queues nothing, the LLM sees nothing of S.
    procs["maintainer"].start()
    settle(settings, ingress, cwd)
    wait_for(lambda: rows(settings, "SELECT refused FROM purge_tombstones WHERE session_id = 's-1'")
             and "consolidation.enqueue" in rows(settings, "SELECT refused FROM purge_tombstones"
                                                 " WHERE session_id = 's-1'")[0][0],
             timeout_s=90, what="S's late session.ended refused")
    time.sleep(1.0)  # a leased job would have reached the LLM by now
    nothing_of(settings, "s-1")
    assert not [r for r in fake_llm.chat_requests() if SECRET_WORD in json.dumps(r["body"])]

    # The next session start in that place injects nothing of S (T's handoff, if any, is T's).
    out = hook(client, ingress, "v-1", cwd, "SessionStart", source="startup")
    assert SECRET_WORD not in out and "s-1" not in out

    # What the purge refused is counted and shown.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_QUERY_URL=query)
    listed = subprocess.run([AIMEM, "purges", "--json", "--server", query], capture_output=True, text=True,
                            env=env, timeout=60)
    assert listed.returncode == 0, listed.stderr
    t = json.loads(listed.stdout)["purges"][0]
    assert t["kind"] == "session" and t["session_id"] == "s-1" and t["removed"]["observations_deleted"] >= 5
    # backlog: 3 prompts + 1 end (+ its session.end); spool: 2 (+ end); 410s: ≥ 2; import: 2;
    # the waiting session.ended: 1
    print("tombstone:", json.dumps(t))
    assert t["refused_events"] >= 11, t
    assert t["refused"]["observation.append"] >= 4 and t["refused"]["session.end"] >= 2  # backlog + import
    status = httpx.get(f"{query}/admin/status", timeout=30).json()
    assert status["purges"]["live"] == {"session": 1} and status["purges"]["refused_events"] == t["refused_events"]
    assert 'aimem_hook_purged_refused_total{route="hook"}' in httpx.get(f"{ingress}/metrics", timeout=30).text

    # Reusing the id on purpose: lift the tombstone, then the id is stored again.
    lifted = subprocess.run([AIMEM, "purge-session", "--session-id", "s-1", "--forget-tombstone", "--json",
                             "--server", query], capture_output=True, text=True, env=env, timeout=60)
    assert lifted.returncode == 0, lifted.stderr
    assert json.loads(lifted.stdout)["lifted"] == [t["id"]]
    wait_for(lambda: post(ingress, "s-1", cwd, "UserPromptSubmit", prompt="on purpose").status_code == 202,
             timeout_s=30, what="the lifted id accepted")
    wait_for(lambda: rows(settings, "SELECT 1 FROM observations WHERE session_id = 's-1'"), what="reuse stored")


@pytest.mark.timeout(300)
def test_doubled_session_end_is_one_event_one_version_one_run(settings, services, fake_llm, tmp_path):
    maint_config(settings, fake_llm)
    procs = services("writer", "ingress", "maintainer")
    ingress = procs["ingress"].url
    cwd = tmp_path / "acme"
    cwd.mkdir()
    client = tmp_path / "client"
    hook(client, ingress, "d-1", cwd, "SessionStart", source="startup")
    hook(client, ingress, "d-1", cwd, "UserPromptSubmit", prompt="add the pelican flag")
    hook(client, ingress, "d-1", cwd, "Stop", last_assistant_message="The pelican flag is added.")
    # The client fires its end hook twice on exit (two hook processes, two keys).
    hook(client, ingress, "d-1", cwd, "SessionEnd", reason="exit")
    hook(client, ingress, "d-1", cwd, "SessionEnd", reason="exit")
    wait_for(lambda: spool(client) == [], what="both ends delivered")
    settle(settings, ingress, cwd)
    wait_for(lambda: rows(settings, "SELECT 1 FROM session_consolidation_jobs WHERE session_id = 'd-1'"
                                    " AND status = 'done'"), what="the consolidation run")
    time.sleep(1.0)  # a second job, had one been queued, would be leased by now
    assert rows(settings, "SELECT count(*) FROM observations WHERE session_id = 'd-1' AND kind = 'session-end'")[0][0] == 1
    assert rows(settings, "SELECT count(*) FROM pages WHERE session_id = 'd-1'")[0][0] == 1
    assert rows(settings, "SELECT count(*) FROM session_consolidation_jobs WHERE session_id = 'd-1'")[0][0] == 1
    assert rows(settings, "SELECT count(*) FROM audit_log WHERE op = 'session.end' AND target = 'd-1'")[0][0] == 1
    assert len([r for r in fake_llm.chat_requests() if "pelican" in json.dumps(r["body"])]) == 1
    repo = pygit2.Repository(str(settings.wiki_dir))
    page = next(settings.wiki_dir.rglob("sessions/d-1.md")).relative_to(settings.wiki_dir).as_posix()
    touching = 0
    for commit in repo.walk(repo.head.target):
        parent = commit.parents[0].tree if commit.parents else None
        diff = commit.tree.diff_to_tree(parent) if parent is not None else commit.tree.diff_to_tree()
        touching += any(page in (d.new_file.path, d.old_file.path) for d in diff.deltas)
    assert touching == 1


@pytest.mark.timeout(300)
def test_import_with_a_revoked_key_exits_non_zero(settings, services, tmp_path):
    """A key that the server refuses (401 after revocation): an error line and exit 1."""
    token = "root-" + "x" * 32
    settings.auth.token = token
    procs = services("writer", "ingress", "query", extra_env={"AIMEM_AUTH__TOKEN": token})
    ingress, query = procs["ingress"].url, procs["query"].url
    auth = {"Authorization": f"Bearer {token}"}
    assert httpx.post(f"{query}/admin/users", json={"name": "ann"}, headers=auth, timeout=30).status_code in (200, 201)
    key = httpx.post(f"{query}/admin/api-keys", json={"user": "ann"}, headers=auth, timeout=30).json()
    assert httpx.put(f"{query}/admin/grants", json={"user": "ann", "workspace": "default", "project": "acme",
                                                     "can_write": True}, headers=auth, timeout=30).status_code == 200
    home = tmp_path / "home"
    tdir = home / ".claude" / "projects" / "acme"
    tdir.mkdir(parents=True)
    (tdir / "s-9.jsonl").write_text(json.dumps({
        "type": "user", "sessionId": "s-9", "cwd": str(tmp_path / "acme"), "timestamp": "2026-01-01T00:00:00Z",
        "message": {"role": "user", "content": "hello"}}) + "\n")
    revoke = httpx.delete(f"{query}/admin/api-keys/{key['id']}", headers=auth, timeout=30)
    assert revoke.status_code == 200, revoke.text
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")} | {"AIMEM_DATA_DIR": str(tmp_path / "c")}
    proc = subprocess.run([AIMEM, "import", "--home", str(home), "--server", ingress, "--token", key["key"]],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "401" in proc.stderr and proc.stdout == ""


@pytest.mark.timeout(300)
def test_the_first_event_after_a_purge_is_refused_by_ingress(settings, services, tmp_path):
    """Ingress re-reads the tombstones every second on its own: the first event of a purged
    session that comes more than a second after the purge is a 410, not a 202 answered from
    the ids read before the purge (the writer would drop it anyway; the client would keep it)."""
    procs = services("writer", "ingress", "query")
    ingress, query = procs["ingress"].url, procs["query"].url
    cwd = tmp_path / "acme"
    cwd.mkdir()
    assert post(ingress, "p-1", cwd, "UserPromptSubmit", prompt=f"the {SECRET_WORD} plan").status_code == 202
    settle(settings, ingress, cwd)  # ingress has read the (empty) tombstones meanwhile
    res = httpx.post(f"{query}/admin/purge-session", json={"project": "acme", "session_id": "p-1", "confirm": True},
                     timeout=120)
    assert res.status_code == 200, res.text
    time.sleep(2.0)  # quiet: nothing asks ingress about p-1 in between
    first = post(ingress, "p-1", cwd, "UserPromptSubmit", prompt=f"late {SECRET_WORD}")
    assert first.status_code == 410 and first.json()["error"]["code"] == "purged", first.text
    settle(settings, ingress, cwd)
    assert rows(settings, "SELECT count(*) FROM observations WHERE session_id = 'p-1'")[0][0] == 0
