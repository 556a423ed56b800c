"""``aimem import`` through the real path: CLI → ingress ``/hook/import`` → JetStream → writer.

* a generated corpus (≥ 200 Claude Code and Codex transcripts: resumed sessions,
  compaction records, huge tool outputs, secrets, invalid lines, truncated files) → every
  session's observation count, its page, no handoff, original times; ``capture = false``
  sessions skipped and counted; no secret in the DB, the wiki (with git history) or the
  NATS store; a second run adds 0 (also without the client's state: the keys dedupe);
  appended lines add exactly their events;
* the shared fixture session captured live by the hooks, then imported: nothing doubles;
* identity as the hook client resolves it: a transcript whose cwd is a subdirectory of a
  git repository lands in the project a live hook there created (same root, origin); a
  second repository of the same name is ``api-2``; an event naming a file the marker
  excludes leaves no trace in the DB or the wiki (with its git history), counted.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from aimem_testing.gitrepo import make_repo, wait_for
from aimem_testing.transcripts import SECRETS, _Clock, claude_turn, codex_turn, make_corpus

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]
# ../shared beside the repository (a worktree one level deeper looks one further up).
SHARED = next((p / "shared" / "fixtures" for p in Path(__file__).resolve().parents[3:5]
               if (p / "shared" / "fixtures").is_dir()), Path("/nonexistent"))


def rows(settings, sql: str, args=()) -> list[sqlite3.Row]:
    conn = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def aimem_import(client_dir: Path, url: str, *args: str, status: int = 0) -> dict:
    """Run ``aimem import --json``; assert its exit ``status`` (2: some lines malformed or rejected)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_DATA_DIR=str(client_dir), AIMEM_INGRESS_URL=url)
    proc = subprocess.run([str(Path(sys.executable).with_name("aimem")), "import", "--json", *args],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == status, proc.stderr
    return json.loads(proc.stdout)


def settle(settings, url: str, project: str = "acme-api", timeout_s: float = 120.0) -> None:
    """Wait until the writer applied everything sent so far: a sentinel sent last is stored."""
    sid = f"sentinel-{uuid.uuid4().hex}"
    batch = {"agent": "generic", "project": project, "events": [
        {"key": sid, "payload": {"hook_event_name": "notification", "session_id": sid, "message": "sentinel"}}]}
    assert httpx.post(f"{url}/hook/import", json=batch, timeout=30).status_code == 202
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if settings.db_path.exists() and rows(settings, "SELECT 1 FROM observations WHERE session_id = ?", (sid,)):
            return
        time.sleep(0.1)
    raise AssertionError("the writer did not catch up")


def counts(settings) -> dict[str, int]:
    return {r["session_id"]: r["observation_count"] for r in rows(
        settings, "SELECT session_id, observation_count FROM sessions WHERE session_id NOT LIKE 'sentinel-%'")}


@pytest.mark.timeout(600)
def test_generated_corpus_imports_once_incrementally_and_without_secrets(services, settings, tmp_path):
    url = services("writer", "ingress")["ingress"].url
    corpus = make_corpus(tmp_path / "corpus", claude=110, codex=100)
    assert len(corpus.files) >= 200
    client = tmp_path / "client"

    first = aimem_import(client, url, "--home", str(corpus.home), status=2)  # the corpus has malformed lines
    settle(settings, url)
    expected = {sid: n for sid, n in corpus.expected.items() if sid not in corpus.capture_off}
    assert first["sessions_skipped_capture"] == len(corpus.capture_off) > 0
    assert first["malformed_lines"] == corpus.malformed_lines > 0
    assert len(first["malformed_at"]) == min(5, corpus.malformed_lines)
    assert all(":" in where and Path(where.rsplit(":", 1)[0]).is_file() for where in first["malformed_at"])
    # every stored observation was told as new; the resumed sessions' copied lines as already there
    assert first["new"] == sum(expected.values())
    assert first["new"] + first["already"] + first["captured_live"] == first["events"] - first["rejected_events"]
    assert first["truncated_files"] == corpus.truncated_files > 0
    assert first["events"] >= sum(expected.values())
    assert counts(settings) == expected  # every session, each event once (resumed copies too)
    ended = rows(settings, "SELECT s.session_id, s.started_at, s.ended_at, p.path, p.frontmatter"
                           " FROM sessions s JOIN pages p ON p.id = s.summary_page_id"
                           " WHERE s.session_id NOT LIKE 'sentinel-%'")
    assert {r["session_id"] for r in ended} == set(expected)
    assert all(r["ended_at"].startswith("2026-03") and r["started_at"] < r["ended_at"] for r in ended)
    assert all(json.loads(r["frontmatter"]).get("imported") is True for r in ended)
    assert rows(settings, "SELECT count(*) AS n FROM handoffs")[0]["n"] == 0  # history opens none
    projects = {r["name"] for r in rows(settings, "SELECT name FROM projects")}
    assert "secret-lab" not in projects and {"acme-api", "billing-svc", "web-ui", "infra"} <= projects

    # Secrets: redacted before anything was stored — DB (+WAL), wiki files and history, NATS.
    data = settings.data_dir
    subprocess.run(["git", "-C", str(data / "wiki"), "log", "-p", "--all"], check=True,
                   stdout=open(tmp_path / "gitlog.txt", "wb"))
    haystacks = [p for p in data.rglob("*") if p.is_file()] + [tmp_path / "gitlog.txt"]
    for secret in SECRETS:
        needle = secret.encode()
        leaked = [str(p) for p in haystacks if needle in p.read_bytes()]
        assert not leaked, f"{secret[:8]}… stored in {leaked}"
    assert rows(settings, "SELECT count(*) AS n FROM observations WHERE body LIKE '%[REDACTED:%'")[0]["n"] > 0

    # A second run reads nothing new; without the client's state it re-sends and stores nothing.
    again = aimem_import(client, url, "--home", str(corpus.home))
    assert again["events"] == 0 and again["accepted"] == 0 and again["new"] == 0
    (client / "import-state.json").unlink()
    resent = aimem_import(client, url, "--home", str(corpus.home), status=2)
    assert resent["events"] == first["events"]
    assert resent["new"] == 0 and resent["already"] == first["new"] + first["already"]  # none told as new
    settle(settings, url)
    assert counts(settings) == expected

    # Appending one turn to a Claude Code and a Codex transcript adds exactly those events.
    claude_file = next(p for p in corpus.files if p.suffix == ".jsonl" and "/.claude/" in str(p)
                       and corpus.projects[p.stem] == "acme-api" and p.read_bytes().endswith(b"\n"))
    codex_file = next(p for p in corpus.files if "/.codex/" in str(p) and p.read_bytes().endswith(b"\n")
                      and corpus.projects[p.stem[-36:]] != "secret-lab")
    clock = _Clock(datetime(2026, 4, 2, tzinfo=UTC))
    rng = random.Random(1)
    cwd = str(corpus.repos / "acme-api")
    with open(claude_file, "a") as fh:
        fh.write("\n".join(claude_turn(claude_file.stem, cwd, clock, rng, 77, tools=2)) + "\n")
    codex_cwd = str(corpus.repos / corpus.projects[codex_file.stem[-36:]])
    with open(codex_file, "a") as fh:
        fh.write("\n".join(codex_turn(codex_cwd, clock, rng, 78)) + "\n")
    before = counts(settings)
    more = aimem_import(client, url, "--home", str(corpus.home))
    assert more["new"] == 7
    # only the two appended files are read again (and the truncated ones, whose cut line waits)
    assert more["events"] == 4 + 3
    assert more["files_unchanged"] == len(corpus.files) - 2 - corpus.truncated_files
    settle(settings, url)
    after = counts(settings)
    assert after[claude_file.stem] == before[claude_file.stem] + 4
    assert after[codex_file.stem[-36:]] == before[codex_file.stem[-36:]] + 3
    assert sum(after.values()) == sum(before.values()) + 7
    page = rows(settings, "SELECT p.frontmatter, s.ended_at FROM sessions s JOIN pages p ON p.id = s.summary_page_id"
                          " WHERE s.session_id = ?", (claude_file.stem,))[0]
    assert json.loads(page["frontmatter"])["observation_count"] == after[claude_file.stem]
    assert page["ended_at"].startswith("2026-04-02")  # the re-end took the new last line's time


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared fixtures absent")
def test_import_after_live_capture_of_the_fixture_sessions_does_not_duplicate(services, settings, tmp_path):
    url = services("writer", "ingress")["ingress"].url
    client = tmp_path / "client"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_DATA_DIR=str(client), AIMEM_INGRESS_URL=url)
    aimem = str(Path(sys.executable).with_name("aimem"))
    for agent in ("claude-code", "codex"):
        for path in sorted((SHARED / "hooks" / agent).glob("*.json")):
            if path.name.startswith("_"):
                continue
            subprocess.run([aimem, "hook", "--agent", agent], input=path.read_bytes(), env=env,
                           capture_output=True, timeout=30, check=True)
    subprocess.run([sys.executable, "-m", "aimem_cli.hookclient", "--drain"], env=env, timeout=90, check=True)
    settle(settings, url)
    live = counts(settings)
    assert set(live) == {"3f2b9c1e-7a4d-4e8b-9c21-5d6f0a1b2c3d", "019d036d-c7fa-72d2-b6fd-78878bfe34e4"}
    handoffs = rows(settings, "SELECT count(*) AS n FROM handoffs")[0]["n"]

    stats = aimem_import(client, url, "--path", str(SHARED / "transcripts"))
    assert stats["events"] > 0 and stats["sessions"] == 2
    # told as such: every event belongs to a session the hooks captured, none is new
    assert stats["captured_live"] == stats["events"] - stats["rejected_events"] and stats["new"] == 0
    settle(settings, url)
    assert counts(settings) == live  # the hooks own these sessions: the transcript adds nothing
    assert rows(settings, "SELECT count(*) AS n FROM handoffs")[0]["n"] == handoffs


def test_import_reports_bad_input_and_a_down_server_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_DATA_DIR=str(tmp_path / "client"), AIMEM_INGRESS_URL="http://127.0.0.1:9")
    aimem = str(Path(sys.executable).with_name("aimem"))
    corpus = make_corpus(tmp_path / "c", claude=2, codex=1)
    bad = subprocess.run([aimem, "import", "--client", "nope"], capture_output=True, text=True, env=env)
    assert bad.returncode == 1 and bad.stderr.strip().startswith("error: --client")
    down = subprocess.run([aimem, "import", "--home", str(corpus.home)], capture_output=True, text=True, env=env)
    assert down.returncode == 1 and "cannot reach ingress" in down.stderr and "Traceback" not in down.stderr
    assert not (tmp_path / "client" / "import-state.json").exists()  # nothing was acknowledged
    dry = subprocess.run([aimem, "import", "--dry-run", "--json", "--home", str(corpus.home)],
                         capture_output=True, text=True, env=env)
    assert dry.returncode == 0 and json.loads(dry.stdout)["events"] > 0


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared fixtures absent")
def test_session_end_adds_the_transcript_tail_when_opted_in(services, settings, tmp_path):
    url = services("writer", "ingress")["ingress"].url
    aimem = str(Path(sys.executable).with_name("aimem"))
    transcript = SHARED / "transcripts" / "claude-code-session.sample.jsonl"
    pages = {}
    for opt_in in ("1", "0"):
        sid = f"tail-{opt_in}-{uuid.uuid4().hex[:8]}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
        env.update(AIMEM_DATA_DIR=str(tmp_path / f"client-{opt_in}"), AIMEM_INGRESS_URL=url,
                   AIMEM_HOOK_TRANSCRIPT_TAIL=opt_in)
        base = {"session_id": sid, "transcript_path": str(transcript), "cwd": "/home/dev/projects/acme-api"}
        for event, extra in (("UserPromptSubmit", {"prompt": "add pagination"}),
                             ("SessionEnd", {"reason": "prompt_input_exit"})):
            subprocess.run([aimem, "hook", "--agent", "claude-code"], env=env, timeout=30, check=True,
                           input=json.dumps({**base, "hook_event_name": event, **extra}).encode(),
                           capture_output=True)
        subprocess.run([sys.executable, "-m", "aimem_cli.hookclient", "--drain"], env=env, timeout=90, check=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sid not in pages:
            got = settings.db_path.exists() and rows(settings, "SELECT body FROM pages WHERE session_id = ? AND "
                                                     "is_latest = 1", (sid,))
            if got:
                pages[sid] = got[0]["body"]
            time.sleep(0.1)
    with_tail, without = (pages[s] for s in sorted(pages, key=lambda s: s.split("-")[1], reverse=True))
    assert "## From the transcript" in with_tail and "Pagination is in place" in with_tail
    assert "Last tool results:" in with_tail and "- Read: " in with_tail
    assert "## From the transcript" not in without


def _claude_lines(sid: str, cwd: Path, start: str, calls: list[tuple[str, str]]) -> list[str]:
    """A Claude Code transcript: one prompt, a ``Read`` per ``(file_path, result)``, a final text."""
    n = iter(range(1000))

    def line(kind: str, message: dict) -> str:
        i = next(n)
        return json.dumps({"type": kind, "uuid": f"{sid}-{i}", "sessionId": sid, "cwd": str(cwd),
                           "timestamp": f"{start}:{i:02d}Z", "message": message})

    out = [line("user", {"role": "user", "content": "Tidy the loader."})]
    for k, (path, result) in enumerate(calls):
        out.append(line("assistant", {"role": "assistant", "content": [
            {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {"file_path": path}}]}))
        out.append(line("user", {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{k}", "content": result}]}))
    out.append(line("assistant", {"role": "assistant", "content": [{"type": "text", "text": "Tidied."}]}))
    out.append(json.dumps({"type": "system", "subtype": "turn_duration", "sessionId": sid, "cwd": str(cwd)}))
    return out


@pytest.mark.timeout(300)
def test_import_resolves_projects_like_the_hook_client_and_honours_excludes(services, settings, tmp_path):
    url = services("writer", "ingress")["ingress"].url
    client = tmp_path / "client"
    repo_a = make_repo(tmp_path / "a" / "api", "git@github.com:acme/api.git")
    repo_b = make_repo(tmp_path / "b" / "api", "https://github.com/other/api.git")
    (repo_b / ".aimem.toml").write_text('exclude = ["secrets/**"]\n')  # names nothing: still git's project
    deep = repo_a / "src" / "loader"
    deep.mkdir(parents=True)
    (repo_b / "sub").mkdir()
    # A live hook in repository A creates its project first, keyed by root and origin.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIMEM_")}
    env.update(AIMEM_DATA_DIR=str(client), AIMEM_INGRESS_URL=url, AIMEM_HOOK_BUDGET_MS="5000")
    live = {"session_id": "live-a", "cwd": str(deep), "hook_event_name": "UserPromptSubmit", "prompt": "hi"}
    subprocess.run([str(Path(sys.executable).with_name("aimem")), "hook", "--agent", "claude-code"],
                   input=json.dumps(live).encode(), env=env, capture_output=True, timeout=60, check=True)
    subprocess.run([sys.executable, "-m", "aimem_cli.hookclient", "--drain"], env=env, timeout=90, check=True)

    secret_file = "EXCLUDED-4f1c9d"
    home = tmp_path / "home"
    folder = home / ".claude" / "projects" / "x"
    folder.mkdir(parents=True)
    (folder / "imp-a.jsonl").write_text("\n".join(_claude_lines(
        "imp-a", deep, "2026-03-01T10:00", [(str(deep / "load.py"), "def load(): ...")])) + "\n")
    (folder / "imp-b.jsonl").write_text("\n".join(_claude_lines(
        "imp-b", repo_b / "sub", "2026-03-02T10:00",
        [(str(repo_b / "sub" / "ok.py"), "fine"),
         (str(repo_b / "secrets" / "prod.key"), f"{secret_file} key material")])) + "\n")
    stats = aimem_import(client, url, "--home", str(home), "--client", "claude-code")
    assert stats["events"] == 6 and stats["events_excluded"] == 1 and stats["sessions"] == 2
    settle(settings, url)

    got = {r["session_id"]: (r["project"], r["root"], r["origin"]) for r in rows(
        settings, "SELECT s.session_id, p.name AS project, p.root, p.origin FROM sessions s"
                  " JOIN projects p ON p.id = s.project_id WHERE s.session_id IN ('live-a', 'imp-a', 'imp-b')")}
    assert got == {"live-a": ("api", str(repo_a), "github.com/acme/api"),
                   "imp-a": ("api", str(repo_a), "github.com/acme/api"),  # the live hook's project
                   "imp-b": ("api-2", str(repo_b), "github.com/other/api")}
    assert rows(settings, "SELECT count(*) AS n FROM observations WHERE session_id = 'imp-b'")[0]["n"] == 3
    wiki = settings.wiki_dir
    page = rows(settings, "SELECT p.path FROM sessions s JOIN pages p ON p.id = s.summary_page_id"
                          " WHERE s.session_id = 'imp-b'")[0]["path"]
    wait_for(lambda: page.encode() in subprocess.run(["git", "-C", str(wiki), "log", "--name-only", "--format="],
                                                     capture_output=True).stdout, what="imp-b's page in git")
    # The excluded file's event left no trace: not in any DB file, the wiki or its history.
    for f in settings.db_path.parent.iterdir():
        data = f.read_bytes()
        assert secret_file.encode() not in data and b"prod.key" not in data, f
    history = subprocess.run(["git", "-C", str(wiki), "cat-file", "--batch-all-objects", "--batch"],
                             capture_output=True, check=True).stdout
    files = b"".join(f.read_bytes() for f in wiki.rglob("*") if f.is_file() and ".git" not in f.parts)
    assert secret_file.encode() not in files + history and b"prod.key" not in files + history
