"""Operator verbs of issue 30 against real processes: ``commit`` and ``compact`` through the
writer, ``reset`` refusing while the stack runs and its preview equal to what it deletes,
``llm-test`` against the FakeLLM, ``generate-auth-token``, ``install-instructions``."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import pytest
from typer.testing import CliRunner

from aimem_cli.commands import operate
from aimem_cli.main import build_app
from aimem_common import config
from aimem_testing.fake_llm import FakeLLM

pytestmark = pytest.mark.integration

ROOT_TOKEN = "root-token-for-tests"


@pytest.fixture
def cli_env(settings):
    return {"AIMEM_AUTH__TOKEN": ROOT_TOKEN, "AIMEM_DATA_DIR": str(settings.data_dir),
            "AIMEM_PORT_BASE": str(settings.port_base), "AIMEM_BUS__NATS_URL": settings.bus.nats_url}


def run(env, *args: str, input: str | None = None):
    return CliRunner().invoke(build_app(), list(args), env=env, input=input)


def test_commit_and_compact_through_the_writer_then_reset_once_stopped(settings, services, cli_env):
    settings.auth.token = ROOT_TOKEN
    settings.writer.git_debounce_ms = 60_000  # nothing commits by itself during the test
    procs = services("writer", "query", extra_env={"AIMEM_WRITER__GIT_DEBOUNCE_MS": "60000"})
    env = {**cli_env, "AIMEM_SERVER_URL": procs["query"].url}
    for i in range(30):
        r = run(env, "write-page", f"notes/n{i}.md", "-p", "alpha", input=f"# Note {i}\n" + "filler text " * 400)
        assert r.exit_code == 0, r.output
    r = run(env, "commit", "-m", "before the cleanup", "--json")
    assert r.exit_code == 0, r.output
    oid = json.loads(r.output)["commit"]
    repo = pygit2.Repository(str(settings.wiki_dir))
    assert str(repo.head.target) == oid
    assert repo[oid].message.startswith("aimem: before the cleanup: ")
    r = run(env, "commit", "-m", "again")
    assert r.exit_code == 0 and "nothing to commit" in r.output, r.output
    r = run(env, "commit", "-m", "two\nlines")
    assert r.exit_code == 1

    r = run(env, "purge-project", "-p", "alpha", "--confirm")
    assert r.exit_code == 0, r.output
    r = run(env, "compact", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["fts_rebuilt"] is True and d["vacuum"] in ("done", "wal_busy")
    assert d["bytes_after"]["total"] < d["bytes_before"]["total"]  # the purged pages' space is released
    assert d["bytes_after"]["db_wal"] == 0 or d["vacuum"] == "wal_busy"
    r = run(env, "compact")
    assert r.exit_code == 0 and "compacted:" in r.output and "->" in r.output
    # a purge run with --compact VACUUMs after its commit, as `compact` does (it used to say "unsupported")
    r = run(env, "write-page", "notes/b.md", "-p", "beta", input="# B\n" + "filler text " * 400)
    assert r.exit_code == 0, r.output
    r = run(env, "purge-project", "-p", "beta", "--confirm", "--compact", "--json")
    assert r.exit_code == 0, r.output
    purged = json.loads(r.output[r.output.index("{"): r.output.rindex("}") + 1])
    assert purged["compact"]["fts_rebuilt"] is True and purged["compact"]["vacuum"] in ("done", "wal_busy"), purged

    # reset refuses while the stack runs (DESIGN invariant 9), even with --confirm
    r = run(env, "reset", "--confirm")
    assert r.exit_code == 1 and "running" in r.output, r.output
    for p in reversed(list(procs.values())):
        p.stop()
    (settings.data_dir / "config.toml").write_text("log_level = 'info'\n")
    (settings.data_dir / "backups").mkdir(exist_ok=True)
    (settings.data_dir / "backups" / "keep.tgz").write_text("x")
    r = run(env, "reset", "--json")
    assert r.exit_code == 1  # a preview, and a refusal
    preview = json.loads(r.output[: r.output.rindex("}") + 1])
    assert preview["dry_run"] is True and {"db", "wiki"} <= set(preview["dirs"])
    assert (settings.db_path).exists()  # nothing deleted by the preview
    r = run(env, "reset", "--confirm", "--json")
    assert r.exit_code == 0, r.output
    done = json.loads(r.output)
    assert (done["files"], done["bytes"]) == (preview["files"], preview["bytes"])
    assert not (settings.data_dir / "db").exists() and not (settings.data_dir / "wiki").exists()
    assert (settings.data_dir / "config.toml").exists() and (settings.data_dir / "backups" / "keep.tgz").exists()


def test_llm_test_probes_llm_and_embedder(tmp_path):
    with FakeLLM() as fake:
        (tmp_path / "config.toml").write_text(
            f'[llm]\nprovider = "openai-compat"\nmodel = "m1"\nbase_url = "{fake.url}"\n'
            f'[embedding]\nprovider = "openai-compat"\nmodel = "e1"\nbase_url = "{fake.url}"\n')
        env = {"AIMEM_DATA_DIR": str(tmp_path)}
        r = run(env, "llm-test")
        assert r.exit_code == 0, r.output
        assert "llm openai-compat/m1: ok" in r.output and "embedding openai-compat/e1: ok" in r.output
        assert fake.chat_count == 1
        fake.mode = "500"
        r = run(env, "llm-test", "--json")
        assert r.exit_code == 1
        d = json.loads(r.output)
        assert d["llm"][0]["ok"] is False and "HTTP 500" in d["llm"][0]["error"]
    # nothing listening any more: a clear connection error, not a traceback
    r = run(env, "llm-test")
    assert r.exit_code == 1 and "cannot connect" in r.output, r.output
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run({"AIMEM_DATA_DIR": str(empty)}, "llm-test")
    assert r.exit_code == 0 and "none configured" in r.output


def test_generate_auth_token(tmp_path):
    r1, r2 = run({}, "generate-auth-token"), run({}, "generate-auth-token")
    assert r1.exit_code == 0 and len(r1.output.strip()) >= 40 and r1.output != r2.output
    env = {"AIMEM_DATA_DIR": str(tmp_path)}
    r = run(env, "generate-auth-token", "--write")
    assert r.exit_code == 0 and config.read_token_file(tmp_path) == r.output.strip()
    assert run(env, "generate-auth-token", "--write").exit_code == 1  # never replaced silently


def test_install_instructions_is_marked_and_idempotent(tmp_path: Path):
    claude = tmp_path / "CLAUDE.md"
    claude.write_text("# House rules\n\nUse tabs.\n")
    r = run({}, "install-instructions", "--dir", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert not (tmp_path / "AGENTS.md").exists()  # only the files that exist
    once = claude.read_text()
    assert once.startswith("# House rules\n\nUse tabs.\n\n" + operate.BEGIN) and once.count(operate.END) == 1
    assert "unchanged" in run({}, "install-instructions", "--dir", str(tmp_path)).output
    assert claude.read_text() == once
    # an edited block is replaced, text after it stays
    claude.write_text(once.replace("memory_query", "EDITED") + "\nMore rules.\n")
    run({}, "install-instructions", "--dir", str(tmp_path))
    assert claude.read_text() == once + "\nMore rules.\n"
    r = run({}, "install-instructions", "--dir", str(tmp_path), "--client", "gemini", "--dry-run")
    assert "would update" in r.output and not (tmp_path / "GEMINI.md").exists()
    run({}, "install-instructions", "--dir", str(tmp_path), "--remove")
    assert claude.read_text() == "# House rules\n\nUse tabs.\n\nMore rules.\n"
    assert run({}, "install-instructions", "--client", "nope").exit_code == 1


def test_message_send_list_pop_cancel(settings, services, cli_env):
    settings.auth.token = ROOT_TOKEN
    procs = services("writer", "query")
    env = {**cli_env, "AIMEM_SERVER_URL": procs["query"].url}
    for pj in ("api", "web"):
        assert run(env, "write-page", "notes/x.md", "-p", pj, input="x").exit_code == 0
    r = run(env, "message", "send", "-p", "api", "--to", "web", "--subject", "v2", "--body", "The v2 API is out.")
    assert r.exit_code == 0 and "sent to default/web" in r.output, r.output
    r = run(env, "message", "send", "-p", "api", "--to", "ghost", "--body", "hi")
    assert r.exit_code == 1  # the recipient is never created
    r = run(env, "message", "send", "-p", "api", "--to", "web", input="second one\n")
    assert r.exit_code == 0, r.output
    r = run(env, "message", "list", "-p", "web", "--json")
    listed = json.loads(r.output)
    assert [m["subject"] for m in listed] == ["v2", None]
    r = run(env, "message", "list", "-p", "api", "--box", "outbox", "--json")
    assert len(json.loads(r.output)) == 2
    r = run(env, "message", "pop", "-p", "web")
    assert r.exit_code == 0 and "The v2 API is out." in r.output, r.output
    r = run(env, "message", "cancel", "-p", "api", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["cancelled"] == [listed[1]["id"]]
    r = run(env, "message", "pop", "-p", "web")
    assert "(no pending message)" in r.output
    assert run(env, "message", "--help").exit_code == 0


def _count(db: Path, sql: str, *args) -> int:
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, args).fetchone()[0]
    finally:
        conn.close()


def test_delete_workspace_preview_equals_the_run_and_spares_other_workspaces(settings, services, cli_env):
    settings.auth.token = ROOT_TOKEN
    procs = services("writer", "query")
    env = {**cli_env, "AIMEM_SERVER_URL": procs["query"].url}
    for ws, pj, path in (("doomed", "a", "n1.md"), ("doomed", "a", "n2.md"), ("doomed", "b", "n1.md"),
                         ("kept", "a", "n1.md")):
        assert run(env, "write-page", path, "-w", ws, "-p", pj, input=f"{ws} {pj} {path}").exit_code == 0
    r = run(env, "delete-workspace", "-w", "doomed")
    assert r.exit_code == 1 and "Would delete workspace doomed (2 projects: a, b): 3 pages" in r.output, r.output
    r = run(env, "delete-workspace", "-w", "doomed", "--confirm", "--json")
    assert r.exit_code == 0, r.output
    done = json.loads(r.output)
    assert done["pages_deleted"] == 3 and done["projects"] == ["a", "b"]
    db = settings.db_path
    assert _count(db, "SELECT count(*) FROM workspaces WHERE name = 'doomed'") == 0
    assert _count(db, "SELECT count(*) FROM pages p JOIN workspaces w ON w.id = p.workspace_id"
                      " WHERE w.name = 'kept' AND p.is_latest = 1") == 1
    r = run(env, "read-page", "n1.md", "-w", "kept", "-p", "a")
    assert r.exit_code == 0 and "kept a n1.md" in r.output
    r = run(env, "delete-workspace", "-w", "doomed", "--confirm")
    assert r.exit_code == 1 and "not found" in r.output


def test_handoffs_expire_all_preview_equals_the_run(settings, services, cli_env):
    import asyncio

    from aimem_common.bus import Bus, connect
    from aimem_common.commands import make_envelope

    settings.auth.token = ROOT_TOKEN
    procs = services("writer", "query")
    env = {**cli_env, "AIMEM_SERVER_URL": procs["query"].url}

    async def begin(project: str, n: int) -> None:
        nc = await connect(settings.bus, name="t", reconnect=False)
        try:
            for i in range(n):
                await Bus(nc, settings.bus).request(
                    make_envelope("handoff.begin", {"body": f"note {i}"}, project=project, actor="root"), timeout_s=30)
        finally:
            await nc.close()

    asyncio.run(begin("app", 3))
    asyncio.run(begin("other", 1))
    r = run(env, "handoffs", "-p", "app", "--expire-all", "--older-than-days", "1")
    assert r.exit_code == 0 and "Would expire 0" in r.output, r.output
    r = run(env, "handoffs", "-p", "app", "--expire-all", "--json")
    preview = json.loads(r.output)
    assert preview["dry_run"] is True and preview["count"] == 3
    assert json.loads(run(env, "handoffs", "-p", "app", "--json").output).__len__() == 3  # nothing changed
    r = run(env, "handoffs", "-p", "app", "--expire-all", "--confirm", "--json")
    done = json.loads(r.output)
    assert done["expired"] == preview["expired"] and done["dry_run"] is False
    assert json.loads(run(env, "handoffs", "-p", "app", "--json").output) == []
    assert len(json.loads(run(env, "handoffs", "-p", "other", "--json").output)) == 1  # another project: untouched
    assert run(env, "handoffs", "-p", "app", "--older-than-days", "3").exit_code == 1
