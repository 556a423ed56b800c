"""Transcript readers of Pi (and OMP, OpenClaw: the same format) and Crush (SQLite), without a
server. The Pi-format lines follow Pi's ``docs/session-format.md``; the Crush database has the
columns of Crush's ``internal/db`` models and its ``{"type", "data"}`` message parts. Real Pi
and Copilot CLI transcripts are read in ``tests/e2e/test_real_agents_extra.py``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from aimem_cli import backfill
from aimem_cli.importer import Importer, classify, discover
from aimem_cli.transcripts import READERS, crush, omp, openclaw, pi
from aimem_cli.transcripts.base import FileState, ReadStats

SID = "0193f0c2-5a7e-7c4d-9a55-3f1d2c0b9e11"


def pi_lines(cwd: str) -> list[dict]:
    ts = "2026-11-20T10:00:0{}.000Z".format
    return [
        {"type": "session", "version": 3, "id": SID, "timestamp": ts(0), "cwd": cwd},
        {"type": "model_change", "id": "a0000001", "parentId": None, "timestamp": ts(0), "provider": "anthropic",
         "modelId": "claude-sonnet-4-5"},
        {"type": "message", "id": "a0000002", "parentId": "a0000001", "timestamp": ts(1),
         "message": {"role": "user", "content": [{"type": "text", "text": "Add retries to the API client"}],
                     "timestamp": 1}},
        {"type": "message", "id": "a0000003", "parentId": "a0000002", "timestamp": ts(2),
         "message": {"role": "assistant", "content": [
             {"type": "thinking", "thinking": "look first"},
             {"type": "toolCall", "id": "toolu_1", "name": "bash", "arguments": {"command": "ls missing_dir"}}],
             "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
             "stopReason": "toolUse", "timestamp": 2}},
        {"type": "message", "id": "a0000004", "parentId": "a0000003", "timestamp": ts(3),
         "message": {"role": "toolResult", "toolCallId": "toolu_1", "toolName": "bash",
                     "content": [{"type": "text", "text": "ls: cannot access 'missing_dir': No such file"}],
                     "isError": True, "timestamp": 3}},
        {"type": "custom_message", "id": "a0000005", "parentId": "a0000004", "timestamp": ts(3),
         "customType": "some-extension", "content": "injected", "display": False},
        {"type": "message", "id": "a0000006", "parentId": "a0000005", "timestamp": ts(4),
         "message": {"role": "assistant", "content": [{"type": "text", "text": "Retries are in place."}],
                     "model": "claude-sonnet-4-5", "stopReason": "stop", "timestamp": 4}},
        {"type": "message", "id": "a0000007", "parentId": "a0000006", "timestamp": ts(5),
         "message": {"role": "bashExecution", "command": "make test", "output": "1 failed", "exitCode": 2,
                     "cancelled": False, "truncated": False, "timestamp": 5}},
        {"type": "compaction", "id": "a0000008", "parentId": "a0000007", "timestamp": ts(6),
         "summary": "Added retries; make test fails on one case.", "firstKeptEntryId": "a0000006",
         "tokensBefore": 50000},
    ]


def write_jsonl(path: Path, lines: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(obj) + "\n" for obj in lines))
    return path


def kinds(events) -> list[str]:
    return [e.payload["hook_event_name"] for e in events]


def test_pi_session_maps_to_the_shared_vocabulary_and_reads_incrementally(tmp_path):
    path = write_jsonl(tmp_path / ".pi/agent/sessions/--w-api--/2026-11-20T10-00-00-000Z_x.jsonl",
                       pi_lines("/w/api"))
    st, rs = FileState(), ReadStats()
    evs = list(pi.read(path, st, rs))
    assert kinds(evs) == ["user-prompt", "post-tool-use", "stop", "post-tool-use", "post-compaction"]
    assert {e.session_id for e in evs} == {SID} and {e.cwd for e in evs} == {"/w/api"}
    assert evs[0].payload["prompt"] == "Add retries to the API client" and evs[0].key == f"pi:{SID}:a0000002:0"
    tool = evs[1].payload
    assert tool["tool_name"] == "bash" and tool["tool_input"] == {"command": "ls missing_dir"}
    assert tool["tool_response"].startswith("Error: ls: cannot access")
    assert evs[2].payload["message"] == "Retries are in place." and evs[2].payload["model"] == "claude-sonnet-4-5"
    assert evs[3].payload["tool_response"] == "exit code: 2\n1 failed"
    assert evs[4].payload["summary"].startswith("Added retries")
    assert rs.lines == 9 and rs.malformed == 0 and st.offset == path.stat().st_size
    # an appended turn: only it is read, with the session's header context carried in the state
    with open(path, "a") as fh:
        fh.write(json.dumps({"type": "message", "id": "a0000009", "parentId": "a0000008",
                             "timestamp": "2026-11-20T10:01:00.000Z",
                             "message": {"role": "user", "content": "now the docs", "timestamp": 9}}) + "\n")
        fh.write('{"type": "message", "id": "a00000')  # being written: left for the next run
    st = FileState.from_json(json.loads(json.dumps(st.to_json())))
    rs = ReadStats()
    evs = list(pi.read(path, st, rs))
    assert [(e.payload["hook_event_name"], e.session_id) for e in evs] == [("user-prompt", SID)]
    assert rs.truncated == 1


def test_omp_and_openclaw_read_the_same_format_under_their_own_names_and_places(tmp_path):
    home = tmp_path
    write_jsonl(home / ".omp/agent/sessions/--w-api--/t_1.jsonl", pi_lines("/w/api"))
    write_jsonl(home / ".openclaw/agents/main/sessions/s-1.jsonl", pi_lines("/w/api"))
    (home / ".openclaw/agents/main/sessions/sessions.json").write_text("{}")  # OpenClaw's index: not a transcript
    assert [p.name for p in omp.discover(home)] == ["t_1.jsonl"]
    assert [p.name for p in openclaw.discover(home)] == ["s-1.jsonl"]
    for module, client in ((omp, "omp"), (openclaw, "openclaw")):
        [path] = module.discover(home)
        evs = list(module.read(path, FileState(), ReadStats()))
        assert evs[0].key == f"{client}:{SID}:a0000002:0" and len(evs) == 5
        assert classify(path) == client
    assert classify(home / ".omp/agent/sessions/--w-api--/t_1.jsonl") == "omp"


def make_crush_db(data_dir: Path) -> Path:
    """A ``crush.db`` with the columns of Crush's ``sessions`` and ``messages`` tables."""
    data_dir.mkdir(parents=True, exist_ok=True)
    db = data_dir / "crush.db"
    conn = sqlite3.connect(db)
    conn.executescript("""
        CREATE TABLE sessions (id TEXT PRIMARY KEY, parent_session_id TEXT, title TEXT NOT NULL,
            message_count INTEGER NOT NULL DEFAULT 0, prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0, cost REAL NOT NULL DEFAULT 0,
            updated_at INTEGER NOT NULL, created_at INTEGER NOT NULL, summary_message_id TEXT, todos TEXT);
        CREATE TABLE messages (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, role TEXT NOT NULL,
            parts TEXT NOT NULL DEFAULT '[]', model TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
            finished_at INTEGER, provider TEXT, is_summary_message INTEGER NOT NULL DEFAULT 0);
    """)
    conn.execute("INSERT INTO sessions (id, title, updated_at, created_at) VALUES ('s1', 'retries', 1, 1)")
    conn.execute("INSERT INTO sessions (id, parent_session_id, title, updated_at, created_at)"
                 " VALUES ('s1-agent', 's1', 'sub', 1, 1)")
    conn.commit()
    conn.close()
    return db


def add_message(db: Path, mid: str, sid: str, role: str, parts: list, *, at: int, finished: bool = True,
                summary: bool = False) -> None:
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO messages (id, session_id, role, parts, model, created_at, updated_at, finished_at,"
                 " is_summary_message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 (mid, sid, role, json.dumps(parts), "claude-sonnet-4" if role == "assistant" else None, at, at,
                  at if finished else None, int(summary)))
    conn.commit()
    conn.close()


def test_crush_database_maps_messages_and_reads_only_finished_new_rows(tmp_path):
    home, repo = tmp_path / "home", tmp_path / "repo"
    db = make_crush_db(repo / ".crush")
    projects = home / ".local/share/crush/projects.json"
    projects.parent.mkdir(parents=True)
    projects.write_text(json.dumps({"projects": [
        {"path": str(repo), "data_dir": str(repo / ".crush"), "last_accessed": "2026-11-20T10:00:00Z"},
        {"path": "/gone", "data_dir": "/gone/.crush", "last_accessed": "2026-11-19T10:00:00Z"}]}, indent=2))
    assert list(crush.discover(home)) == [db] and classify(db) == "crush"
    t = 1_763_632_800
    add_message(db, "m1", "s1", "user", [{"type": "text", "data": {"text": "Add retries"}}], at=t)
    add_message(db, "m2", "s1", "assistant", [
        {"type": "text", "data": {"text": "Checking."}},
        {"type": "tool_call", "data": {"id": "call_1", "name": "bash", "input": '{"command": "ls nope"}',
                                       "finished": True}},
        {"type": "finish", "data": {"reason": "tool_use", "time": t + 1}}], at=t + 1)
    add_message(db, "m3", "s1", "tool", [{"type": "tool_result", "data": {
        "tool_call_id": "call_1", "name": "bash", "content": "ls: nope: No such file", "is_error": True}}], at=t + 2)
    add_message(db, "m4", "s1-agent", "user", [{"type": "text", "data": {"text": "sub-agent task"}}], at=t + 2)
    add_message(db, "m5", "s1", "assistant", [{"type": "text", "data": {"text": "Retries are in."}},
                                              {"type": "finish", "data": {"reason": "end_turn"}}], at=t + 3)
    add_message(db, "m6", "s1", "assistant", [{"type": "text", "data": {"text": "still stream"}}], at=t + 4,
                finished=False)
    st, rs = FileState(), ReadStats()
    evs = list(crush.read(db, st, rs))
    assert kinds(evs) == ["user-prompt", "post-tool-use", "stop"]
    assert {e.session_id for e in evs} == {"s1"} and {e.cwd for e in evs} == {str(repo)}
    assert evs[0].payload["timestamp"] == "2025-11-20T10:00:00Z" and evs[0].key == "crush:m1:0"
    tool = evs[1].payload
    assert tool["tool_input"] == {"command": "ls nope"} and tool["tool_response"] == "Error: ls: nope: No such file"
    assert evs[2].payload["message"] == "Retries are in." and evs[2].payload["model"] == "claude-sonnet-4"
    assert rs.lines == 5 and st.ctx["rowid"] == 5  # stopped before the unfinished m6
    # next run: the finished m6 and a summary; nothing read twice
    conn = sqlite3.connect(db)
    conn.execute("UPDATE messages SET finished_at = ? WHERE id = 'm6'", (t + 5,))
    conn.commit()
    conn.close()
    add_message(db, "m7", "s1", "assistant", [{"type": "text", "data": {"text": "Summary: retries added."}}],
                at=t + 6, summary=True)
    st = FileState.from_json(json.loads(json.dumps(st.to_json())))
    evs = list(crush.read(db, st, ReadStats()))
    assert kinds(evs) == ["stop", "post-compaction"] and evs[0].payload["message"] == "still stream"


def test_crush_unreadable_database_is_one_malformed_document(tmp_path):
    bad = tmp_path / "repo/.crush/crush.db"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a database")
    rs = ReadStats()
    assert list(crush.read(bad, FileState(), rs)) == [] and rs.malformed == 1


def test_importer_sends_crush_and_pi_sessions_and_reads_a_database_again(tmp_path):
    """The importer reads a database on every run (its size says nothing about new rows) and
    batches Pi and Crush sessions with the hook client's identity of their cwd."""
    home, repo = tmp_path / "home", tmp_path / "repo"
    repo.mkdir()
    write_jsonl(home / ".pi/agent/sessions/--repo--/t_1.jsonl", pi_lines(str(repo)))
    db = make_crush_db(repo / ".crush")
    (home / ".local/share/crush").mkdir(parents=True)
    (home / ".local/share/crush/projects.json").write_text(json.dumps(
        {"projects": [{"path": str(repo), "data_dir": str(repo / ".crush")}]}))
    add_message(db, "m1", "s1", "user", [{"type": "text", "data": {"text": "Add retries"}}], at=1_763_632_800)
    sent: list[dict] = []

    def sender(body: bytes) -> dict:
        sent.append(json.loads(body))
        return {"accepted": len(sent[-1]["events"]), "duplicates": 0, "rejected": []}

    files = discover("pi", home) + discover("crush", home)
    stats = Importer(sender, state_path=tmp_path / "state.json").run(files)
    assert stats.events == 6 and {b["agent"] for b in sent} == {"pi", "crush"}
    assert {b["project"] for b in sent} == {"repo"}
    add_message(db, "m2", "s1", "user", [{"type": "text", "data": {"text": "And docs"}}], at=1_763_632_900)
    sent.clear()
    stats = Importer(sender, state_path=tmp_path / "state.json").run(files)
    assert stats.events == 1 and stats.files_unchanged == 1  # the Pi file unchanged, the database read again
    assert [e["payload"]["prompt"] for b in sent for e in b["events"] if not e.get("end")] == ["And docs"]


def test_backfill_on_start_knows_every_client_aimem_import_reads():
    """The hook client keeps its own list (it must not import the readers on every hook)."""
    assert set(backfill.CLIENTS) == set(READERS)
